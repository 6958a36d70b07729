"""Projection plumbing: a view's tables and its tracking position commit together (its rows are written by
`rows`, the in-process runner is `runner`).

Each view is a `PostgresTrackingRecorder` (its tracking table comes from
eventsourcing) extended with its own tables. A batch of events is applied in one
transaction that first locks the tracking row, so two runners, a rebuild or a
re-delivery can never apply an event twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eventsourcing.persistence import OperationalError, Tracking
from eventsourcing.postgres import PostgresDatastore, PostgresTrackingRecorder
from eventsourcing.projection import Projection
from psycopg import Cursor
from psycopg.errors import DeadlockDetected, TransactionRollback
from psycopg.sql import SQL, Identifier, Literal
from psycopg_pool import PoolTimeout

from engram.adapters.availability import UNAVAILABLE_ERRORS, DatabaseTimeout
from engram.adapters.keystore import prefetched
from engram.adapters.mapper import stored_topics

log = logging.getLogger("engram.projections")

APPLICATION = "engram"

# The database or its connection failed, not the event: retry the batch, never set the event aside.
TRANSIENT: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, PoolTimeout)


ROLLED_BACK = (TransactionRollback, DeadlockDetected)  # psycopg's deadlock is not a TransactionRollback


def _rolled_back(error: BaseException) -> bool:
    """PostgreSQL rolled the transaction back (a deadlock, a serialization failure): committing it again
    is right. The event store's datastore wraps psycopg's error in its own `OperationalError`."""
    return isinstance(error, ROLLED_BACK) or isinstance(error.__cause__, ROLLED_BACK)


class Undecodable:
    """A stored event that could not be decoded; each projection quarantines it and moves on."""

    def __init__(self, note: Any, error: BaseException) -> None:
        self.notification_id = note.id
        self.originator_id = note.originator_id
        self.topic = note.topic
        self.error = error


def safe_decoder(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Decode a stored event; one that cannot be read becomes an Undecodable instead of stopping a batch."""

    def decode_or_mark(note: Any) -> Any:
        try:
            return decode(note)
        except TRANSIENT:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure is this one event's
            return Undecodable(note, exc)

    return decode_or_mark


def error_name(exc: BaseException) -> str:
    """What went wrong, without the message: a database message can quote the data it refused."""
    sqlstate = getattr(getattr(exc, "diag", None), "sqlstate", None)
    return f"{type(exc).__name__} {sqlstate}" if sqlstate else type(exc).__name__




class View(PostgresTrackingRecorder):
    """A materialised view: its own tables plus one row of tracking."""

    ddl: str = ""
    tables: tuple[str, ...] = ()

    def __init__(self, datastore: PostgresDatastore, name: str) -> None:
        super().__init__(datastore, tracking_table_name=f"engram_{name}_tracking")

    def create_table(self) -> None:
        super().create_table()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self.ddl)  # engram_partition_tracking and engram_quarantine come from the migrations
            curs.execute(
                f"INSERT INTO {self.tracking_table_name} (application_name, notification_id) "
                "VALUES (%s, 0) ON CONFLICT DO NOTHING",
                (APPLICATION,),
            )

    def position(self) -> int:
        return self.max_tracking_id(APPLICATION) or 0

    def lock_position(self, curs: Cursor[Any]) -> int:
        curs.execute(
            f"SELECT notification_id FROM {self.tracking_table_name} "
            "WHERE application_name = %s FOR UPDATE",
            (APPLICATION,),
        )
        row = curs.fetchone()
        assert row is not None, "tracking row missing; create_table() was not run"
        return int(row["notification_id"])

    def set_position(self, curs: Cursor[Any], notification_id: int) -> None:
        curs.execute(
            f"UPDATE {self.tracking_table_name} SET notification_id = %s WHERE application_name = %s",
            (notification_id, APPLICATION),
        )

    def clear(self, curs: Cursor[Any]) -> None:
        for table in self.tables:
            curs.execute(f"DELETE FROM {table}")
        self.set_position(curs, 0)

    # -- rebuilding beside the view (ADR 0034) ----------------------------------------------------

    @property
    def shadow(self) -> str:
        """The schema a rebuild fills: the same DDL and table names, apart from the serving ones."""
        return f"{self.tracking_table_name.removesuffix('_tracking')}_rebuild"

    def create_shadow(self, curs: Cursor[Any]) -> None:
        """Empty shadow tables; whatever an earlier rebuild left (it crashed, or was stopped) goes first."""
        curs.execute(SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(self.shadow)))
        curs.execute(SQL("CREATE SCHEMA {}").format(Identifier(self.shadow)))
        self.use_shadow(curs)
        curs.execute(self.ddl)

    def use_shadow(self, curs: Cursor[Any]) -> None:
        """For the rest of this transaction the view's tables are the shadow's; every other table (the
        tracking rows, the quarantine, the purge reports, the keys) is still the serving one."""
        self._set_search_path(curs, [self.shadow, *self._serving_path(curs)])

    def _serving_path(self, curs: Cursor[Any]) -> list[str]:
        """This transaction's search path without the shadow schema."""
        curs.execute("SELECT current_schemas(false) AS path")
        row = curs.fetchone()
        assert row is not None
        return [s for s in row["path"] if s != self.shadow]

    @staticmethod
    def _set_search_path(curs: Cursor[Any], schemas: Sequence[str]) -> None:
        curs.execute(SQL("SELECT set_config('search_path', {}, true)").format(
            Literal(", ".join(f'"{s}"' for s in schemas))))

    def swap_in(self, curs: Cursor[Any]) -> None:
        """Within the caller's transaction, which holds the tracking row: the serving tables go and the
        shadow's take their names (their indexes and constraints keep theirs)."""
        path = self._serving_path(curs)
        serving = path[0]
        curs.execute(SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            SQL(", ").join(Identifier(serving, t) for t in self.tables)))
        for table in self.tables:
            curs.execute(SQL("DROP TABLE {}").format(Identifier(serving, table)))
            curs.execute(SQL("ALTER TABLE {} SET SCHEMA {}").format(Identifier(self.shadow, table),
                                                                    Identifier(serving)))
        curs.execute(SQL("DROP SCHEMA {} CASCADE").format(Identifier(self.shadow)))
        self._set_search_path(curs, path)


class ViewProjection(Projection[View]):
    """Applies events to its view; subclasses implement `apply(curs, event, tracking)`."""

    view_class: type[View] = View

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        self.process_batch([(domain_event, tracking)])

    def process_batch(self, items: Sequence[tuple[Any, Tracking]]) -> int:
        """Apply the events the view has not seen yet; returns how many were applied."""
        if not items:
            return 0
        with self.view.datastore.transaction(commit=True) as curs:
            return self.apply_batch(curs, items)

    def apply_batch(self, curs: Cursor[Any], items: Sequence[tuple[Any, Tracking]]) -> int:
        """Within the caller's transaction: lock the tracking row, apply what is new, move the position."""
        position = self.view.lock_position(curs)
        applied = self._apply_after(curs, position, items)
        last = items[-1][1].notification_id
        if last > position:
            self.view.set_position(curs, last)
        return applied

    def _apply_after(self, curs: Cursor[Any], position: int, items: Sequence[tuple[Any, Tracking]],
                     quarantined: set[int] | None = None) -> int:
        """Apply, as one batch, the events after `position`; skip watermarks (None), duplicates and
        re-deliveries. An event this projection cannot apply is quarantined, and the rest still flows."""
        return self._apply_fresh(curs, [(e, t) for e, t in items if e is not None and t.notification_id > position],
                                 quarantined)

    def _apply_fresh(self, curs: Cursor[Any], fresh: Sequence[tuple[Any, Tracking]],
                     quarantined: set[int] | None = None) -> int:
        """`_apply_after` for events already known to be new to this projection."""
        if not fresh:
            return 0
        try:
            self._apply_in_savepoint(curs, fresh)
            return len(fresh)
        except TRANSIENT:
            raise
        except Exception:  # noqa: BLE001 - some event of the batch is bad: find it, one at a time
            pass
        applied = 0
        for event, tracking in fresh:
            try:
                self._apply_in_savepoint(curs, [(event, tracking)])
                applied += 1
            except TRANSIENT:
                raise
            except Exception as exc:  # noqa: BLE001
                self.quarantine(curs, event, tracking, exc)
                if quarantined is not None:
                    quarantined.add(tracking.notification_id)
        return applied

    def _apply_in_savepoint(self, curs: Cursor[Any], items: Sequence[tuple[Any, Tracking]]) -> None:
        self.begin()
        try:
            with curs.connection.transaction():  # a savepoint: a failure undoes only these events
                for event, tracking in items:
                    if isinstance(event, Undecodable):
                        raise event.error
                    self.apply(curs, event, tracking)
                self.flush(curs)
        finally:
            self.begin()

    def quarantine(self, curs: Cursor[Any], event: Any, tracking: Tracking, exc: BaseException) -> None:
        """Set an event aside with its position and the kind of error, never its content."""
        originator = getattr(event, "originator_id", None)
        topic = event.topic if isinstance(event, Undecodable) else f"{type(event).__module__}:{type(event).__qualname__}"
        curs.execute(
            "INSERT INTO engram_quarantine (projection, notification_id, originator_id, topic, error) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (projection, notification_id) DO UPDATE "
            "SET error = EXCLUDED.error, at = now()",
            (self.name, tracking.notification_id, originator, topic, error_name(exc)),
        )
        log.error("projection %s set event %d aside (%s); every other event still flows",
                  self.name, tracking.notification_id, error_name(exc))

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        raise NotImplementedError

    def begin(self) -> None:
        """Start of a batch: forget anything accumulated by a batch that was rolled back."""

    def flush(self, curs: Cursor[Any]) -> None:
        """End of a batch, same transaction: write what was accumulated (shared rows, in a fixed order)."""

    @staticmethod
    def apply_each(curs: Cursor[Any], projections: Sequence[ViewProjection],
                   fresh: Mapping[str, Sequence[tuple[Any, Tracking]]], *, guarded: bool) -> int:
        """Apply to each projection, one after another in the caller's transaction, the events new to it
        (`fresh[name]`, each projection's own set-based batch). Not `guarded`, a failure ends the
        transaction (the caller rolls back and comes again, guarded); `guarded`, all run in one
        savepoint, and only when some event fails there is each projection applied again in its own
        savepoints, which finds the bad event and sets it aside."""
        def apply_all() -> None:
            for p in projections:
                p.begin()
                for event, tracking in fresh[p.name]:
                    if isinstance(event, Undecodable):
                        raise event.error
                    p.apply(curs, event, tracking)
                p.flush(curs)

        applied = sum(len(f) for f in fresh.values())
        try:
            if not guarded:
                apply_all()
            else:
                try:
                    with curs.connection.transaction():
                        apply_all()
                except TRANSIENT:
                    raise
                except Exception:  # noqa: BLE001 - some event is bad for some projection: one savepoint per event
                    applied = sum(p._apply_fresh(curs, fresh[p.name]) for p in projections)
        finally:
            for p in projections:
                p.begin()
        return applied

    @staticmethod
    def apply_partitions(curs: Cursor[Any], projections: Sequence[ViewProjection],
                         batches: Mapping[int, Sequence[tuple[Any, Tracking]]], upto: Mapping[int, int]) -> int:
        """Distributed mode: several Kafka partitions' batches applied to several projections in the
        caller's transaction, tracked per (projection, partition). `None` events are watermarks: everything
        for a partition up to `upto[partition]` has been delivered, so its position may move there.

        Every (projection, partition) row is made and locked in one message (projection then partition
        order, as everywhere) and moved in another; each projection applies the events new to it, from
        all the partitions, as one set-based batch in notification order (the partitions hold different
        memories, so that is applying each of them in order), guarded (`apply_each`)."""
        if not projections or not batches:
            return 0
        ordered = sorted(projections, key=lambda p: p.name)
        names, parts = [p.name for p in ordered], sorted(batches)
        curs.execute(SQL(
            "INSERT INTO engram_partition_tracking (projection, partition, notification_id) "
            "SELECT n, p, 0 FROM unnest({names}::text[]) AS n, unnest({parts}::int[]) AS p ON CONFLICT DO NOTHING; "
            "SELECT projection, partition, notification_id FROM engram_partition_tracking "
            "WHERE projection = ANY({names}) AND partition = ANY({parts}) ORDER BY projection, partition FOR UPDATE",
        ).format(names=Literal(names), parts=Literal(parts)))
        curs.nextset()
        locked = {(r["projection"], int(r["partition"])): int(r["notification_id"]) for r in curs.fetchall()}
        events = sorted(((part, e, t) for part in parts for e, t in batches[part] if e is not None),
                        key=lambda item: item[2].notification_id)  # once, for every projection
        fresh = {p.name: [(e, t) for part, e, t in events if t.notification_id > locked[(p.name, part)]]
                 for p in ordered}
        applied = ViewProjection.apply_each(curs, ordered, fresh, guarded=True)
        moved = [(name, part, upto[part]) for name in names for part in parts if upto[part] > locked[(name, part)]]
        if moved:
            curs.execute(
                "UPDATE engram_partition_tracking AS t SET notification_id = m.n "
                "FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS m(name, part, n) "
                "WHERE t.projection = m.name AND t.partition = m.part",
                ([m[0] for m in moved], [m[1] for m in moved], [m[2] for m in moved]))
        return applied

    # Every event this projection applies changes one memory's rows (its originator's) and, besides,
    # only rows it adds to in any order (per-person counts written in a fixed order): replaying each
    # memory's events in order, the memories apart and at once, builds the same view. A rebuild may then
    # fill it from several processes, each taking the memories of one part (`replay_part`, ADR 0038).
    partitionable = False
    # The event classes `apply` acts on; None: it decides event by event. A rebuild leaves the others
    # unread (`skipped_topics`): a recall view has no use for the receipts that are most of the log.
    applies_to: tuple[type, ...] | None = None

    def skipped_topics(self) -> list[str]:
        """The stored topics of domain events this projection does nothing with. A topic the domain does
        not know is never among them: such an event is still read, and set aside as it always was."""
        if self.applies_to is None:
            return []
        return sorted(topic for topic, cls in stored_topics().items() if not issubclass(cls, self.applies_to))

    REBUILD_BATCH = 2000  # events a rebuild applies, and commits, at a time
    SWAP_GAP = 2000  # at most this many events behind the head, the rebuild takes the lock and swaps
    SWAP_TRIES = 5  # a swap that waits too long for a lock (readers, a deadlock) gives up and comes again

    def rebuild(self, recorder: Any, decode: Callable[[Any], Any],
                progress: Callable[[int, int], None] | None = None, keys: Any = None,
                fill: Callable[[int], tuple[int, set[int]]] | None = None) -> int:
        """Replay every event into fresh tables beside the view, then swap them in (ADR 0034).

        The new tables live in a schema of their own (`View.shadow`), with the view's DDL and names, so
        the projection's own statements write there when that schema comes first in the search path.
        They fill in batches, each committed, while the old view keeps serving reads and keeps being
        updated by writes. Then, in one short transaction holding the view's tracking row (and, in
        distributed mode, its partition rows): the last events are applied, the old tables are dropped
        and the new ones moved in. A crash before that leaves the old view as it was; the next rebuild
        drops what the crashed one left. Returns how many events were applied.

        `fill(head)`, for a `partitionable` projection, fills the shadow up to `head` first, in several
        processes (each replaying one part's memories with `replay_part`), and returns how many events
        they applied and which they set aside; the events after `head` are then replayed here."""
        view = self.view
        with view.datastore.transaction(commit=True) as curs:
            view.create_shadow(curs)
        position = applied = 0
        quarantined: set[int] = set()
        if fill is not None and self.partitionable:
            head = recorder.max_notification_id() or 0
            if head - position > max(self.FILL_FROM, self.SWAP_GAP):
                applied, quarantined = fill(head)
                position = head
        for attempt in range(self.SWAP_TRIES + 1):
            while True:  # fill, each batch committed, until close enough to the head to swap briefly
                head = recorder.max_notification_id() or 0
                if head - position <= self.SWAP_GAP:
                    break
                position, n = self._replay(recorder, decode, keys, position, head, progress, quarantined)
                applied += n
            seen = set(quarantined)  # what a swap that fails and rolls back set aside is not kept
            started = time.monotonic()
            try:
                with view.datastore.transaction(commit=True) as curs:
                    curs.execute("SET LOCAL lock_timeout = '2s'")  # never stall readers and writers for long
                    live = view.lock_position(curs)
                    curs.execute("SELECT 1 FROM engram_partition_tracking WHERE projection = %s FOR UPDATE",
                                 (self.name,))
                    head = max(recorder.max_notification_id() or 0, live)  # nothing can be applied past it now
                    _, n = self._replay(recorder, decode, keys, position, head, progress, seen, curs=curs)
                    view.swap_in(curs)
                    # set aside again by this replay, or gone: an event the new view applied is no longer
                    curs.execute("DELETE FROM engram_quarantine WHERE projection = %s "
                                 "AND NOT (notification_id = ANY(%s))", (self.name, sorted(seen)))
                    view.set_position(curs, head)
                    curs.execute(
                        "UPDATE engram_partition_tracking SET notification_id = greatest(notification_id, %s) "
                        "WHERE projection = %s",
                        (head, self.name),
                    )
            except (DatabaseTimeout, DeadlockDetected, OperationalError) as e:
                wrapped = isinstance(e, OperationalError) and not isinstance(e.__cause__, DeadlockDetected)
                if wrapped or attempt == self.SWAP_TRIES:
                    raise
                log.warning("rebuild of %s: the swap waited too long for a lock; trying again", self.name)
                continue
            applied += n
            log.info("rebuild of %s swapped in at position %d: %d events applied under the lock, held %.0f ms",
                     self.name, head, n, (time.monotonic() - started) * 1000)
            if progress is not None:
                progress(head, head)
            return applied
        raise AssertionError("unreachable")

    def replay_part(self, recorder: Any, decode: Callable[[Any], Any], keys: Any, head: int, part: int, parts: int,
                    progress: Callable[[int, int], None] | None = None) -> tuple[int, set[int]]:
        """One process's share of a rebuild's fill (`rebuild`'s `fill`): into the shadow tables, which
        exist, the events up to `head` of the memories in `part` of `parts`, each batch committed.
        Returns how many were applied and which were set aside."""
        assert self.partitionable and 0 <= part < parts
        quarantined: set[int] = set()
        _, applied = self._replay(recorder, decode, keys, 0, head, progress, quarantined, part=(part, parts))
        return applied, quarantined

    def _replay(self, recorder: Any, decode: Callable[[Any], Any], keys: Any, position: int, head: int,
                progress: Callable[[int, int], None] | None, quarantined: set[int],
                curs: Cursor[Any] | None = None, part: tuple[int, int] | None = None) -> tuple[int, int]:
        """Apply the events after `position` up to `head` to the shadow tables (only those of the memories
        in `part`, if given): each batch in its own committed transaction, or all in `curs` (the swap's).
        Returns the new position and how many."""
        applied = 0
        skip = self.skipped_topics()
        while position < head:
            # a part's events read, and decoded, by the process whose part they are, and only there; and
            # events this view does not apply not read at all
            notes = recorder.select_replay(position, self.REBUILD_BATCH, head, part=part, skip=skip)
            if not notes:
                break
            last = notes[-1].id
            with prefetched(keys, notes):
                items = [(decode(n), Tracking(APPLICATION, n.id)) for n in notes]
                if curs is not None:
                    self.view.use_shadow(curs)
                    applied += self._apply_after(curs, position, items, quarantined)
                else:
                    applied += self._commit_batch(position, items, quarantined)
            position = last
            if progress is not None and curs is None:
                progress(position, head)
        return max(position, head), applied

    FILL_FROM = 20_000  # events: fewer, and one process replays them before several would have started
    REBUILD_RETRIES = 5  # a batch rolled back by a deadlock is committed again, at most this many times

    def _commit_batch(self, position: int, items: Sequence[tuple[Any, Tracking]], quarantined: set[int]) -> int:
        """One batch of a rebuild's fill into the shadow, in a transaction of its own. Rows outside the
        shadow (a forget's purge report, shared by the memories it forgot) are written by the serving
        catch-up and the other processes of the fill too: rolled back by a deadlock over them, the
        batch is simply committed again."""
        for attempt in range(self.REBUILD_RETRIES + 1):
            seen = set(quarantined)
            try:
                with self.view.datastore.transaction(commit=True) as batch:
                    # lost in a crash, this batch would be dropped with the rest of the shadow anyway
                    batch.execute("SET LOCAL synchronous_commit = off")
                    self.view.use_shadow(batch)
                    applied = self._apply_after(batch, position, items, seen)
            except (*ROLLED_BACK, OperationalError) as e:
                if not _rolled_back(e) or attempt == self.REBUILD_RETRIES:
                    raise
                log.warning("rebuild of %s: a batch was rolled back by a deadlock; committing it again", self.name)
                continue
            quarantined |= seen
            return applied
        raise AssertionError("unreachable")
