"""Tombstones: content-free records of every forget, expiry, rejection, payload clearing and source
revocation, kept where a database restore cannot roll them back.

A tombstone is written first to the outbox table `engram_tombstones`, in the same transaction as its
event and the destruction of its data key (`Shred`, written by the event recorder): a forget either
happened entirely or not at all, whatever the broker or the disk does. The `TombstonePublisher` then
copies it to the journal, the place a restore cannot reach:

- embedded default: `tombstones.jsonl` in ENGRAM_TOMBSTONE_DIR (default `<data_dir>-tombstones`),
  beside, never inside, the data directory and every backup; appended and fsynced.
- distributed: the compacted, never-expiring Kafka topic `engram.tombstones`, keyed by aggregate id.

The fence is the set of aggregate ids with a tombstone in either place: keys for them are never handed
out or made. The publisher also reconciles: a journal that lost records (a broker that lost its data,
a journal file restored from an old copy) gets them again from the outbox; a database restored from
an old backup is caught at start-up (`Fence.unfenced`) and refused until `engram restore --fence`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from engram.domain.errors import DomainError

from .jsonl import JsonLines
from .outage import Outage

log = logging.getLogger("engram.tombstones")


class TombstonesUnavailable(DomainError):
    """The tombstone journal cannot be reached. Publishing retries from the outbox; reading it for the
    fence (`engram restore --fence`) fails rather than fence with a partial journal."""

    code, status, title = "unavailable", 503, "Temporarily unavailable"
    retry_after = 5  # seconds; a broker restart usually takes about that


def tombstone_key(tombstone: dict[str, Any]) -> str:
    """One tombstone per kind and aggregate, and for revocations per source and person (none: the
    whole company): the journal's compaction key."""
    key = f"{tombstone['kind']}:{tombstone['aggregate_id']}"
    if tombstone["kind"] == "revoke":
        key += f":{tombstone.get('source_id') or ''}:{tombstone.get('person') or ''}"
    return key


def fenced(tombstone: dict[str, Any]) -> bool:
    """Every kind but a revocation destroys its aggregate's key for good."""
    return tombstone.get("kind") != "revoke"


@dataclass(frozen=True)
class Shred:
    """A destruction recorded together with its event: the content-free tombstone and, unless it is
    a revocation, the aggregate's data key destroyed in the same transaction."""

    tombstone: dict[str, Any]
    at: datetime

    @property
    def key_id(self) -> str | None:
        return str(self.tombstone["aggregate_id"]) if fenced(self.tombstone) else None


class KeyDestroyer(Protocol):
    def destroy_in(self, curs: Any, key_id: Any, company: str, at: datetime) -> None: ...


class TombstoneOutbox:
    """The table every tombstone is first written to, in its event's transaction."""

    def __init__(self, datastore: Any, keys: KeyDestroyer) -> None:
        self.datastore = datastore
        self.keys = keys

    def write(self, curs: Any, shreds: Sequence[Shred]) -> None:
        """Inside the event recorder's transaction: destroy the keys and record the tombstones."""
        for shred in shreds:
            t = shred.tombstone
            if shred.key_id is not None:
                self.keys.destroy_in(curs, shred.key_id, t["company"], shred.at)
            curs.execute(
                "INSERT INTO engram_tombstones (key, kind, aggregate_id, company, record, recorded_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tombstone_key(t), t["kind"], str(t["aggregate_id"]), t["company"],
                 json.dumps(t, sort_keys=True, default=str), shred.at),
            )

    def unpublished(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT seq, record FROM engram_tombstones WHERE published_at IS NULL ORDER BY seq LIMIT %s",
                         (limit,))
            return [(r["seq"], r["record"]) for r in curs.fetchall()]

    def published(self, seqs: Iterable[int], at: datetime) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_tombstones SET published_at = %s WHERE seq = ANY(%s)", (at, list(seqs)))

    def republish(self, keys: Iterable[str]) -> int:
        """Mark these tombstones unpublished again: the journal has lost them."""
        wanted = list(keys)
        if not wanted:
            return 0
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_tombstones SET published_at = NULL WHERE key = ANY(%s)", (wanted,))
            return int(curs.rowcount or 0)

    def backlog(self) -> int:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT count(*) AS n FROM engram_tombstones WHERE published_at IS NULL")
            row = curs.fetchone()
        return int(row["n"]) if row else 0

    @staticmethod
    def republish_all(datastore: Any) -> int:
        """The journal lost everything (a broker's data): publish every tombstone again."""
        with datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_tombstones SET published_at = NULL WHERE published_at IS NOT NULL")
            return int(curs.rowcount or 0)

    def all(self) -> list[dict[str, Any]]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT record FROM engram_tombstones ORDER BY seq")
            return [r["record"] for r in curs.fetchall()]

    def unfenced(self, ids: Iterable[str]) -> list[str]:
        """Of these tombstoned aggregate ids, the ones this database does not know were destroyed:
        it was restored from before their tombstones."""
        wanted = list(ids)
        if not wanted:
            return []
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT w.id FROM unnest(%s::text[]) AS w(id) WHERE NOT EXISTS "
                         "(SELECT 1 FROM engram_destroyed_keys d WHERE d.key_id::text = w.id)", (wanted,))
            return [r["id"] for r in curs.fetchall()]


class FenceRequired(RuntimeError):
    """The database is older than the tombstone journal (restored from before some forgets)."""

    def __init__(self, count: int) -> None:
        super().__init__(f"the database is older than the tombstone journal: {count} forgotten, expired or "
                         "cleared aggregate(s) are not destroyed in it. Run `engram restore --fence` before "
                         "serving from it.")
        self.count = count


class Journal(Protocol):
    def record(self, tombstone: dict[str, Any]) -> None: ...

    def all(self) -> list[dict[str, Any]]: ...


class FileJournal:
    NAME = "tombstones.jsonl"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines = JsonLines(path)

    @classmethod
    def beside_data(cls, journal_dir: Path, data_dir: Path) -> FileJournal:
        """The journal in its own directory. One left inside the data directory by an older version
        is adopted: its tombstones are copied over (a restore of the data directory could roll it back)."""
        if journal_dir.resolve().is_relative_to(data_dir.resolve()):
            raise ValueError("ENGRAM_TOMBSTONE_DIR must not be inside ENGRAM_DATA_DIR: restoring the data "
                             "directory would roll the tombstones back")
        journal = cls(journal_dir / cls.NAME)
        legacy = cls(data_dir / cls.NAME)
        held = {tombstone_key(t) for t in journal.all()}
        for tombstone in legacy.all():
            if tombstone_key(tombstone) not in held:
                journal.record(tombstone)
                held.add(tombstone_key(tombstone))
        return journal

    def record(self, tombstone: dict[str, Any]) -> None:
        self._lines.append(tombstone)

    def all(self) -> list[dict[str, Any]]:
        return self._lines.read()


class Fence:
    """Aggregate ids that were forgotten, expired or cleared: no key is ever served or made for them.

    Read from every place tombstones are kept: the journal and the outbox table. Loaded at start;
    when the journal is unreachable then, the process starts anyway and loads it in the background
    (the outbox counts at once, and so do its own new tombstones). `engram restore --fence` always
    reads every place before it changes anything.
    """

    def __init__(self, journal: Journal, outbox: TombstoneOutbox | None = None, *,
                 on_commit: Callable[[], None] = lambda: None) -> None:
        """`on_commit`: called after each commit of tombstones (the publisher's wake-up)."""
        self.journal = journal
        self.outbox = outbox
        self._ids: set[str] = set()
        self._lock = threading.Lock()
        self.loaded = threading.Event()
        self.on_commit = on_commit
        if outbox is not None:
            self.attach(outbox)
        try:
            self.refresh()
        except TombstonesUnavailable as e:
            threading.Thread(target=self._load_when_reachable, args=(e,), name="engram-fence", daemon=True).start()

    def attach(self, outbox: TombstoneOutbox) -> None:
        """Read the outbox too (its table exists once the schema is migrated)."""
        self.outbox = outbox
        self._add(outbox.all())

    def _add(self, tombstones: Iterable[dict[str, Any]]) -> None:
        ids = {str(t["aggregate_id"]) for t in tombstones if fenced(t)}
        with self._lock:
            self._ids |= ids  # tombstones are never withdrawn

    def refresh(self) -> None:
        self._add(self.journal.all())
        if self.outbox is not None:
            self._add(self.outbox.all())
        self.loaded.set()

    def tombstones(self) -> list[dict[str, Any]]:
        """Every tombstone, from the journal and the outbox, once each."""
        merged = {tombstone_key(t): t for t in self.journal.all()}
        if self.outbox is not None:
            for t in self.outbox.all():
                merged.setdefault(tombstone_key(t), t)
        return list(merged.values())

    def unfenced(self) -> list[str]:
        """Tombstoned ids the database does not know were destroyed (it was restored from before
        them); empty while the journal has not been read."""
        if self.outbox is None or not self.loaded.is_set():
            return []
        with self._lock:
            ids = sorted(self._ids)
        return self.outbox.unfenced(ids)

    def _load_when_reachable(self, first: TombstonesUnavailable) -> None:
        outage = Outage(log, "tombstone journal (fence not loaded yet)", longest=10.0)
        closed = getattr(self.journal, "closed", threading.Event())
        wait = outage.failed(first)
        while not closed.wait(wait):
            try:
                self.refresh()
            except TombstonesUnavailable as e:
                wait = outage.failed(e)
                continue
            outage.ok()
            stale = self.unfenced()
            if stale:
                log.error("the database is older than the tombstone journal: %d tombstoned aggregate(s) are "
                          "not destroyed in it; run `engram restore --fence`", len(stale))
            return

    def __contains__(self, aggregate_id: object) -> bool:
        return str(aggregate_id) in self._ids

    def committed(self, shreds: Sequence[Shred]) -> None:
        """After the transaction that wrote these: they count at once, and the publisher wakes."""
        self._add(s.tombstone for s in shreds)
        self.on_commit()


class TombstonePublisher:
    """Copies committed tombstones from the outbox to the journal: soon after each commit, and on a
    timer for whatever failed (the broker away, a full disk). Every `reconcile_every` seconds, and at
    start, it also compares the journal with the outbox and publishes again what the journal lost.
    Several processes may publish the same tombstone; the journal keeps it once per key."""

    def __init__(self, outbox: TombstoneOutbox, journal: Journal, clock: Any, *, interval: float = 5.0,
                 reconcile_every: float = 300.0, wake: threading.Event | None = None) -> None:
        """`wake`: set after each commit of tombstones (by the fence built before this), to publish soon."""
        self.outbox, self.journal, self.clock = outbox, journal, clock
        self.interval, self.reconcile_every = interval, reconcile_every
        self._wake = wake if wake is not None else threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._one_at_a_time = threading.Lock()  # the thread and a caller would publish the same rows
        self._outage = Outage(log, "tombstone publishing")

    def kick(self) -> None:
        self._wake.set()

    def publish_pending(self, limit: int = 500) -> int:
        """Publish what is unpublished, in order; stops at the first failure (raised)."""
        with self._one_at_a_time:
            return self._publish_pending(limit)

    def _publish_pending(self, limit: int) -> int:
        done = 0
        while True:
            batch = self.outbox.unpublished(limit)
            if not batch:
                return done
            sent = []
            try:
                for seq, tombstone in batch:
                    self.journal.record(tombstone)
                    sent.append(seq)
            finally:
                if sent:
                    self.outbox.published(sent, self.clock.now())
            done += len(sent)
            if len(batch) < limit:
                return done

    def reconcile(self) -> int:
        """Publish again every tombstone of the outbox the journal does not hold."""
        with self._one_at_a_time:
            held = {tombstone_key(t) for t in self.journal.all()}
            lost = [tombstone_key(t) for t in self.outbox.all() if tombstone_key(t) not in held]
            if not lost:
                return 0
            log.warning("the tombstone journal lacks %d tombstone(s) the database holds; publishing them again",
                        len(lost))
            self.outbox.republish(lost)
            return self._publish_pending(500)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="engram-tombstone-publisher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_reconcile = 0.0  # at start
        clock = time.monotonic
        wait = 0.0
        while not self._stop.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                if clock() >= next_reconcile:
                    self.reconcile()
                    next_reconcile = clock() + self.reconcile_every
                self.publish_pending()
            except Exception as e:  # noqa: BLE001 - the outbox keeps them; the next round retries
                wait = self._outage.failed(e)
                continue
            self._outage.ok()
            wait = self.interval

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
