"""The Hindsight sync backlog as an operator and a company admin see it: `engram serve` with a real
Hindsight, two companies, Hindsight stopped and started again. `GET /v1/admin/status` shows the
caller's company's wishes by state; `engram projections status` shows every company's."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram.adapters.crypto import MasterKey
from engram.adapters.database import Database, EmbeddedPostgres
from engram.hindsight_guard.tokens import public_key_text

from tests.support.helpers import SECRET, auth, remember_body, wait_for, wait_until_ready
from tests.support.hindsight_server import hindsight_binary, start_with_fake_llm

ENGRAM = str(Path(sys.executable).parent / "engram")
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(hindsight_binary() is None, reason="Hindsight not installed (make hindsight)")]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Database]:
    """One PostgreSQL for Engram's database and Hindsight's: `engram projections status` reads
    Engram's while `engram serve` runs."""
    server = EmbeddedPostgres(tmp_path / "pg")
    yield server.start()
    server.stop()


def _url(database: Database) -> str:
    return f"postgresql://{database.user}@/{database.dbname}?host={database.host}&port={database.port}"


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sync_backlog_per_company_over_http_and_on_the_command_line(tmp_path: Path, cluster: Database) -> None:
    engram_db, hindsight_db = cluster.with_dbname("engram"), cluster.with_dbname("hindsight")
    engram_db.ensure_exists()
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    hindsight = start_with_fake_llm(hindsight_db, tmp_path / "hindsight.log",
                                    guard_public_key=public_key_text(MasterKey.from_text(master).hindsight_signing_key()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({"ENGRAM_DATA_DIR": str(tmp_path / "data"), "ENGRAM_MASTER_KEY": master, "ENGRAM_TOKEN_SECRET": SECRET,
                "ENGRAM_DATABASE_URL": _url(engram_db), "ENGRAM_HINDSIGHT_URL": hindsight.url,
                "ENGRAM_WORKER_INTERVAL": "0.2"})
    port = _port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen([ENGRAM, "serve", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    acme_admin, globex_admin = auth(role="admin", user="root"), auth(company="globex", role="admin", user="root")

    def backlog(c: httpx.Client, admin: dict[str, str]) -> dict[str, int]:
        r = c.get("/v1/admin/status", headers=admin)
        assert r.status_code == 200, r.text
        return r.json()["backlogs"]["hindsight_sync"]

    def projections_status() -> list[str]:
        out = subprocess.run([ENGRAM, "projections", "status"], env=env, check=True, capture_output=True, text=True,
                             timeout=120).stdout
        return [line.split() for line in out.splitlines() if line.startswith("hindsight_sync company")]

    try:
        wait_until_ready(serve, url, lambda: log.read_text()[-3000:], timeout=120)
        with httpx.Client(base_url=url, timeout=60) as c:
            for text, who in (("The printer on floor 2 jams on Mondays", auth()),
                              ("Quarterly numbers go to finance first", auth()),
                              ("The globex office closes at six", auth(company="globex", user="bob"))):
                assert c.post("/v1/memories", headers=who, json=remember_body(text)).status_code == 201
            wait_for(lambda: backlog(c, acme_admin) == {"done": 2}, 120, "acme's memories in Hindsight")
            # each company sees its own wishes only
            assert wait_for(lambda: backlog(c, globex_admin) == {"done": 1}, 60, "globex's memory in Hindsight")

            hindsight.stop()  # down: acme's next memory waits in the backlog
            assert c.post("/v1/memories", headers=auth(), json=remember_body("Badges are renewed in May")
                          ).status_code == 201
            wait_for(lambda: backlog(c, acme_admin) == {"done": 2, "pending": 1}, 30, "acme's pending wish")
            assert backlog(c, globex_admin) == {"done": 1}
            assert projections_status() == [["hindsight_sync", "company", "acme", "done", "2", "pending", "1"],
                                            ["hindsight_sync", "company", "globex", "done", "1"]]
            metrics = c.get("/metrics")
            assert 'engram_hindsight_sync{state="pending"} 1' in metrics.text

            hindsight.start()  # back: the syncer's retries (with backoff) drain the backlog
            wait_for(lambda: backlog(c, acme_admin) == {"done": 3}, 120, "the backlog to drain")
        assert projections_status() == [["hindsight_sync", "company", "acme", "done", "3"],
                                        ["hindsight_sync", "company", "globex", "done", "1"]]
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
        hindsight.close()
