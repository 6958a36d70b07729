"""`engram backup DIR` / `engram restore DIR` through the command's own entry point, on a real PostgreSQL:
a restored older backup brings nothing forgotten back, the catalog outlives the restore, retention
turns a forget's `backups` copy from pending to purged, and bad input is refused with nothing changed."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.backups import serving
from engram.adapters.migrations import shipped
from engram.api.bootstrap import Engram
from engram.api.cli import main
from engram.api.http import create_app
from engram.domain.clock import Clock
from engram.domain.scope import Caller
from engram.service.settings import Settings

from tests.support.helpers import SECRET, auth, stored_events

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}
GONE_TEXT = "I like the lighthouse at Godrevy"


class Later(Clock):
    """Real time, moved ahead: retention sees the backups as old."""

    def __init__(self, ahead: timedelta) -> None:
        self.ahead = ahead

    def now(self) -> datetime:
        return super().now() + self.ahead


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database: Any, settings: Settings) -> Iterator[Settings]:
    """The environment `engram` reads: this test's database, data directory and keys."""
    for name in list(os.environ):
        if name.startswith("ENGRAM_") and name != "ENGRAM_TEST_DATABASE_URL":
            monkeypatch.delenv(name)
    for name, value in {"DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": database.conninfo,
                        "MASTER_KEY": settings.master_key, "TOKEN_SECRET": SECRET, "POLL_INTERVAL": "0.2",
                        "DB_POOL_SIZE": "4"}.items():
        monkeypatch.setenv(f"ENGRAM_{name}", str(value))
    yield Settings()


def remember(engram: Engram, text: str) -> str:
    return str(engram.memories.remember(ALICE, text=text, source=SOURCE, occurred_at=None, visibility="general",
                                        team=None, valid_from=None, valid_to=None).id)


def copies(engram: Engram, forget_id: str) -> dict[str, dict[str, Any]]:
    return {c["copy"]: c for c in engram.memories.forget_status(ALICE, forget_id)["copies"]}


def test_an_older_backup_restored_brings_nothing_forgotten_back(env: Settings, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    catalog = tmp_path / "data-tombstones" / "backups.jsonl"  # ENGRAM_TOMBSTONE_DIR's default
    a = Engram.open(env, background=False)
    gone, kept = remember(a, GONE_TEXT), remember(a, "I like walking to work")
    a.close()

    older = tmp_path / "backups" / "older"
    assert main(["backup", str(older)]) == 0
    entries = [json.loads(line) for line in catalog.read_text().splitlines()]
    assert [e["event"] for e in entries] == ["started", "taken"]  # started before its dump began (ADR 0060)
    taken = entries[1]
    assert taken["path"] == str(older.resolve()) and taken["size"] > 0 and taken["snapshot_at"]
    assert taken["schema_version"] == max(m.version for m in shipped())
    assert sorted(p.name for p in older.iterdir()) == ["database.dump", "manifest.json", "tombstones.jsonl"]
    assert "Godrevy" not in catalog.read_text() and not list(older.rglob("backups.jsonl"))
    taken_at = datetime.fromisoformat(taken["taken_at"])

    a = Engram.open(env, background=False)
    forget_id = a.memories.forget(ALICE, gone).forget_id
    backups = copies(a, forget_id)["backups"]
    assert (backups["state"], backups["purged_at"]) == ("pending", None)
    assert backups["evidence"] == ("1 backup taken before the forget was recorded; the last ages out on "
                                   f"{(taken_at + timedelta(days=30)).date().isoformat()}")
    assert a.memories.forget_status(ALICE, forget_id)["status"] == "stopped_using"
    a.close()

    capsys.readouterr()
    assert main(["restore", str(older)]) == 0  # the database as it was before the forget, then the fence
    out = capsys.readouterr().out
    assert "fence applied" in out and "1 events appended" in out  # the restored database lacked the forget
    assert [json.loads(line) for line in catalog.read_text().splitlines()] == entries  # the catalog outlived it

    b = Engram.open(env, background=False)
    try:
        with TestClient(create_app(b, SECRET)) as client:
            got = client.get(f"/v1/memories/{gone}", headers=auth())
            assert got.status_code == 404 or (got.json()["status"] == "forgotten" and got.json()["text"] is None)
            history = client.get(f"/v1/memories/{gone}/history", headers=auth()).json()["events"]
            assert history[-1]["type"] == "Forgotten" and all(e["text"] is None for e in history)
            recalled = client.post("/v1/recall", json={"query": "lighthouse Godrevy"}, headers=auth()).json()
            assert gone not in [i["id"] for i in recalled["items"]] and "Godrevy" not in json.dumps(recalled)
            assert "Godrevy" not in client.get("/v1/export", headers=auth()).text
            walking = client.post("/v1/recall", json={"query": "walking"}, headers=auth()).json()["items"]
            assert [i["id"] for i in walking] == [kept]  # what was not forgotten came back
        with b.store.datastore.get_connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s",
                                (gone,)).fetchone()["n"] == 0  # the restored key row is destroyed again
        assert copies(b, forget_id)["backups"]["state"] == "pending"  # the older backup is still kept
    finally:
        b.close()

    # Retention: seen 31 days later, the sweeper deletes the older backup, and the copy is purged.
    c = Engram.open(env.replace(sweep_interval=0.1), clock=Later(timedelta(days=31)), background=True)
    try:
        deadline = time.monotonic() + 20
        while older.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not older.exists()
        deleted = json.loads(catalog.read_text().splitlines()[-1])
        assert deleted["event"] == "deleted" and deleted["id"] == taken["id"]
        backups = copies(c, forget_id)["backups"]
        assert backups["state"] == "purged"
        assert backups["purged_at"] == datetime.fromisoformat(deleted["deleted_at"])
        assert backups["evidence"].startswith("1 backup taken before the forget was recorded, all deleted by retention")
        assert c.memories.forget_status(ALICE, forget_id)["status"] == "purge_complete"
    finally:
        c.close()
    assert main(["restore", str(older)]) == 2  # an aged-out backup cannot come back


def test_a_forget_after_no_backup_is_purged_at_its_request(env: Settings, tmp_path: Path) -> None:
    a = Engram.open(env, background=False)
    try:
        forget_id = a.memories.forget(ALICE, remember(a, GONE_TEXT)).forget_id
        backups = copies(a, forget_id)["backups"]
        head, _ = a.memories.purge.report(forget_id)
        assert head is not None
        assert (backups["state"], backups["purged_at"]) == ("purged", head["requested_at"])
        assert backups["evidence"] == "no backup was taken before the forget was recorded"
    finally:
        a.close()


def test_bad_backups_and_restores_are_refused_with_nothing_changed(env: Settings, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a = Engram.open(env, background=False)
    remember(a, GONE_TEXT)
    events = stored_events(a)
    a.close()
    catalog = env.journal_dir / "backups.jsonl"
    good = tmp_path / "backups" / "good"
    assert main(["backup", str(good)]) == 0
    catalogued = catalog.read_text()
    for taken in good.iterdir():  # the whole database and its tombstones: its owner's to read only
        assert taken.stat().st_mode & 0o777 == 0o600, (taken.name, oct(taken.stat().st_mode))

    def refused(argv: list[str], reason: str) -> None:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert reason in err and "Traceback" not in err and "Godrevy" not in err

    # where a backup may not go
    refused(["backup", str(good)], "already holds a backup")
    refused(["backup", str(env.data_dir / "inside")], "inside the data directory")
    refused(["backup", str(env.journal_dir / "inside")], "inside the tombstone directory")
    refused(["backup", str(tmp_path)], "holds the data directory")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("someone else's file")
    refused(["backup", str(tmp_path / "used")], "is not empty")
    (tmp_path / "fresh").mkdir()

    # what is not a catalogued backup
    (tmp_path / "empty").mkdir()
    refused(["restore", str(tmp_path / "empty")], "holds no Engram backup")
    refused(["restore", str(tmp_path / "missing")], "holds no Engram backup")
    moved = tmp_path / "moved"
    shutil.copytree(good, moved)
    refused(["restore", str(moved)], "restore it from there")
    stranger = tmp_path / "stranger"
    shutil.copytree(good, stranger)
    (stranger / "manifest.json").write_text(json.dumps({"id": "bk-unknown"}))
    refused(["restore", str(stranger)], "is not in the catalog")
    (good / "tombstones.jsonl").rename(tmp_path / "aside.jsonl")
    refused(["restore", str(good)], "incomplete: tombstones.jsonl missing")
    (tmp_path / "aside.jsonl").rename(good / "tombstones.jsonl")
    refused(["restore"], "say which backup to restore")

    # a running service holds the serving lock: restoring under it is refused
    with serving(str(env.database_url)):
        refused(["restore", str(good)], "stop every one of them first")

    assert catalog.read_text() == catalogued  # no refusal wrote to the catalog
    b = Engram.open(env, background=False)
    try:
        assert stored_events(b) == events  # nor touched the database
    finally:
        b.close()
    assert main(["restore", "--fence"]) == 0  # the fence alone still works

    # a dump pg_restore cannot read: the command says so, and says how to recover
    broken = tmp_path / "fresh"  # an empty directory will do
    assert main(["backup", str(broken)]) == 0
    (broken / "database.dump").write_bytes(b"PGDMP" + b"\0" * 64)
    refused(["restore", str(broken)], "pg_restore failed")
    refused(["restore", str(broken)], "The database may be incomplete: fix the cause and run `engram restore")
    assert main(["restore", str(good)]) == 0
    b = Engram.open(env, background=False)
    try:
        assert stored_events(b) == events  # the good backup's events again
    finally:
        b.close()


def test_restore_adds_the_backups_tombstones_the_journal_lacks(env: Settings, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    a = Engram.open(env, background=False)
    gone = remember(a, GONE_TEXT)
    a.memories.forget(ALICE, gone)
    a.close()
    assert main(["backup", str(tmp_path / "b")]) == 0
    journal = env.journal_dir / "tombstones.jsonl"
    recorded = journal.read_text()
    journal.unlink()  # a journal that lost its lines (the backup's copy still has them)

    capsys.readouterr()
    assert main(["restore", str(tmp_path / "b")]) == 0
    # the union: the tombstone is back in the journal (from the database's outbox, or the backup's copy)
    assert "fence applied: 1 tombstones" in capsys.readouterr().out
    assert gone in journal.read_text() and gone in recorded
    assert main(["restore", str(tmp_path / "b")]) == 0
    assert "(0 added from the backup)" in capsys.readouterr().out and gone in journal.read_text()
    b = Engram.open(env, background=False)
    try:
        assert gone in b.operations.fence  # no key is served or made for it again
        assert b.memories.get(ALICE, gone).status == "forgotten"
    finally:
        b.close()


def test_a_backup_after_a_forget_never_reopens_it(env: Settings, tmp_path: Path) -> None:
    """Issue: a forget answered purged went back to pending after a backup taken a minute later."""
    a = Engram.open(env, background=False)
    try:
        read = a.memories.forget(ALICE, remember(a, GONE_TEXT)).forget_id
        unread = a.memories.forget(ALICE, remember(a, "I keep the spare key in the shed")).forget_id
        assert copies(a, read)["backups"]["state"] == "purged"
        assert main(["backup", str(tmp_path / "nightly")]) == 0  # seconds later, while serving
        for forget_id in (read, unread):
            backups = copies(a, forget_id)["backups"]
            assert backups["state"] == "purged", backups
            assert backups["evidence"] == "no backup was taken before the forget was recorded"
            assert a.memories.forget_status(ALICE, forget_id)["status"] == "purge_complete"
        kept = remember(a, "I like the lighthouse at St Ives")
        later = a.memories.forget(ALICE, kept).forget_id  # after the backup: that backup holds its key
        assert copies(a, later)["backups"]["state"] == "pending"
    finally:
        a.close()


def test_a_backup_being_taken_holds_and_what_a_dead_taker_left_is_swept(env: Settings, database: Any,
                                                                       tmp_path: Path) -> None:
    from engram.adapters.backups import taking

    a = Engram.open(env, background=False)
    target = tmp_path / "backups" / "torn"
    target.mkdir(parents=True)
    try:
        memory = remember(a, GONE_TEXT)
        with taking(database.conninfo, "bk-torn") as database_now:  # a backup that has begun its dump
            a.backups.catalog.started("bk-torn", str(target), a.ledger.clock.now(), database_now())
            (target / "database.dump").write_bytes(b"PGDMP partial")
            forget_id = a.memories.forget(ALICE, memory).forget_id
            backups = copies(a, forget_id)["backups"]
            assert (backups["state"], backups["evidence"]) == (
                "pending", "1 backup being taken, begun before the forget was recorded")
            assert a.backups.expire() == 0 and target.exists()  # its taker is alive: left alone
        # the taker is gone (its lock with it) and never finished: its partial dump may hold keys
        assert a.backups.expire() == 1 and not target.exists()
        backups = copies(a, forget_id)["backups"]
        assert backups["state"] == "purged"
        assert backups["evidence"].startswith("1 backup taken before the forget was recorded, all deleted "
                                              "(by retention, or unfinished)")
        assert a.backups.catalog.find("bk-torn") is None  # never restorable
    finally:
        a.close()
