"""Projection plumbing: a view's tables and its tracking position commit together.

Each view is a `PostgresTrackingRecorder` (its tracking table comes from
eventsourcing) extended with its own tables. A batch of events is applied in one
transaction that first locks the tracking row, so two runners, a rebuild or a
re-delivery can never apply an event twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresDatastore, PostgresTrackingRecorder
from eventsourcing.projection import Projection
from psycopg import Cursor
from psycopg.sql import SQL, Identifier, Literal
from psycopg_pool import PoolTimeout

from engram.adapters.availability import UNAVAILABLE_ERRORS
from engram.adapters.keystore import prefetched
from engram.adapters.outage import Outage

log = logging.getLogger("engram.projections")

APPLICATION = "engram"

# The database or its connection failed, not the event: retry the batch, never set the event aside.
TRANSIENT: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, PoolTimeout)


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

    def _apply_after(self, curs: Cursor[Any], position: int, items: Sequence[tuple[Any, Tracking]]) -> int:
        """Apply, as one batch, the events after `position`; skip watermarks (None), duplicates and
        re-deliveries. An event this projection cannot apply is quarantined, and the rest still flows."""
        fresh = [(e, t) for e, t in items if e is not None and t.notification_id > position]
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

    def cleared(self, curs: Cursor[Any]) -> None:
        """The view was just emptied for a rebuild (same transaction): withdraw what it reported elsewhere."""

    def begin(self) -> None:
        """Start of a batch: forget anything accumulated by a batch that was rolled back."""

    def flush(self, curs: Cursor[Any]) -> None:
        """End of a batch, same transaction: write what was accumulated (shared rows, in a fixed order)."""

    def apply_partition_batch(self, curs: Cursor[Any], partition: int, items: Sequence[tuple[Any, Tracking]],
                              upto: int) -> int:
        """Distributed mode: the same, tracked per Kafka partition. `None` events are watermarks:
        everything for this partition up to `upto` has been delivered, so the position may move there."""
        curs.execute(
            "INSERT INTO engram_partition_tracking (projection, partition, notification_id) VALUES (%s, %s, 0) "
            "ON CONFLICT DO NOTHING",
            (self.name, partition),
        )
        curs.execute(
            "SELECT notification_id FROM engram_partition_tracking WHERE projection = %s AND partition = %s "
            "FOR UPDATE",
            (self.name, partition),
        )
        row = curs.fetchone()
        assert row is not None
        position = int(row["notification_id"])
        applied = self._apply_after(curs, position, items)
        if upto > position:
            curs.execute(
                "UPDATE engram_partition_tracking SET notification_id = %s WHERE projection = %s AND partition = %s",
                (upto, self.name, partition),
            )
        return applied

    def rebuild(self, recorder: Any, decode: Callable[[Any], Any],
                progress: Callable[[int, int], None] | None = None, keys: Any = None) -> int:
        """Clear the view and replay every event into it in one transaction: readers see the old view
        until the new one is complete, and every runner or worker of this projection waits meanwhile."""
        head = recorder.max_notification_id() or 0
        applied = 0
        with self.view.datastore.transaction(commit=True) as curs:
            self.view.lock_position(curs)
            curs.execute("SELECT 1 FROM engram_partition_tracking WHERE projection = %s FOR UPDATE", (self.name,))
            self.view.clear(curs)
            self.cleared(curs)
            curs.execute("DELETE FROM engram_quarantine WHERE projection = %s", (self.name,))
            position = 0
            while position < head:
                notes = recorder.select_notifications(start=position, limit=1000, stop=head,
                                                      inclusive_of_start=False)
                if not notes:
                    break
                with prefetched(keys, notes):
                    items = [(decode(n), Tracking(APPLICATION, n.id)) for n in notes]
                    applied += self._apply_after(curs, position, items)
                position = notes[-1].id
                if progress is not None:
                    progress(position, head)
            self.view.set_position(curs, head)
            curs.execute(
                "UPDATE engram_partition_tracking SET notification_id = greatest(notification_id, %s) "
                "WHERE projection = %s",
                (head, self.name),
            )
        return applied


class ProjectorRunner:
    """Runs projections in-process: LISTEN/NOTIFY to wake promptly, polling in case a wake-up is missed.

    `settle(n)` returns once every projection has applied notification n, which is how a write gives
    read-your-writes before it returns. One thread at a time takes the turn to catch up (a write's, or
    the background loop's), for every event stored so far: the writes of a burst share its
    transactions, and wait for the position they need to be published rather than each catching up.
    """

    BATCH = 500
    defers = False  # a write waits for these projectors in its own thread

    def __init__(
        self,
        recorder: Any,
        decode: Callable[[Any], Any],
        projections: Sequence[ViewProjection],
        poll_interval: float = 1.0,
        keys: Any = None,
    ) -> None:
        self.keys = keys
        self.recorder = recorder
        self.decode = decode
        self.projections = list(projections)
        self.poll_interval = poll_interval
        self._locks = {p.name: threading.Lock() for p in self.projections}
        self._turn = threading.Condition()
        self._catching_up = False  # some thread has the turn
        self._published = 0  # every projection has applied this notification id at least (as this process saw)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def catch_up(self, projection: ViewProjection, upto: int | None = None) -> int:
        return self.catch_up_many([projection], upto)

    def catch_up_many(self, projections: Sequence[ViewProjection], upto: int | None = None) -> int:
        """Read each pending event once, decode it once, and let every projection apply what it lacks."""
        ordered = sorted(projections, key=lambda p: p.name)  # one lock order: no deadlock
        every = {p.name for p in ordered} == {p.name for p in self.projections}  # then positions are published
        for p in ordered:
            self._locks[p.name].acquire()
        try:
            applied = 0
            positions = self.positions(ordered)
            start = min(positions.values())
            if every:
                self._publish(start)
            while upto is None or start < upto:
                notes = self.recorder.select_notifications(start=start, limit=self.BATCH, inclusive_of_start=False)
                if not notes:
                    break
                mine = [p for p in ordered if notes[-1].id > positions[p.name]]
                datastore = ordered[0].view.datastore
                if mine:  # (none: every projection is past these already, moved by a runner elsewhere)
                    with prefetched(self.keys, notes):
                        items = [(self.decode(n), Tracking(APPLICATION, n.id)) for n in notes]
                        # every view and its tracking row move together: one transaction, one commit
                        try:
                            with datastore.transaction(commit=True) as curs:
                                applied += self._apply_together(curs, mine, items, guarded=False)
                        except TRANSIENT:
                            raise
                        except Exception:  # noqa: BLE001 - all of it rolled back: again, where a bad event is set aside
                            with datastore.transaction(commit=True) as curs:
                                applied += self._apply_together(curs, mine, items, guarded=True)
                positions.update((p.name, notes[-1].id) for p in mine)
                start = notes[-1].id
                if every:
                    self._publish(start)
            return applied
        finally:
            for p in reversed(ordered):
                self._locks[p.name].release()

    @staticmethod
    def _apply_together(curs: Cursor[Any], projections: Sequence[ViewProjection],
                        items: Sequence[tuple[Any, Tracking]], *, guarded: bool) -> int:
        """`ViewProjection.apply_batch` for several projections at once, with the same effect in fewer
        round trips: their tracking rows locked in one message (in name order, as always) and moved in
        another. Not `guarded`, their work runs straight in the transaction and a failure ends it (the
        caller rolls back and comes again, guarded); `guarded`, it runs in one savepoint, and only when
        some event fails there is each projection applied again in its own savepoints, which finds the
        bad event and sets it aside."""
        if not projections:
            return 0
        last = items[-1][1].notification_id
        curs.execute(SQL("; ").join(
            SQL("SELECT notification_id FROM {} WHERE application_name = {} FOR UPDATE").format(
                Identifier(p.view.tracking_table_name), Literal(APPLICATION)) for p in projections))
        locked: dict[str, int] = {}
        for p in projections:
            row = curs.fetchone()
            assert row is not None, "tracking row missing; create_table() was not run"
            locked[p.name] = int(row["notification_id"])
            curs.nextset()
        fresh = {p.name: [(e, t) for e, t in items if e is not None and t.notification_id > locked[p.name]]
                 for p in projections}
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
                    applied = sum(p._apply_after(curs, locked[p.name], items) for p in projections)
        finally:
            for p in projections:
                p.begin()
        behind = [p for p in projections if last > locked[p.name]]
        if behind:
            curs.execute(SQL("; ").join(
                SQL("UPDATE {} SET notification_id = {} WHERE application_name = {}").format(
                    Identifier(p.view.tracking_table_name), Literal(last), Literal(APPLICATION)) for p in behind))
        return applied

    def positions(self, projections: Sequence[ViewProjection]) -> dict[str, int]:
        """Every projection's position, read in one statement (one round trip, no transaction): a write
        asks this before it returns, and asking each view apart cost three round trips a view."""
        if not projections:
            return {}
        query = " UNION ALL ".join(
            f"SELECT {i} AS n, notification_id FROM {p.view.tracking_table_name} WHERE application_name = %s"
            for i, p in enumerate(projections))
        with projections[0].view.datastore.get_connection() as conn:
            rows = conn.execute(query, [APPLICATION] * len(projections)).fetchall()
        found = {int(r["n"]): int(r["notification_id"]) for r in rows}
        return {p.name: found.get(i, 0) for i, p in enumerate(projections)}

    def settle_recordings(self, recordings: Sequence[Any]) -> None:
        if recordings:
            self.settle(max(r.notification.id for r in recordings))

    def settle(self, notification_id: int | None) -> None:
        """Return once every projection has applied `notification_id`: at once when that was published,
        else after waiting for the thread that has the turn to publish it, or after taking the turn and
        catching up (everything stored so far, up to a batch past it) for every write waiting."""
        if notification_id is not None and self._take_turn(notification_id):
            try:
                self.catch_up_many(self.projections, upto=notification_id)
            finally:
                self._end_turn()

    def catch_up_all(self) -> None:
        self._take_turn(None)
        try:
            self.catch_up_many(self.projections)
        finally:
            self._end_turn()

    def _take_turn(self, upto: int | None) -> bool:
        """Wait while another thread has the turn and `upto` is not published; then False if it is, else
        True: the turn is this thread's (`_end_turn` gives it back)."""
        with self._turn:
            while self._catching_up and (upto is None or self._published < upto):
                self._turn.wait()
            if upto is not None and self._published >= upto:
                return False
            self._catching_up = True
            return True

    def _end_turn(self) -> None:
        with self._turn:
            self._catching_up = False
            self._turn.notify_all()  # the waiters still behind: one of them takes the next turn

    def _publish(self, position: int) -> None:
        """Every projection has applied `position` (committed): wake the writes waiting for it. Positions only
        move forward (a rebuild commits at the head), so what was published stays true."""
        with self._turn:
            if position > self._published:
                self._published = position
                self._turn.notify_all()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="engram-projectors", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            try:  # wake the loop's LISTEN wait now rather than after poll_interval
                with self.recorder.datastore.get_connection() as conn:
                    conn.execute(f'NOTIFY "{self.recorder.channel_name}"')
            except Exception:  # noqa: BLE001 - the database may be gone; the wait ends by itself then
                pass
            self._thread.join(timeout=5)

    def _run(self) -> None:
        channel = self.recorder.channel_name
        outage = Outage(log, "database (projector loop)", first=self.poll_interval)
        while not self._stop.is_set():
            try:
                with self.recorder.datastore.get_connection() as conn:
                    conn.execute(f'LISTEN "{channel}"')
                    while not self._stop.is_set():
                        self.catch_up_all()
                        outage.ok()
                        # Wakes on NOTIFY, or after poll_interval whatever happens.
                        for _ in conn.notifies(timeout=self.poll_interval, stop_after=1):
                            pass
            except TRANSIENT as exc:  # the database is away: one line when it starts, a growing pause meanwhile
                self._stop.wait(outage.failed(exc))
            except Exception:  # noqa: BLE001 - keep projecting after a database hiccup
                log.exception("projector loop failed; retrying")
                self._stop.wait(self.poll_interval)
