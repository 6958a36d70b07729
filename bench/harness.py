"""What the recall benchmarks share: a fresh embedded PostgreSQL with an in-process Engram on it,
optionally a real Hindsight 1.1.0 behind Engram's guard (the test suite's server and fake LLM), and
percentiles."""

from __future__ import annotations

import base64
import importlib.util
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

from engram.adapters.database import Database, EmbeddedPostgres
from engram.api.bootstrap import Engram
from engram.service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if len(values) > 1 else values[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, tries: int = 300) -> bool:
    """Until `url`/healthz answers 200 (a server just started); False if it never did."""
    for _ in range(tries):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def start_minilm(tmp: Path) -> tuple[str, int, subprocess.Popen[bytes]]:
    """bench/minilm.py (all-MiniLM-L6-v2, 384 dimensions) under Hindsight's environment: its base URL,
    its dimensions and its process."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("the MiniLM model is not installed: run `make bench-model`")
    model_zip = Path(spec.origin).parent / "model.zip"
    port = free_port()
    proc = subprocess.Popen([str(ROOT / ".venv-hindsight" / "bin" / "python"), str(ROOT / "bench" / "minilm.py"),
                             "--model-zip", str(model_zip), "--port", str(port)],
                            stdout=open(tmp / "minilm.log", "ab"), stderr=subprocess.STDOUT,
                            # one BLAS thread: several at once on a busy machine made each call ten times slower
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(300):
        try:
            if httpx.post(url + "/embeddings", json={"input": ["ready?"]}, timeout=5).status_code == 200:
                return url, 384, proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the MiniLM embeddings server did not start; see {tmp / 'minilm.log'}")


def start_hindsight(db: Database, tmp: Path, engram_master: str, embeddings: tuple[str, int] | None = None) -> Any:
    """A real Hindsight on its own database beside Engram's, trusting Engram's signing key; its LLM is
    the suite's fake, and so are its embeddings unless `embeddings` (base URL, dimensions) names others."""
    from engram.adapters.crypto import MasterKey
    from engram.hindsight_guard.tokens import public_key_text

    from tests.support.hindsight_server import start_with_fake_llm

    key = public_key_text(MasterKey.from_text(engram_master).hindsight_signing_key())
    return start_with_fake_llm(db.with_dbname("hindsight_bench"), tmp / "hindsight.log", guard_public_key=key,
                               embeddings=embeddings)


@dataclass
class Bench:
    engram: Engram
    db: Database
    tmp: Path
    master: str
    secret: str
    hindsight: Any = None


@contextmanager
def fresh_engram(*, hindsight: bool = False, lazy_commit: bool = False, minilm: bool = False) -> Iterator[Bench]:
    """An Engram (no background loops) on a new embedded PostgreSQL in a temporary directory; with
    `hindsight`, a Hindsight configured as its semantic index. Everything stops, and the directory
    goes, on exit.
    `lazy_commit` turns off `synchronous_commit` on this throwaway server: a bulk load through the
    services then does not wait for a disk flush at each of its many small commits. `minilm` gives
    Hindsight real embeddings (bench/minilm.py) instead of the fake's."""
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    secret = "bench-secret-" + "z" * 32
    pg = EmbeddedPostgres(tmp)
    db = pg.start()
    if lazy_commit:
        with psycopg.connect(db.with_dbname("postgres").conninfo, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("SELECT pg_reload_conf()")
    server = engram = embedder = None
    try:
        settings = Settings(data_dir=tmp, database_url=None, master_key=master, token_secret=secret)
        if hindsight:
            embeddings = None
            if minilm:
                url, dims, embedder = start_minilm(tmp)
                embeddings = (url, dims)
            server = start_hindsight(db, tmp, master, embeddings)
            settings = Settings(data_dir=tmp, database_url=None, master_key=master, token_secret=secret,
                                hindsight_url=server.url)
        engram = Engram.open(settings, database=db, background=False)
        yield Bench(engram, db, tmp, master, secret, server)
    finally:
        if engram is not None:
            engram.close()
        if server is not None:
            server.close()
        if embedder is not None:
            embedder.terminate()
            embedder.wait(timeout=10)
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def seed_corrected(engram: Engram, pairs: int, text: Callable[[int], str], extra: Callable[[int], str],
                   people: int = 100) -> int:
    """`pairs` memories, each `Remembered` then `Corrected` (text + " and " + extra), stored straight into
    the event store in batches of 250, with no projector run; returns the number of events."""
    from uuid import uuid4

    from engram.domain.evidence import Evidence, Source
    from engram.domain.memory import Memory
    from engram.domain.scope import Scope

    now = engram.ledger.clock.now()
    src = Source("chat", "chat-1", "m-1")

    def memories() -> Iterator[Memory]:
        for i in range(pairs):
            said = text(i)
            m = Memory.remember(id=uuid4(), scope=Scope("acme", f"p{i % people}"), source=src.as_dict(), text=said,
                                evidence=[Evidence(said, src, now).as_dict()], valid_from=None, valid_to=None,
                                actor="bench", at=now)
            m.correct(text=said + " and " + extra(i), valid_from=None, valid_to=None, reason=None, actor="bench",
                      at=now)
            yield m

    save_in_batches(engram, memories())
    return pairs * 2


def save_in_batches(engram: Engram, memories: Iterable[Any], size: int = 250, threads: int = 8) -> None:
    """Give each new memory its data key and store them `size` at a time, straight into the event store.
    The keys of a batch are created `threads` at a time (each in its own transaction, as `remember`
    creates one), and the sealing mapper finds them prefetched in one query instead of one each."""
    from concurrent.futures import ThreadPoolExecutor

    keys = engram.store.keys

    def store(batch: list[Any]) -> None:
        list(pool.map(lambda m: keys.create(m.id, m.company), batch))
        with keys.prefetched(m.id for m in batch):
            engram.store.save(*batch)

    with ThreadPoolExecutor(threads) as pool:
        batch: list[Any] = []
        for m in memories:
            batch.append(m)
            if len(batch) == size:
                store(batch)
                batch = []
        if batch:
            store(batch)


class EmbeddedServe:
    """`engram serve` on the embedded default (its own PostgreSQL in `data_dir`), as an operator runs it,
    with `env` added to a clean environment; `engram` commands (backup, restore) run beside it on the
    same data. It keeps its port across a stop and a start."""

    def __init__(self, data_dir: Path, secret: str, **env: str) -> None:
        self.data_dir, self.secret = data_dir, secret
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")},
                    "ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_TOKEN_SECRET": secret, **env}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.data_dir.parent / f"{self.data_dir.name}-serve.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen([str(Path(sys.executable).parent / "engram"), "serve", "--port", str(self.port)],
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"engram serve exited; see {log}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"engram serve was not ready within {timeout:.0f} s; see {log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self.proc = None

    def command(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`engram ARGS` on this service's data and configuration."""
        return subprocess.run([str(Path(sys.executable).parent / "engram"), *args], env=self.env,
                              capture_output=True, text=True, timeout=300)


def dump_fusion_components(engram: Any, asked: list[tuple[Any, dict[str, Any]]], path: Path) -> None:
    """What recall's fusion combines (ADR 0040), per question: the words' BM25 rows and the similarity of
    every memory of its person, pickled for bench/fusion.py to search the fusion's constants offline.
    `asked`: (caller, question) pairs; each question has its `id`, `query`, `as_of` and `answer_ids`."""
    import pickle

    recall, meaning = engram.recall, engram.recall.meaning
    held: dict[str, Any] = {}
    original = recall._meant

    def capture(access: Any, near: Any, hints: Any, found: Any, filters: Any, limit: int, dated: bool = False) -> Any:
        held["words"] = {str(r["memory_id"]): float(r["score"] or 0.0) for r in found}
        held["dated"] = dated
        return original(access, near, hints, found, filters, limit, dated)

    recall._meant = capture
    out = {}
    try:
        for caller, q in asked:
            held.clear()
            recall.recall(caller, query=q["query"], as_of=q["as_of"], max_bytes=1 << 20, limit=10)
            ids, scores = meaning.similarities(caller.company, caller.person, q["query"])
            out[q["id"]] = {"q": q, "ids": ids, "scores": scores.tolist(), "words": held.get("words", {}),
                            "dated": held.get("dated", False)}
    finally:
        recall._meant = original
    path.write_bytes(pickle.dumps(out))
