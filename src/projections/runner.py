"""Runs the in-process projections: LISTEN/NOTIFY to wake promptly, polling in case a wake-up is missed,
and `settle(n)` for a write's read-your-writes (ADR 0033)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.sql import SQL, Identifier, Literal

from engram.adapters.keystore import prefetched
from engram.adapters.outage import Outage

from .base import ViewProjection
from .failures import TRANSIENT
from .view import APPLICATION

log = logging.getLogger("engram.projections")


class _DecodedOnce:
    """A batch of stored events, each decoded when first asked for, and once however often asked."""

    def __init__(self, notes: Sequence[Any], decode: Callable[[Any], Any]) -> None:
        self.notes = notes
        self.decode = decode
        self.decoded: dict[int, tuple[Any, Tracking]] = {}

    def after(self, position: int) -> list[tuple[Any, Tracking]]:
        """The events past `position`, in order, each with its tracking record."""
        for n in self.notes:
            if n.id > position and n.id not in self.decoded:
                self.decoded[n.id] = (self.decode(n), Tracking(APPLICATION, n.id))
        return [self.decoded[n.id] for n in self.notes if n.id > position]


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
                    items_after = _DecodedOnce(notes, self.decode).after
                    with prefetched(self.keys, notes):
                        # every view and its tracking row move together: one transaction, one commit
                        try:
                            with datastore.transaction(commit=True) as curs:
                                applied += self._apply_together(curs, mine, items_after, guarded=False)
                        except TRANSIENT:
                            raise
                        except Exception:  # noqa: BLE001 - all of it rolled back: again, where a bad event is set aside
                            with datastore.transaction(commit=True) as curs:
                                applied += self._apply_together(curs, mine, items_after, guarded=True)
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
                        items_after: Callable[[int], Sequence[tuple[Any, Tracking]]], *, guarded: bool) -> int:
        """`ViewProjection.apply_batch` for several projections at once, with the same effect in fewer
        round trips: their tracking rows locked in one message (in name order, as always) and moved in
        another. The events are asked for (`items_after(position)`, decoded then) only once the rows
        are locked, and only past the lowest position locked: while another process applied the same
        batch, this one waited on the rows instead of decoding it too (ADR 0037). `guarded` as in
        `ViewProjection.apply_each`."""
        if not projections:
            return 0
        curs.execute(SQL("; ").join(
            SQL("SELECT notification_id FROM {} WHERE application_name = {} FOR UPDATE").format(
                Identifier(p.view.tracking_table_name), Literal(APPLICATION)) for p in projections))
        locked: dict[str, int] = {}
        for p in projections:
            row = curs.fetchone()
            assert row is not None, "tracking row missing; create_table() was not run"
            locked[p.name] = int(row["notification_id"])
            curs.nextset()
        items = items_after(min(locked.values()))
        if not items:  # applied meanwhile, elsewhere
            return 0
        last = items[-1][1].notification_id
        fresh = {p.name: [(e, t) for e, t in items if e is not None and t.notification_id > locked[p.name]]
                 for p in projections}
        applied = ViewProjection.apply_each(curs, projections, fresh, guarded=guarded)
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

    def settle_stored(self) -> None:
        """`settle` of the last event stored so far (one query for it): background work reading what was
        saved without waiting (receipts, ADR 0063) then finds all of it."""
        self.settle(self.recorder.max_notification_id())

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

    def start(self, *, listen: bool = True) -> None:
        """The background loop. `listen=False` (several serving processes, ADR 0037): no NOTIFY wakes it,
        only `poll_interval`, since each write settles its own events in the process that made it; woken
        by every write, this loop would race those writes for the rows and do their batches in pieces."""
        self._thread = threading.Thread(target=self._run, args=(listen,), name="engram-projectors", daemon=True)
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

    def _run(self, listen: bool = True) -> None:
        channel = self.recorder.channel_name
        outage = Outage(log, "database (projector loop)", first=self.poll_interval)
        while not self._stop.is_set():
            try:
                if not listen:
                    self.catch_up_all()
                    outage.ok()
                    self._stop.wait(self.poll_interval)
                    continue
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
            except Exception:  # keep projecting after a database hiccup
                log.exception("projector loop failed; retrying")
                self._stop.wait(self.poll_interval)
