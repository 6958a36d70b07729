"""What the recall benchmarks share: a fresh embedded PostgreSQL with an in-process Engram on it,
optionally a real Hindsight 1.1.0 behind Engram's guard (the test suite's server and fake LLM), and
percentiles."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the Hindsight mode borrows the suite's server and fake LLM

from engram.adapters.database import Database, EmbeddedPostgres  # noqa: E402
from engram.api.bootstrap import Engram  # noqa: E402
from engram.service.settings import Settings  # noqa: E402


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else values[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_hindsight(db: Database, tmp: Path, engram_master: str) -> Any:
    """A real Hindsight on its own database beside Engram's, trusting Engram's signing key."""
    from engram.adapters.crypto import MasterKey
    from engram.hindsight_guard.tokens import public_key_text

    from hindsight_server import start_with_fake_llm

    key = public_key_text(MasterKey.from_text(engram_master).hindsight_signing_key())
    return start_with_fake_llm(db.with_dbname("hindsight_bench"), tmp / "hindsight.log", guard_public_key=key)


@dataclass
class Bench:
    engram: Engram
    db: Database
    tmp: Path
    master: str
    secret: str
    hindsight: Any = None


@contextmanager
def fresh_engram(*, hindsight: bool = False, lazy_commit: bool = False) -> Iterator[Bench]:
    """An Engram (no background loops) on a new embedded PostgreSQL in a temporary directory; with
    `hindsight`, a Hindsight configured as its semantic index. Everything stops, and the directory
    goes, on exit.
    `lazy_commit` turns off `synchronous_commit` on this throwaway server: a bulk load through the
    services then does not wait for a disk flush at each of its many small commits."""
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    secret = "bench-secret-" + "z" * 32
    pg = EmbeddedPostgres(tmp)
    db = pg.start()
    if lazy_commit:
        with psycopg.connect(db.with_dbname("postgres").conninfo, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("SELECT pg_reload_conf()")
    server = engram = None
    try:
        settings = Settings(data_dir=tmp, database_url=None, master_key=master, token_secret=secret)
        if hindsight:
            server = start_hindsight(db, tmp, master)
            settings = Settings(data_dir=tmp, database_url=None, master_key=master, token_secret=secret,
                                hindsight_url=server.url)
        engram = Engram.open(settings, database=db, background=False)
        yield Bench(engram, db, tmp, master, secret, server)
    finally:
        if engram is not None:
            engram.close()
        if server is not None:
            server.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
