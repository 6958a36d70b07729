"""A forget's `backups` copy never goes back from purged to pending (ADR 0060), and is purged only when
no kept backup can hold the memory's key: a property over any sequence of forgets, backups begun,
finished or abandoned, retention sweeps, restores and status reads, on a real PostgreSQL.

The purge tracker and the backup catalog are the real ones. What a backup holds is decided by when its
dump's snapshot is taken against when the forget committed, both on the database's clock; a restore is
played on the tracker's tables as a real one plays on them: what was written after the backup's
snapshot is gone, the projection records the forgets again, and the settled copies are put back.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

from hypothesis import HealthCheck
from hypothesis import settings as machine_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from engram.adapters.backups import BackupCatalog
from engram.api.bootstrap import Engram
from engram.domain.backup import BackupRecord
from engram.projections.purge import ALWAYS, BACKUPS, PurgeTracker
from engram.service.settings import Settings

APP_NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)  # the app clock's stamps; the rule reads the database's


class Backup:
    def __init__(self, backup_id: str, snapshot: datetime) -> None:
        self.id, self.snapshot = backup_id, snapshot
        self.finished = self.deleted = False


class Forgets(RuleBasedStateMachine):
    engram: Engram
    root: Path

    def __init__(self) -> None:
        super().__init__()
        self.catalog = BackupCatalog(self.root / uuid4().hex / "backups.jsonl", timedelta(days=30))
        self.tracker = PurgeTracker(self.engram.store.datastore, (*ALWAYS, BACKUPS), self.catalog)
        self.backups: list[Backup] = []
        self.committed: dict[str, datetime] = {}  # forget -> when its key was destroyed (its latest commit)
        self.recorded: dict[str, datetime] = {}  # forget -> its head row written by
        self.settled_after: dict[str, datetime] = {}  # forget -> its settled row written no earlier than
        self.seen_purged: set[str] = set()
        self.reading: list[datetime] = []  # backups that read the database's clock, not yet catalogued

    def now(self) -> datetime:
        with self.engram.store.datastore.get_connection() as conn:
            return conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"]

    def record(self, forget_id: str) -> None:
        """What the recall projection does with a committed forget."""
        self.committed[forget_id] = self.now()  # the key went with the event, committed by now
        with self.engram.store.datastore.transaction(commit=True) as curs:
            self.tracker.opened(curs, forget_id, uuid4(), "acme", "alice", APP_NOW)
        self.recorded[forget_id] = self.now()

    # -- what happens ----------------------------------------------------------------------------------

    @initialize()
    def first(self) -> None:
        self.record("f-" + uuid4().hex)

    @rule()
    def forget(self) -> None:
        self.record("f-" + uuid4().hex)

    @rule()
    def backup_reads_the_clock(self) -> None:
        """`Backups.take`'s order: the database's clock, the `started` entry, then the dump's snapshot;
        anything may happen between the first two."""
        self.reading.append(self.now())

    @precondition(lambda self: self.reading)
    @rule(data=st.data())
    def backup_begins(self, data: st.DataObject) -> None:
        read = self.reading.pop(data.draw(st.integers(0, len(self.reading) - 1)))
        backup_id = "bk-" + uuid4().hex
        self.catalog.started(backup_id, f"/backups/{backup_id}", APP_NOW, read)
        self.backups.append(Backup(backup_id, self.now()))

    @precondition(lambda self: any(not b.finished and not b.deleted for b in self.backups))
    @rule(data=st.data(), fails=st.booleans())
    def backup_ends(self, data: st.DataObject, fails: bool) -> None:
        b = data.draw(st.sampled_from([b for b in self.backups if not b.finished and not b.deleted]))
        if fails:  # or its taker died and the sweeper deleted what it left
            self.catalog.failed(b.id, APP_NOW)
            b.deleted = True
        else:
            started = next(r for r in self.catalog.records() if r.id == b.id)
            self.catalog.taken(BackupRecord(b.id, APP_NOW, started.path, 1000, 17, snapshot_at=started.snapshot_at))
            b.finished = True

    @precondition(lambda self: any(b.finished and not b.deleted for b in self.backups))
    @rule(data=st.data())
    def retention_deletes(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from([b for b in self.backups if b.finished and not b.deleted]))
        self.catalog.deleted(b.id, APP_NOW + timedelta(days=30))
        b.deleted = True

    @rule(data=st.data())
    def status_read(self, data: st.DataObject) -> None:
        forget_id = data.draw(st.sampled_from(sorted(self.committed)))
        before = self.now()
        head, copies = self.tracker.report(forget_id)
        assert head is not None
        state = {c["copy"]: c for c in copies}[BACKUPS]["state"]
        if forget_id in self.seen_purged:
            assert state == "purged", "a purged backups copy went back to pending"
        if state == "purged":
            holding = [b.id for b in self.backups if not b.deleted and b.snapshot < self.committed[forget_id]]
            assert not holding, f"purged while backups {holding} may hold the key"
            self.seen_purged.add(forget_id)
            self.settled_after.setdefault(forget_id, before)

    @precondition(lambda self: any(b.finished and not b.deleted for b in self.backups))
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        """The database as the backup's snapshot saw it, then the projection and `engram restore`'s resettle."""
        b = data.draw(st.sampled_from([b for b in self.backups if b.finished and not b.deleted]))
        ours = sorted(self.committed)
        lost_heads = [f for f in ours if self.recorded[f] >= b.snapshot]
        lost_settled = [f for f in ours if f in lost_heads or self.settled_after.get(f, b.snapshot) >= b.snapshot]
        with self.engram.store.datastore.transaction(commit=True) as curs:
            curs.execute("DELETE FROM engram_forgets WHERE forget_id = ANY(%s)", (lost_heads,))
            curs.execute("DELETE FROM engram_purge_copies WHERE forget_id = ANY(%s)", (lost_settled,))
        for forget_id in lost_heads:  # the restored events are projected again (the fence destroys the keys again)
            self.record(forget_id)
        self.tracker.resettle()

    @invariant()
    def catalog_agrees(self) -> None:
        kept = {r.id for r in self.catalog.records() if r.deleted_at is None}
        assert kept == {b.id for b in self.backups if not b.deleted}


def test_no_sequence_turns_a_purged_backups_copy_back_to_pending(database: Any, settings: Settings,
                                                                 tmp_path: Path) -> None:
    engram = Engram.open(settings, database=database, background=False)
    try:
        Forgets.engram, Forgets.root = engram, tmp_path
        run_state_machine_as_test(Forgets, settings=machine_settings(
            max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]))
    finally:
        engram.close()


def test_a_restore_keeps_what_was_answered_purged(database: Any, settings: Settings, tmp_path: Path) -> None:
    """The sequence behind `resettle`: a backup that read the database's clock before the forget but was
    catalogued after its copy was answered purged, then a restore of a backup older than that answer."""
    engram = Engram.open(settings, database=database, background=False)
    try:
        Forgets.engram, Forgets.root = engram, tmp_path
        m = Forgets()
        early = m.now()  # backup X reads the clock
        m.record("f-1")
        m.catalog.started("bk-b", "/backups/b", APP_NOW, m.now())  # backup B, begun after the forget
        m.catalog.taken(BackupRecord("bk-b", APP_NOW, "/backups/b", 1000, 17, snapshot_at=m.now()))
        assert {c["copy"]: c for c in m.tracker.report("f-1")[1]}[BACKUPS]["state"] == "purged"
        m.catalog.started("bk-x", "/backups/x", APP_NOW, early)  # X, catalogued now: it holds nothing of f-1
        assert {c["copy"]: c for c in m.tracker.report("f-1")[1]}[BACKUPS]["state"] == "purged"
        with engram.store.datastore.transaction(commit=True) as curs:  # B restored: the answer is gone
            curs.execute("DELETE FROM engram_purge_copies WHERE forget_id = 'f-1'")
        assert {c["copy"]: c for c in m.tracker.report("f-1")[1]}[BACKUPS]["state"] == "pending"  # X, by the rule
        with engram.store.datastore.transaction(commit=True) as curs:
            curs.execute("DELETE FROM engram_purge_copies WHERE forget_id = 'f-1'")
        assert m.tracker.resettle() == 1  # what `engram restore` does after the database is back
        copy = {c["copy"]: c for c in m.tracker.report("f-1")[1]}[BACKUPS]
        assert (copy["state"], copy["evidence"]) == ("purged", "no backup was taken before the forget was recorded")
    finally:
        engram.close()
