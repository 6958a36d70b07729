"""Rebuilding a view beside the serving one (ADR 0034): readers and writers go on meanwhile, the new
view equals the one built event by event, and a rebuild that stops half-way leaves the old view whole."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from engram.adapters.view_cipher import unseal_from_view
from engram.domain.scope import Caller
from engram.projections.base import ViewProjection

ALICE = Caller("acme", "alice", "user")
BOB = Caller("acme", "bob", "user")


def _source(n: int) -> dict[str, str]:
    return {"kind": "chat", "id": f"chat-{n % 2}", "message_id": f"m-{n}"}


def _remember(engram: Any, who: Caller, text: str, n: int, **kw: Any) -> Any:
    args = {"occurred_at": None, "visibility": "general", "team": None, "valid_from": None, "valid_to": None, **kw}
    return engram.memories.remember(who, text=text, source=_source(n), **args)


def _history(engram: Any) -> None:
    """Every kind of memory event, and some mentioned together (links), into every view."""
    m = engram.memories
    kept = _remember(engram, ALICE, "the build server is called osprey", 1)
    dated = _remember(engram, ALICE, "my desk is on floor three", 2, occurred_at=datetime(2026, 3, 4, tzinfo=UTC),
                      valid_from=datetime(2026, 1, 1, tzinfo=UTC))
    m.correct(ALICE, dated.id, text="my desk is on floor five", valid_from=datetime(2026, 6, 1, tzinfo=UTC),
              valid_to=None, reason=None)
    m.correct(ALICE, kept.id, text="the build server is called kestrel", valid_from=None, valid_to=None,
              reason=None)
    candidate = m.propose(BOB, text="bob likes green tea", quote="I like green tea", source=_source(3),
                          occurred_at=None)
    m.confirm(BOB, candidate.id, text="bob likes green tea with honey", acknowledge_sensitive=False)
    rejected = m.propose(BOB, text="bob dislikes rain", quote="I dislike rain", source=_source(4), occurred_at=None)
    m.reject(BOB, rejected.id)
    gone = _remember(engram, BOB, "bob parks in row seven", 5)
    _remember(engram, BOB, "bob parks near the lift", 5)  # the same message: linked to the forgotten one
    m.forget(BOB, gone.id)
    for i in range(12):
        _remember(engram, ALICE, f"alice note number {i} about herons", 10 + i)


def _sealed(value: Any, table: str, row: dict[str, Any], column: str, engram: Any) -> Any:
    """A sealed column compared by what it holds (each sealing has its own nonce)."""
    owner = row.get("memory_id") or row.get("insight_id")
    key = engram.store.keys.get(owner)
    if key is None:
        return "sealed, key gone"
    return unseal_from_view(key, owner, column.removeprefix("sealed_"), value)


def view_contents(engram: Any, name: str) -> dict[str, list[str]]:
    """Every row of every table of the view, sealed columns unsealed, in a fixed order."""
    view = engram.projections[name].view
    out: dict[str, list[str]] = {}
    with engram.store.datastore.transaction() as curs:
        for table in view.tables:
            curs.execute(f"SELECT * FROM {table}")  # names from the view's own list
            rows = []
            for row in curs.fetchall():
                if table == "engram_memories" and row["status"] in ("forgotten", "rejected", "expired"):
                    # the events no longer say where a closed memory came from (its source was sealed under
                    # the key that went): a replay cannot blind it again, and never could (ADR 0019)
                    row = {**row, "source_blind": "(not replayable)"}
                shown = {k: _sealed(v, table, row, k, engram) if k.startswith("sealed_") and v is not None else v
                         for k, v in row.items()}
                rows.append(repr(sorted(shown.items())))
            out[table] = sorted(rows)
    return out


def _everything(engram: Any) -> dict[str, Any]:
    out: dict[str, Any] = {name: view_contents(engram, name) for name in engram.projections}
    with engram.store.datastore.transaction() as curs:
        # their evidence counts the rows a copy held when it was purged: a replay never held them
        curs.execute("SELECT forget_id, copy, state FROM engram_purge_copies ORDER BY 1, 2")
        out["purge_copies"] = [tuple(r.values()) for r in curs.fetchall()]
        curs.execute("SELECT forget_id, memory_id, company, person FROM engram_forgets ORDER BY 1")
        out["forgets"] = [tuple(r.values()) for r in curs.fetchall()]
    return out


def _shadow_schemas(engram: Any) -> list[str]:
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'engram%%_rebuild' ORDER BY 1")
        return [r["nspname"] for r in curs.fetchall()]


def _recalled(engram: Any, query: str) -> list[str]:
    return [i.text for i in engram.recall.recall(ALICE, query=query, as_of=None, max_bytes=17500,
                                                  limit=20).items]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few events, so a small history still takes many committed steps."""
    monkeypatch.setattr(ViewProjection, "REBUILD_BATCH", 4)
    monkeypatch.setattr(ViewProjection, "SWAP_GAP", 2)


@pytest.mark.parametrize("batch", [3, 1000])
def test_every_rebuilt_view_equals_the_one_built_event_by_event(engram, small_batches, monkeypatch, batch) -> None:
    """Built event by event as the writes settled; rebuilt a few events a batch (a memory's events in
    different batches) and all in one batch (each memory's events applied together, set-based)."""
    monkeypatch.setattr(ViewProjection, "REBUILD_BATCH", batch)
    _history(engram)
    before = _everything(engram)
    assert before["recall"]["engram_recall_terms"] and before["links"]["engram_link_citations"]
    assert before["forgets"] and before["purge_copies"]
    for name in engram.projections:
        engram.operations.rebuild(name)
    assert _everything(engram) == before
    assert _shadow_schemas(engram) == []
    assert _recalled(engram, "kestrel") == ["the build server is called kestrel"]


def test_a_batch_rolled_back_by_a_deadlock_is_committed_again(engram, small_batches, monkeypatch) -> None:
    """PostgreSQL's deadlock reaches the fill wrapped in the event store's OperationalError (two filling
    processes moving one person's vector generation did so): the batch is committed again, not failed."""
    from eventsourcing.persistence import OperationalError
    from psycopg.errors import DeadlockDetected

    _history(engram)
    before = _everything(engram)
    projection = engram.projections["recall"]
    real, failed = projection._apply_after, []

    def deadlocked_once(*args: Any, **kwargs: Any) -> Any:
        if not failed:
            failed.append(1)
            raise OperationalError("deadlock detected") from DeadlockDetected()
        return real(*args, **kwargs)

    monkeypatch.setattr(projection, "_apply_after", deadlocked_once)
    engram.operations.rebuild("recall")
    assert failed == [1] and _everything(engram) == before


def test_writes_and_reads_go_on_while_a_view_is_rebuilt(engram, small_batches) -> None:
    """Half-way through the rebuild (its batches committed, the old view serving), another thread
    remembers and recalls; the old single-transaction rebuild held the view's lock and stopped it."""
    _history(engram)
    seen: dict[str, Any] = {}
    calls = []

    def meanwhile() -> None:
        made = _remember(engram, ALICE, "the herons nest by the weir", 99)
        seen["during"] = _recalled(engram, "weir")
        seen["id"] = made.id

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        if len(calls) == 2:  # some batches are in the new tables, committed; the swap is still to come
            worker = threading.Thread(target=meanwhile)
            worker.start()
            worker.join(timeout=30)
            seen["finished"] = not worker.is_alive()

    applied = engram.operations.rebuild("recall", progress)
    assert seen.get("finished") is True
    assert seen["during"] == ["the herons nest by the weir"]  # the old view, updated as it served
    assert calls[-1][0] == calls[-1][1] and len(calls) > 3  # the bar moved and ended full
    assert applied == engram.store.recorder.max_notification_id()
    assert _recalled(engram, "weir") == ["the herons nest by the weir"]  # caught up before the swap
    incremental = view_contents(engram, "recall")
    engram.operations.rebuild("recall")
    assert view_contents(engram, "recall") == incremental


def test_a_rebuild_that_stops_half_way_leaves_the_old_view_and_the_next_one_works(engram, small_batches) -> None:
    _history(engram)
    before = view_contents(engram, "recall")

    class Stopped(Exception):
        pass

    def crash(done: int, total: int) -> None:
        if done > 8:
            raise Stopped

    with pytest.raises(Stopped):
        engram.operations.rebuild("recall", crash)
    assert _shadow_schemas(engram) == ["engram_recall_rebuild"]  # what the crash left
    assert view_contents(engram, "recall") == before
    assert _recalled(engram, "kestrel") == ["the build server is called kestrel"]
    _remember(engram, ALICE, "the old view still takes writes", 77)
    assert _recalled(engram, "takes writes") == ["the old view still takes writes"]

    engram.operations.rebuild("recall")
    assert _shadow_schemas(engram) == []
    assert _recalled(engram, "takes writes") == ["the old view still takes writes"]
    after = view_contents(engram, "recall")
    engram.operations.rebuild("recall")
    assert view_contents(engram, "recall") == after


def test_a_rebuild_keeps_set_aside_events_it_still_cannot_apply_and_only_those(engram, small_batches) -> None:
    _history(engram)
    recall = engram.projections["recall"]
    with engram.store.datastore.transaction(commit=True) as curs:  # an old entry the replay will not make again
        curs.execute("INSERT INTO engram_quarantine (projection, notification_id, originator_id, topic, error) "
                     "VALUES ('recall', 3, NULL, 'x', 'Old')")
    original = recall.apply
    bad = 5

    def refuse(curs: Any, event: Any, tracking: Any) -> None:
        if tracking.notification_id == bad:
            raise ValueError("cannot apply")
        original(curs, event, tracking)

    recall.apply = refuse  # type: ignore[method-assign]
    try:
        engram.operations.rebuild("recall")
    finally:
        recall.apply = original  # type: ignore[method-assign]
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT notification_id, error FROM engram_quarantine WHERE projection = 'recall'")
        assert [tuple(r.values()) for r in curs.fetchall()] == [(bad, "ValueError")]


@pytest.mark.parametrize("legacy", [False, True])
def test_the_recall_views_rebuild_leaves_the_events_it_does_not_apply_unread(engram, small_batches, monkeypatch,
                                                                            legacy) -> None:
    """Receipts are most of a real event log and the recall view applies none of them: its rebuild does
    not read them (under the topic they were stored with, or the one events had before Engram was one
    package), and builds the same view. An event of a topic the domain does not know is still read."""
    from uuid import uuid4

    from eventsourcing.persistence import StoredEvent

    _history(engram)
    for i in range(6):
        engram.learning.receive(ALICE, receipt_id=f"r-{i}", author="user", kind="message", text=f"a heron, {i}",
                                occurred_at=None, source=_source(40 + i), visibility="general", team=None)
    engram.learning.work()
    if legacy:  # as events stored before Engram installed as one package name their classes
        with engram.store.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_events SET topic = 'domain.' || substr(topic, 15) "
                         "WHERE topic LIKE 'engram.domain.receipt:%'")
            assert curs.rowcount > 0
    engram.store.recorder.insert_events([StoredEvent(originator_id=uuid4(), originator_version=1,
                                                     topic="nowhere.module:Gone", state=b"{}")])
    engram.runner.catch_up_all()
    before = _everything(engram)
    read: list[str] = []
    original = engram.store.mapper.to_domain_event

    def decode(stored: Any) -> Any:
        read.append(stored.topic)
        return original(stored)

    monkeypatch.setattr(engram.store.mapper, "to_domain_event", decode)
    engram.operations.rebuild("recall")
    assert _everything(engram) == before
    assert read and not [t for t in read if "receipt:" in t]
    assert "nowhere.module:Gone" in read and engram.operations.quarantined()["recall"] == 1
    assert any("memory:Memory.Remembered" in t for t in read)


@pytest.fixture
def two_processes(engram, small_batches, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rebuilds of the recall view filled by two processes (ADR 0038), however few the events."""
    monkeypatch.setattr(ViewProjection, "FILL_FROM", 0)
    monkeypatch.setattr(engram.operations, "settings", engram.operations.settings.model_copy(
        update={"rebuild_workers": 2}))


def _many(engram: Any, n: int = 30) -> None:
    """Memories of both people, on both processes' parts (by memory id), some corrected, one forgotten."""
    for i in range(n):
        who = ALICE if i % 2 else BOB
        made = _remember(engram, who, f"heron count {i} at the weir", 200 + i)
        if i % 5 == 1:
            engram.memories.correct(who, made.id, text=f"heron count {i} at the mill", valid_from=None,
                                    valid_to=None, reason=None)
        if i == 2:
            engram.memories.forget(who, made.id)

    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT memory_id FROM engram_memories")
        assert {r["memory_id"].int % 2 for r in curs.fetchall()} == {0, 1}


def test_a_view_filled_by_two_processes_equals_the_one_built_event_by_event(engram, two_processes, caplog) -> None:
    _history(engram)
    _many(engram)
    before = _everything(engram)
    progress: list[tuple[int, int]] = []
    with caplog.at_level(logging.INFO, logger="engram.operations"):
        applied = engram.operations.rebuild("recall", lambda done, total: progress.append((done, total)))
    assert "rebuild of recall: 2 processes fill the new tables" in caplog.text
    assert applied == engram.store.recorder.max_notification_id()
    assert _everything(engram) == before
    assert _shadow_schemas(engram) == []
    assert progress[-1][0] == progress[-1][1] and [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert _recalled(engram, "kestrel") == ["the build server is called kestrel"]


def test_an_event_set_aside_by_a_filling_process_is_reported_once(engram, two_processes) -> None:
    from uuid import uuid4

    from eventsourcing.persistence import StoredEvent

    _history(engram)
    engram.store.recorder.insert_events([StoredEvent(originator_id=uuid4(), originator_version=1,
                                                     topic="nowhere.module:Gone", state=b"{}")])
    _many(engram)
    engram.runner.catch_up_all()
    before = _everything(engram)
    assert engram.operations.quarantined()["recall"] == 1
    engram.operations.rebuild("recall")
    assert engram.operations.quarantined()["recall"] == 1
    assert _everything(engram) == before


class _Killing:
    """The spawn context, but the second filling process is killed as soon as it has started."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def Pipe(self, duplex: bool) -> Any:  # multiprocessing's name
        return self.real.Pipe(duplex=duplex)

    def Process(self, **kw: Any) -> Any:
        process = self.real.Process(**kw)
        return _KilledAtStart(process) if kw["name"].endswith("-1") else process


class _KilledAtStart:
    def __init__(self, process: Any) -> None:
        self.process = process

    def start(self) -> None:
        self.process.start()
        self.process.kill()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.process, name)


@pytest.mark.parametrize("how", ["killed", "failing"])
def test_a_filling_process_that_dies_fails_the_rebuild_and_leaves_the_old_view(engram, two_processes, monkeypatch,
                                                                               how) -> None:
    import multiprocessing

    from engram.api import rebuilds
    from engram.api.rebuilds import RebuildFailed

    _history(engram)
    _many(engram)
    before = view_contents(engram, "recall")
    fill = engram.operations.fill_in_processes
    if how == "killed":
        monkeypatch.setattr(rebuilds, "SPAWN", _Killing(rebuilds.SPAWN))
        expected = r"the process filling part 1 of 2 ended \(exit code -9\) before finishing"
    else:  # a process that cannot open the database's keys: a master key that is not this database's
        settings = engram.operations.settings.model_copy(update={"master_key": "A" * 43})
        engram.operations.fill_in_processes = rebuilds.fill_in_processes(type(engram).open, settings, engram.database,
                                                                         True)
        expected = r"the process filling part \d of 2 failed \(\w+\)"
    try:
        with pytest.raises(RebuildFailed, match=expected + ".*the serving view is untouched"):
            engram.operations.rebuild("recall")
    finally:
        engram.operations.fill_in_processes = fill
        monkeypatch.setattr(rebuilds, "SPAWN", multiprocessing.get_context("spawn"))
    assert not [c for c in multiprocessing.active_children() if c.name.startswith("engram-rebuild-")]
    assert view_contents(engram, "recall") == before
    _remember(engram, ALICE, "the old view still takes writes", 77)
    assert _recalled(engram, "takes writes") == ["the old view still takes writes"]
    engram.operations.rebuild("recall")
    assert _shadow_schemas(engram) == []
    assert _recalled(engram, "takes writes") == ["the old view still takes writes"]
