"""A forget, its key's destruction and its tombstone commit in one transaction; the tombstone then
reaches the journal, which lives outside the data directory and gets back what it loses."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engram.adapters.event_recorder import EventRecorder
from engram.adapters.tombstones import FenceRequired
from engram.api.bootstrap import Engram
from engram.domain.scope import Caller

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}


def remember(engram: Engram, text: str = "I keep bees on the roof") -> str:
    return engram.memories.remember(ALICE, text=text, source=SOURCE, occurred_at=None, visibility="general",
                                    team=None, valid_from=None, valid_to=None).id


def count(engram: Engram, query: str, *args: Any) -> int:
    with engram.store.datastore.get_connection() as conn:
        return int(conn.execute(query, args).fetchone()["n"])


def journal(settings: Any) -> list[dict[str, Any]]:
    path = settings.journal_dir / "tombstones.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_published(engram: Engram) -> None:
    assert engram.publisher is not None
    engram.publisher.publish_pending()


@pytest.fixture
def opened(settings, database):
    engrams: list[Engram] = []

    def open_(*, fenced: bool = True, **changes: Any) -> Engram:
        engram = Engram.open(settings.replace(**changes) if changes else settings, database=database,
                             background=False, fenced=fenced)
        engrams.append(engram)
        return engram

    yield open_
    for engram in engrams:
        engram.close()


def test_a_forget_is_whole_or_nothing(opened, monkeypatch) -> None:
    engram = opened()
    memory_id = remember(engram)

    def fail(self, curs, stored_events, **kwargs):
        raise RuntimeError("the event insert fails after the key's destruction ran in its transaction")

    with monkeypatch.context() as m:
        m.setattr(EventRecorder, "_insert_stored_events", fail)
        with pytest.raises(RuntimeError):
            engram.memories.forget(ALICE, memory_id)
    # nothing happened: the key, the memory and its recall are all still there, and no tombstone
    assert count(engram, "SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s", memory_id) == 1
    assert count(engram, "SELECT count(*) AS n FROM engram_tombstones") == 0
    assert memory_id not in engram.ledger.tombstones
    assert engram.memories.get(ALICE, memory_id).text == "I keep bees on the roof"

    answer = engram.memories.forget(ALICE, memory_id)  # and the retry forgets it
    assert count(engram, "SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s", memory_id) == 0
    assert count(engram, "SELECT count(*) AS n FROM engram_tombstones WHERE aggregate_id = %s", memory_id) == 1
    assert engram.memories.get(ALICE, memory_id).status == "forgotten"
    assert answer.status == "stopped_using"


def test_the_journal_lives_beside_the_data_directory_and_gets_every_tombstone(opened, settings) -> None:
    engram = opened()
    memory_id = remember(engram)
    forget_id = engram.memories.forget(ALICE, memory_id).forget_id
    engram.governance.revoke_source(ALICE, "chat-9")
    wait_published(engram)

    recorded = journal(settings)
    assert [(t["kind"], t["aggregate_id"]) for t in recorded][0] == ("forget", memory_id)
    assert recorded[0]["forget_id"] == forget_id and recorded[1]["kind"] == "revoke"
    assert not settings.journal_dir.resolve().is_relative_to(settings.data_dir.resolve())
    assert not list(settings.data_dir.rglob("tombstones*"))
    # content-free: ids and times only
    assert "bees" not in (settings.journal_dir / "tombstones.jsonl").read_text()
    assert count(engram, "SELECT count(*) AS n FROM engram_tombstones WHERE published_at IS NULL") == 0


def test_a_journal_that_lost_tombstones_gets_them_back_at_start(opened, settings) -> None:
    first = opened()
    forgotten = [remember(first, f"note {i} about hives") for i in range(3)]
    for memory_id in forgotten:
        first.memories.forget(ALICE, memory_id)
    wait_published(first)
    first.close()
    path = settings.journal_dir / "tombstones.jsonl"
    path.write_text(path.read_text().splitlines()[0] + "\n")  # an older copy of the journal

    opened()  # its publisher reconciles at start
    deadline = time.monotonic() + 20
    while {t["aggregate_id"] for t in journal(settings)} != set(forgotten):
        assert time.monotonic() < deadline, "the journal did not get its tombstones back"
        time.sleep(0.1)


def test_a_database_older_than_the_journal_is_refused_until_fenced(opened, settings, database) -> None:
    engram = opened()
    memory_id = remember(engram)
    engram.memories.forget(ALICE, memory_id)
    wait_published(engram)
    engram.close()
    with psycopg.connect(database.conninfo, autocommit=True) as conn:  # as a restore from before the forget
        conn.execute("DELETE FROM engram_destroyed_keys WHERE key_id = %s", (memory_id,))
        conn.execute("DELETE FROM engram_tombstones")

    with pytest.raises(FenceRequired) as refused:
        Engram.open(settings, database=database, background=False)
    assert refused.value.count == 1
    fencing = opened(fenced=False)  # as `engram restore --fence` opens it
    fencing.operations.restore_fence()
    assert count(fencing, "SELECT count(*) AS n FROM engram_tombstones WHERE aggregate_id = %s", memory_id) == 1
    fencing.close()
    again = opened()
    assert again.memories.get(ALICE, memory_id).status == "forgotten"


def test_a_journal_left_in_the_data_directory_is_adopted(opened, settings) -> None:
    legacy = settings.data_dir / "tombstones.jsonl"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    lost = "00000000-0000-4000-8000-000000000001"
    legacy.write_text(json.dumps({"kind": "receipt_cleared", "aggregate_id": lost, "company": "acme",
                                  "at": "2026-01-01T00:00:00+00:00", "why": "processed"}) + "\n")
    engram = opened(fenced=False)  # that receipt's key is not marked destroyed in this new database
    assert lost in engram.ledger.tombstones
    assert [t["aggregate_id"] for t in journal(settings)] == [lost]


def test_the_tombstone_directory_may_not_be_inside_the_data_directory(settings, database) -> None:
    inside = settings.replace(tombstone_dir=settings.data_dir / "journal")
    with pytest.raises(ValueError, match="ENGRAM_TOMBSTONE_DIR"):
        Engram.open(inside, database=database, background=False)


def test_journal_path_defaults_beside_the_data_directory(tmp_path: Path) -> None:
    from engram.service.settings import Settings

    assert Settings(data_dir=tmp_path / ".engram").journal_dir == tmp_path / ".engram-tombstones"
    assert Settings(data_dir=tmp_path / "d", tombstone_dir=tmp_path / "t").journal_dir == tmp_path / "t"


def test_purged_views_are_vacuumed_and_their_evidence_says_when(opened) -> None:
    engram = opened()
    forget_id = engram.memories.forget(ALICE, remember(engram)).forget_id
    before = {c["copy"]: c["evidence"] for c in engram.memories.forget_status(ALICE, forget_id)["copies"]}
    assert "vacuumed" not in before["recall_view"]
    at = engram.ledger.clock.now()
    purge = engram.memories.purge
    assert purge.vacuum_views(at) == 2  # the recall view's copy and the review queue's
    after = {c["copy"]: c for c in engram.memories.forget_status(ALICE, forget_id)["copies"]}
    for copy in ("recall_view", "review_queue"):
        assert after[copy]["state"] == "purged"
        assert after[copy]["evidence"].endswith(f"tables vacuumed at {at.isoformat()}")
    assert purge.vacuum_views(at) == 0  # nothing new: no vacuum runs


def test_the_purge_backlog_counts_what_is_not_purged_yet(opened) -> None:
    engram = opened(hindsight_url="http://127.0.0.1:9")  # Hindsight's copy cannot be purged: nothing syncs
    operator = Caller("acme", "root", "operator")
    assert engram.operations.admin_status(operator).backlogs.purge["forgets_pending"] == 0
    forget_id = engram.memories.forget(ALICE, remember(engram)).forget_id
    wait_published(engram)
    backlog = engram.operations.admin_status(operator).backlogs.purge
    assert backlog == {"forgets_pending": 1, "tombstones_unpublished": 0}
    assert engram.operations.admin_status(Caller("globex", "root", "operator")).backlogs.purge[
        "forgets_pending"] == 0
    assert {r.name: r.samples for r in engram.operations.readings()}["engram_purge_pending"] == [({}, 1)]
    assert engram.memories.forget_status(ALICE, forget_id)["status"] == "stopped_using"


def test_restoring_the_whole_data_directory_is_refused_until_fenced(tmp_path: Path) -> None:
    """The embedded default, its master key and cluster inside the data directory, copied back whole."""
    import shutil
    import subprocess

    from engram.service.settings import Settings

    from tests.support.helpers import SECRET

    settings = Settings(data_dir=tmp_path / "data", token_secret=SECRET, db_pool_size=2)
    first = Engram.open(settings, background=False)
    memory_id = remember(first, "I hide the spare key under the heron-6601 statue")
    first.close()
    copy = ["cp", "-a"]  # as an operator's file backup would: owners and modes kept
    subprocess.run([*copy, str(tmp_path / "data"), str(tmp_path / "copy")], check=True)  # server stopped
    second = Engram.open(settings, background=False)
    second.memories.forget(ALICE, memory_id)
    wait_published(second)
    second.close()
    shutil.rmtree(tmp_path / "data")
    subprocess.run([*copy, str(tmp_path / "copy"), str(tmp_path / "data")], check=True)  # restored over it

    with pytest.raises(FenceRequired):
        Engram.open(settings, background=False)
    fencing = Engram.open(settings, background=False, fenced=False)
    try:
        assert fencing.memories.get(ALICE, memory_id).text is None  # the fence already withholds the key
        fencing.operations.restore_fence()
    finally:
        fencing.close()
    third = Engram.open(settings, background=False)
    try:
        got = third.memories.get(ALICE, memory_id)
        assert got.status == "forgotten" and got.text is None
        assert third.recall.recall(ALICE, query="spare key heron", as_of=None, max_bytes=17500,
                                   limit=5).items == []
    finally:
        third.close()
