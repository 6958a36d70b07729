"""The event recorder: how a save's events, the data keys created with them and a forget's shreds are
inserted in one transaction (saves that arrive together share one), and how a rebuild reads them back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import InterfaceError, Notification, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed, Identifier

from engram.domain.errors import MemoryForgotten

from .group_commit import GroupCommit
from .new_keys import ARRAYS, NewKey, as_arrays, key_rows


@dataclass(frozen=True)
class _Write:
    """One save's events and the new keys that commit with them."""

    events: Sequence[StoredEvent]
    keys: Sequence[NewKey]


class EventRecorder(PostgresApplicationRecorder):
    """eventsourcing's event recorder, inserting without psycopg's pipeline mode.

    In pipeline mode psycopg's `sync()` stops writing once its command queue is empty, although libpq
    may still hold unsent bytes of a large INSERT (more than the socket takes at once); it then waits
    for a result that cannot come, while the server waits for the rest of the message with the event
    table locked: every write of every company hangs. Three round trips instead of one cost little."""

    # Writes what must commit with the events (a forget's key destruction and tombstone): set by
    # the application, called with the transaction's cursor and the `shreds` passed to `save`.
    shredder: Callable[[Any, Sequence[Any]], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group_commit: GroupCommit[_Write, Sequence[int]] = GroupCommit(self._insert_together, self._insert_one)
        # eventsourcing's lock timeout, table lock and NOTIFY: one message, the same bytes every time
        self._lock_message = SQL("; ").join([*self.lock_table_statements, SQL("NOTIFY {0}").format(
            Identifier(self.channel_name))]).as_bytes(None)
        self._insert_alone, self._insert_with_keys = self._statements()

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """`keys` (NewKey): data keys of aggregates created by these events, stored in their transaction.
        Saves that arrive while another commits share the next transaction (`GroupCommit`); a save with
        shreds (a forget: keys destroyed, tombstones) commits alone."""
        shreds = kwargs.pop("shreds", ())
        keys = kwargs.pop("keys", ())
        if keys:
            first = {str(e.originator_id) for e in stored_events if e.originator_version == 1}
            if any(k.key_id not in first for k in keys):
                raise ValueError("a new data key is stored only with its aggregate's first event")
        if kwargs.get("tracking") is None:
            kwargs.pop("tracking", None)  # what Application.save passes: nothing to track here
        if shreds or kwargs or not stored_events:
            return self._insert(stored_events, shreds=shreds, keys=keys, **kwargs)
        return self.group_commit.submit(_Write(stored_events, keys))

    def _insert_one(self, write: _Write) -> Sequence[int]:
        ids = self._insert(write.events, keys=write.keys)
        assert ids is not None
        return ids

    def _insert_together(self, writes: Sequence[_Write]) -> list[Sequence[int]]:
        """Several saves' events and keys in one transaction (no retry: the group commit falls back to
        each alone); each save's notification ids, in order."""
        events = [e for w in writes for e in w.events]
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._insert_stored_events(curs, events, keys=[k for w in writes for k in w.keys])
            ids = list(self._fetch_ids_after_insert_events(curs, events) or [])
        split: list[Sequence[int]] = []
        at = 0
        for w in writes:
            split.append(ids[at:at + len(w.events)])
            at += len(w.events)
        return split

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _insert(self, stored_events: Sequence[StoredEvent], *, shreds: Sequence[Any] = (),
                keys: Sequence[NewKey] = (), **kwargs: Any) -> Sequence[int] | None:
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            if shreds:
                if self.shredder is None:
                    raise RuntimeError("events with shreds need the recorder's shredder")
                self.shredder(curs, shreds)
            self._insert_events(curs, stored_events, **kwargs)
            if not stored_events:
                return None
            self._insert_stored_events(curs, stored_events, keys=keys, **kwargs)
            return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)

    def originators_present(self, ids: Sequence[Any]) -> set[Any]:
        """Which of these aggregate ids have any stored event (one statement)."""
        if not ids:
            return set()
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL("SELECT DISTINCT originator_id FROM {}.{} WHERE originator_id = ANY(%s)").format(
                    Identifier(self.datastore.schema), Identifier(self.events_table_name)), (list(ids),)).fetchall()
        return {r["originator_id"] for r in rows}

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as select_notifications
    def select_replay(self, start: int, limit: int, stop: int, *, part: tuple[int, int] | None = None,
                      skip: Sequence[str] = ()) -> list[Notification]:
        """`select_notifications` after `start` up to `stop`, for a rebuild (ADR 0034), leaving out in the
        query what it would read only to drop: events of the `skip` topics (those its view does not
        apply), and, given `part` (part, parts), those of aggregates outside that part (the low 32 bits
        of the aggregate id, modulo `parts`): one process's share of a fill (ADR 0038)."""
        where = [SQL("notification_id > %s"), SQL("notification_id <= %s")]
        params: list[Any] = [start, stop]
        if part is not None:
            where.append(SQL("('x' || right(originator_id::text, 8))::bit(32)::bigint %% %s = %s"))
            params += [part[1], part[0]]
        if skip:
            where.append(SQL("NOT (topic = ANY(%s))"))
            params.append(list(skip))
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                SQL("SELECT * FROM {}.{} WHERE {} ORDER BY notification_id LIMIT %s").format(
                    Identifier(self.datastore.schema), Identifier(self.events_table_name), SQL(" AND ").join(where)),
                [*params, limit], prepare=True).fetchall()
        return [Notification(id=r["notification_id"], originator_id=r["originator_id"],
                             originator_version=r["originator_version"], topic=r["topic"], state=bytes(r["state"]))
                for r in rows]

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        """The lock message (one round trip, not three; no parameters, so the simple protocol carries it
        all), then one statement inserting the new data keys' rows and the events, from arrays of plain
        values (a composite a row cost twice the client's CPU to send). When a key is not written (its id
        was forgotten) no event is, and `_fetch_ids_after_insert_events` raises."""
        keys: Sequence[NewKey] = kwargs.pop("keys", ())
        curs.execute(self._lock_message)
        events = ([e.originator_id for e in stored_events], [e.originator_version for e in stored_events],
                  [e.topic for e in stored_events], [e.state for e in stored_events])
        if keys:
            curs.execute(self._insert_with_keys, (*as_arrays(keys), *events, len(keys)), prepare=True)
        else:
            curs.execute(self._insert_alone, events, prepare=True)

    def _fetch_ids_after_insert_events(self, curs: Any, stored_events: Sequence[StoredEvent],
                                       **kwargs: Any) -> Sequence[int] | None:
        ids = [r["notification_id"] for r in curs.fetchall()]
        if len(ids) != len(stored_events):  # a new key's id was forgotten: nothing about it may be saved
            raise MemoryForgotten("this memory was forgotten; nothing more can change it")
        return ids

    def _statements(self) -> tuple[Composed, Composed]:
        """The events' INSERT from four arrays, alone and after the new keys' rows (`key_rows`, replacing);
        with keys, the events are inserted only when every key was written."""
        def events(where: str) -> Composed:
            return SQL("INSERT INTO {}.{} AS t (originator_id, originator_version, topic, state) "
                       "SELECT * FROM unnest(%s::{}[], %s::bigint[], %s::text[], %s::bytea[]) "
                       + where + "RETURNING notification_id").format(
                Identifier(self.datastore.schema), Identifier(self.events_table_name),
                SQL(self.datastore.originator_id_type))
        with_keys = SQL("WITH written AS ({}) ").format(key_rows(ARRAYS, replace=True)) + events(
            "WHERE (SELECT count(*) FROM written) = %s ")
        return events(""), with_keys
