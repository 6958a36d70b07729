# Everything installs into .venv at the repository root.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install serve test test-unit test-integration test-e2e bench clean

$(BIN)/engram: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/engram

install: $(BIN)/engram

serve: install
	$(BIN)/engram serve

test: install
	$(BIN)/python -m pytest -q tests

test-unit: install
	$(BIN)/python -m pytest -q tests/unit

test-integration: install
	$(BIN)/python -m pytest -q tests/integration

test-e2e: install
	$(BIN)/python -m pytest -q tests/e2e

bench: install
	$(BIN)/python bench/recall.py

clean:
	rm -rf $(VENV) .engram
