"""Shared fixtures: one real embedded PostgreSQL for the session, a fresh database per test."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from engram.adapters.database import Database, EmbeddedPostgres

from tests.support.helpers import SECRET, examples, fresh_database

# hypothesis' own default (100 examples) in the whole suite, a fifth of it in a quick run (tests/support/helpers.py).
settings.register_profile("engram", max_examples=examples(100))
settings.load_profile("engram")


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    if os.environ.get("ENGRAM_TEST_DATABASE_URL"):
        yield None  # type: ignore[misc]
        return
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def database(postgres: EmbeddedPostgres) -> Database:
    return fresh_database(postgres)


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    from engram.service.settings import Settings

    return Settings(
        data_dir=tmp_path / "data",
        database_url=None,
        master_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
        token_secret=SECRET,
        max_text_bytes=8192,
        candidate_ttl_days=30,
        poll_interval=0.2,
        db_pool_size=4,
    )


@pytest.fixture
def log_stream() -> Iterator[Any]:
    """A stream for `engram.adapters.logs.configure(..., stream=)`; the logging set-up is restored after."""
    import io
    import logging

    root, engram_logger = logging.getLogger(), logging.getLogger("engram")
    handlers, levels = list(root.handlers), (root.level, engram_logger.level)
    yield io.StringIO()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(levels[0])
    engram_logger.setLevel(levels[1])
    logging.captureWarnings(False)


@pytest.fixture
def llm() -> Iterator[Any]:
    """The fake OpenAI-compatible model server (the only fake besides embeddings)."""
    from tests.support.fake_llm import FakeLLM

    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def engram(settings: Any, database: Database) -> Iterator[Any]:
    from engram.api.bootstrap import Engram

    system = Engram.open(settings, database=database, background=False)
    yield system
    system.close()


@pytest.fixture
def client(engram: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from engram.api.http import create_app

    with TestClient(create_app(engram, SECRET), raise_server_exceptions=False) as c:
        yield c




# Under CI every real server must start: a skipped test there is a failure, not a pass.
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and os.environ.get("CI"):
        _skipped.append(f"{report.nodeid}: {report.longrepr[-1] if isinstance(report.longrepr, tuple) else ''}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _skipped:
        terminalreporter.write_line(f"CI=true: {len(_skipped)} skipped test(s) count as failures:", red=True)
        for line in _skipped:
            terminalreporter.write_line("  " + line)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Broker clients of finished tests may still log from daemon threads while the interpreter exits;
    # nothing may print after the summary line.
    import logging

    logging.disable(logging.CRITICAL)
