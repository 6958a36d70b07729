"""A projection applying events to its view: a batch in one transaction with its tracking position, each
projection set-based, a bad event set aside (quarantined) while the rest flows; several projections, or
several Kafka partitions, in one transaction. The view is `view`, rebuilding it `rebuild`, its rows are
written by `rows`, the in-process runner is `runner`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from psycopg import Cursor
from psycopg.sql import SQL, Literal

from .failures import TRANSIENT, Undecodable, error_name
from .rebuild import Rebuilding
from .view import View

log = logging.getLogger("engram.projections")


class ViewProjection(Projection[View], Rebuilding):
    """Applies events to its view; subclasses implement `apply(curs, event, tracking)`. Its rebuild is
    `Rebuilding`'s."""

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
