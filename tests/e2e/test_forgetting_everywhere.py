"""Forgetting you can verify, end to end, as an operator runs it: `engram serve` (embedded) or relay,
workers and serve (distributed) as processes, with a real Hindsight on its own PostgreSQL.

Remember one memory and learn another from a receipt; correct; recall; forget both. Each forget
reaches `purge_complete` with every copy of the deployment and its evidence. Then the texts are in
no pg_dump, no database file, no Kafka topic, no Hindsight table, no file under the data directory
and no log line.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engram.adapters.crypto import MasterKey
from engram.adapters.database import Database, EmbeddedPostgres
from engram.hindsight_guard.tokens import public_key_text

from tests.support.broker import TansuBroker, tansu_binary, topic_bytes
from tests.support.helpers import SECRET, auth, files_containing, pg_dump, wait_for, wait_until_ready
from tests.support.hindsight_server import hindsight_binary, start_with_fake_llm

ENGRAM = str(Path(sys.executable).parent / "engram")
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(hindsight_binary() is None, reason="Hindsight not installed (make hindsight)")]

REMEMBERED = "The kestrel-7741 nests behind the old boathouse"
CORRECTED = "The kestrel-7741 moved to the lighthouse-4418 roof"
RECEIPT = "Thanks! I prefer quince-5309 jam on Sunday mornings."
SOURCE_ID, MESSAGE_ID, RECEIPT_MESSAGE = "chat-heron-2290", "msg-otter-3317", "msg-wren-8842"
NEEDLES = [b"kestrel-7741", b"lighthouse-4418", b"quince-5309", b"boathouse", b"quince-5309 jam",
           SOURCE_ID.encode(), MESSAGE_ID.encode(), RECEIPT_MESSAGE.encode()]


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dump(database: Database) -> bytes:
    return pg_dump(database, "--inserts", timeout=180)


def hits(blob: bytes) -> list[bytes]:
    """Needles in the clear, or hex-encoded as pg_dump writes bytea (the event store's states)."""
    return [n for n in NEEDLES if n in blob or n.hex().encode() in blob]


@pytest.fixture
def hindsight_cluster(tmp_path: Path) -> Iterator[Database]:
    """Hindsight's own PostgreSQL: its files (and WAL) are not Engram's."""
    cluster = EmbeddedPostgres(tmp_path / "hindsight-pg")
    database = cluster.start().with_dbname("hindsight")
    yield database
    cluster.stop()


def _env(tmp_path: Path, master: str, hindsight: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_MASTER_KEY": master,
        "ENGRAM_TOKEN_SECRET": SECRET,
        "ENGRAM_HINDSIGHT_URL": hindsight.url,
        "ENGRAM_HINDSIGHT_DATABASE_URL": hindsight.database.conninfo,
        "ENGRAM_WORKER_INTERVAL": "0.2",
        "ENGRAM_SWEEP_INTERVAL": "1",
        "ENGRAM_LOG_FORMAT": "json",
        "ENGRAM_LOG_LEVEL": "debug",
    })
    return env


def _start(cmds: list[list[str]], env: dict[str, str], logs: Path) -> list[tuple[subprocess.Popen, Path]]:
    procs = []
    for i, cmd in enumerate(cmds):
        log = logs / f"{i}-{cmd[0]}.log"
        with log.open("wb") as out:
            procs.append((subprocess.Popen([ENGRAM, *cmd], env=env, stdout=out, stderr=subprocess.STDOUT), log))
    return procs


def _stop(procs: list[tuple[subprocess.Popen, Path]]) -> None:
    for p, _ in procs:
        p.send_signal(signal.SIGTERM)
    for p, _ in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def remember_learn_correct_recall_forget(url: str, copies: set[str], hindsight: Any) -> list[dict[str, Any]]:
    """The person's whole flow through the API; returns the two forgets' final statuses."""
    with httpx.Client(base_url=url, timeout=60) as c:
        made = c.post("/v1/memories", headers=auth(), json={
            "text": REMEMBERED, "source": {"kind": "chat", "id": SOURCE_ID, "message_id": MESSAGE_ID}})
        assert made.status_code == 201, made.text
        memory = made.json()["id"]
        assert c.post("/v1/receipts", headers=auth(), json={
            "receipt_id": "r-1", "author": "user", "text": RECEIPT,
            "source": {"kind": "chat", "id": SOURCE_ID, "message_id": RECEIPT_MESSAGE}}).status_code == 202
        candidates = wait_for(lambda: c.get("/v1/candidates", headers=auth()).json()["items"], 60, "a candidate")
        learned = candidates[0]["id"]
        assert "quince-5309" in candidates[0]["text"]
        assert c.post(f"/v1/candidates/{learned}/confirm", headers=auth(), json={}).status_code == 200
        r = c.post(f"/v1/memories/{memory}/correct", headers=auth(entry="web"), json={"text": CORRECTED})
        assert r.status_code == 200 and r.json()["revision"] == 2
        found = c.post("/v1/recall", headers=auth(), json={"query": "kestrel lighthouse"}).json()["items"]
        assert [i["id"] for i in found] == [memory] and found[0]["text"] == CORRECTED
        assert c.post("/v1/recall", headers=auth(), json={"query": "quince jam"}).json()["items"][0]["id"] == learned
        # the scans below can fail: Hindsight holds both texts in clear until the forgets
        wait_for(lambda: {b"lighthouse-4418", b"quince-5309"} <= set(hits(dump(hindsight.database))), 60,
              "Hindsight to hold the corrected and the learned text")

        forgets = []
        for memory_id in (memory, learned):
            answer = c.post(f"/v1/memories/{memory_id}/forget", headers=auth())
            assert answer.status_code == 202 and answer.json()["status"] == "stopped_using"
            forgets.append(answer.json()["forget_id"])
        assert c.post("/v1/recall", headers=auth(), json={"query": "kestrel quince"}).json()["items"] == []

        def complete() -> list[dict[str, Any]] | None:
            docs = [c.get(f"/v1/forgets/{f}", headers=auth()).json() for f in forgets]
            return docs if all(d["status"] == "purge_complete" for d in docs) else None

        docs = wait_for(complete, 120, "purge_complete")
        for doc in docs:
            assert {x["copy"] for x in doc["copies"]} == copies
            assert all(x["state"] == "purged" and x["evidence"] and x["purged_at"] for x in doc["copies"])
        listed = c.get("/v1/forgets", headers=auth()).json()["items"]
        assert set(forgets) <= {i["forget_id"] for i in listed}
        return docs


def test_embedded_serve_with_hindsight_purges_every_copy(tmp_path: Path, hindsight_cluster: Database) -> None:
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    signing = MasterKey.from_text(master).hindsight_signing_key()
    hindsight = start_with_fake_llm(hindsight_cluster, tmp_path / "hindsight.log",
                                    guard_public_key=public_key_text(signing))
    logs = tmp_path / "logs"
    logs.mkdir()
    port = _port()
    procs = _start([["serve", "--port", str(port)]], _env(tmp_path, master, hindsight), logs)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(procs[0][0], url, lambda: procs[0][1].read_text()[-3000:], timeout=120)
        docs = remember_learn_correct_recall_forget(
            url, {"event_store", "recall_view", "review_queue", "inbox", "hindsight", "backups"}, hindsight)
        hindsight_copy = {x["copy"]: x for x in docs[0]["copies"]}["hindsight"]
        assert "VACUUM" in hindsight_copy["evidence"]
    finally:
        _stop(procs)
    try:
        # Engram's database, dumped and as files (WAL included), and everything under its data directory
        cluster = EmbeddedPostgres(tmp_path / "data")
        try:
            assert hits(dump(cluster.start())) == []
        finally:
            cluster.stop()
        assert files_containing(tmp_path / "data", NEEDLES) == []
        assert files_containing(tmp_path / "data-tombstones", NEEDLES) == []
        assert hits(dump(hindsight.database)) == []  # no Hindsight table holds them
        assert files_containing(logs, NEEDLES) == []  # no log line
        assert procs[0][1].stat().st_size > 0  # there were logs to search
    finally:
        hindsight.close()


@pytest.mark.skipif(tansu_binary() is None, reason="no Kafka-protocol broker installed")
def test_distributed_processes_with_hindsight_purge_every_copy(tmp_path: Path, hindsight_cluster: Database) -> None:
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    signing = MasterKey.from_text(master).hindsight_signing_key()
    hindsight = start_with_fake_llm(hindsight_cluster, tmp_path / "hindsight.log",
                                    guard_public_key=public_key_text(signing))
    engram_cluster = EmbeddedPostgres(tmp_path / "engram-pg")
    database = engram_cluster.start().with_dbname("engram")
    database.ensure_exists()
    broker = TansuBroker().start()
    env = _env(tmp_path, master, hindsight)
    env.update({"ENGRAM_DATABASE_URL": f"postgresql://{database.user}@/{database.dbname}"
                                       f"?host={database.host}&port={database.port}",
                "ENGRAM_KAFKA_BOOTSTRAP": broker.bootstrap, "ENGRAM_KAFKA_PARTITIONS": "4"})
    logs = tmp_path / "logs"
    logs.mkdir()
    port = _port()
    procs = _start([["relay"], ["worker"], ["serve", "--port", str(port)]], env, logs)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(procs[-1][0], url, lambda: procs[-1][1].read_text()[-3000:], timeout=120)
        docs = remember_learn_correct_recall_forget(
            url, {"event_store", "recall_view", "review_queue", "inbox", "hindsight", "kafka", "backups"}, hindsight)
        kafka_copy = {x["copy"]: x for x in docs[0]["copies"]}["kafka"]
        assert "engram.events partition" in kafka_copy["evidence"] and "offset" in kafka_copy["evidence"]
        events, tombstones = topic_bytes(broker.bootstrap), topic_bytes(broker.bootstrap, "engram.tombstones")
        assert b"_sealed" in events and hits(events) == [] and hits(tombstones) == []
    finally:
        _stop(procs)
        broker.stop()
    try:
        assert hits(dump(database)) == []
        engram_cluster.stop()
        assert files_containing(tmp_path / "engram-pg", NEEDLES) == []
        assert files_containing(tmp_path / "data", NEEDLES) == []
        assert hits(dump(hindsight.database)) == []
        assert files_containing(logs, NEEDLES) == []
    finally:
        engram_cluster.stop()
        hindsight.close()
