"""A real Hindsight 1.1.0 for tests, from its own virtual environment (`make hindsight`), on the
embedded PostgreSQL (which ships pgvector), with the local fake for its LLM and embeddings."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import psycopg

from tests.support.lifetime import die_with_parent

ROOT = Path(__file__).resolve().parents[2]


def hindsight_binary() -> Path | None:
    path = Path(os.environ.get("ENGRAM_TEST_HINDSIGHT_BIN") or ROOT / ".venv-hindsight" / "bin" / "hindsight-api")
    return path if path.exists() else None


class HindsightServer:
    def __init__(self, database, llm_url: str, log: Path, *, guard_public_key: str | None = None,
                 observations: bool = False, embeddings: tuple[str, int] | None = None) -> None:
        """`embeddings`: (base URL, dimensions) of another embeddings server than the fake LLM (benchmarks)."""
        binary = hindsight_binary()
        if binary is None:
            raise RuntimeError("Hindsight is not installed: run `make hindsight`")
        self.binary, self.database, self.llm_url, self.log = binary, database, llm_url, log
        self.guard_public_key, self.observations = guard_public_key, observations
        self.embeddings = embeddings or (llm_url, 64)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.llm = None  # set by start_with_fake_llm

    def start(self, timeout: float = 120) -> HindsightServer:
        db = self.database
        with psycopg.connect(db.conninfo, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_"))}
        env.update({
            "HINDSIGHT_API_DATABASE_URL": f"postgresql://{db.user}@/{db.dbname}?host={db.host}&port={db.port}",
            "HINDSIGHT_API_HOST": "127.0.0.1", "HINDSIGHT_API_PORT": str(self.port),
            "HINDSIGHT_API_LLM_PROVIDER": "openai", "HINDSIGHT_API_LLM_BASE_URL": self.llm_url,
            "HINDSIGHT_API_LLM_API_KEY": "test", "HINDSIGHT_API_LLM_MODEL": "fake",
            "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai", "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": self.embeddings[0],
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": "test", "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "fake-embed",
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS": str(self.embeddings[1]), "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
            "HINDSIGHT_API_SKIP_LLM_VERIFICATION": "true", "HINDSIGHT_API_LLM_TRACE_ENABLED": "false",
            "HINDSIGHT_API_OPERATION_RETENTION_DAYS": "1", "HINDSIGHT_API_STORE_DOCUMENT_TEXT": "false",
            "HINDSIGHT_API_ENABLE_OBSERVATIONS": str(self.observations).lower(),
            "HINDSIGHT_API_ENABLE_AUTO_CONSOLIDATION": "false",  # tests trigger consolidation themselves
        })
        if self.guard_public_key:
            # Hindsight imports only the guard package, not the rest of Engram's source tree
            guard_path = self.log.parent / "guard-path"
            guard_path.mkdir(exist_ok=True)
            link = guard_path / "hindsight_guard"
            if not link.exists():
                link.symlink_to(ROOT / "src" / "hindsight_guard")
            env.update({
                "PYTHONPATH": str(guard_path),
                "HINDSIGHT_API_TENANT_EXTENSION": "hindsight_guard.extension:EngramTenant",
                "HINDSIGHT_API_TENANT_ENGRAM_PUBLIC_KEY": self.guard_public_key,
                "HINDSIGHT_API_OPERATION_VALIDATOR_EXTENSION": "hindsight_guard.extension:EngramBankGuard",
                "HINDSIGHT_API_OPERATION_VALIDATOR_ENGRAM_PUBLIC_KEY": self.guard_public_key,
            })
        self.proc = subprocess.Popen([str(self.binary)], env=env, stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hindsight-api exited; see {self.log}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError("hindsight-api did not become healthy")

    def close(self) -> None:
        self.stop()
        if self.llm is not None:
            self.llm.stop()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None


def start_with_fake_llm(database, log: Path, *, guard_public_key: str | None, observations: bool = False,
                        observe=None, embeddings: tuple[str, int] | None = None) -> HindsightServer:
    """A Hindsight on its own database with its own fake LLM (as `server.llm`); `close()` stops both."""
    from tests.support.fake_llm import FakeLLM

    database.ensure_exists()
    llm = FakeLLM().start()
    llm.observe = observe
    try:
        server = HindsightServer(database, llm.url, log, guard_public_key=guard_public_key,
                                 observations=observations, embeddings=embeddings).start()
    except BaseException:
        llm.stop()
        raise
    server.llm = llm
    return server


def start_beside(postgres, name: str, log_dir: Path, *, guard_public_key: str) -> HindsightServer:
    """`start_with_fake_llm` on database `name` of the suite's embedded PostgreSQL (`postgres` fixture)."""
    from engram.adapters.database import Database

    info = postgres.server.get_postmaster_info()
    database = Database(name, str(info.socket_dir), str(info.port or 5432), "postgres", "")
    return start_with_fake_llm(database, log_dir / "hindsight.log", guard_public_key=guard_public_key)
