"""The inbox: each receipt's state, and the chats where capture was stopped. No text."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.adapters.blind_index import BlindIndex
from engram.domain.memory import Memory, purge_id_of
from engram.domain.receipt import IGNORED, QUEUED, Receipt, answered_state

from .base import ViewProjection
from .purge import INBOX, PurgeTracker
from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_inbox (
    receipt_uuid uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    receipt_id text NOT NULL,
    source_blind text,               -- BlindIndex.source of its source id; the source itself is only sealed (ADR 0019)
    kind text NOT NULL,
    state text NOT NULL,
    reason text,
    candidate_ids jsonb NOT NULL DEFAULT '[]',
    received_at timestamptz NOT NULL,
    processed_at timestamptz,
    cleared boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS engram_inbox_queue ON engram_inbox (received_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS engram_inbox_turns ON engram_inbox (company, person, received_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS engram_inbox_retention ON engram_inbox (processed_at) WHERE NOT cleared;
CREATE INDEX IF NOT EXISTS engram_inbox_candidates ON engram_inbox USING gin (candidate_ids);
CREATE TABLE IF NOT EXISTS engram_capture_stops (
    company text NOT NULL,
    person text NOT NULL,
    source_blind text NOT NULL,
    stopped_at timestamptz NOT NULL,
    PRIMARY KEY (company, person, source_blind)
);
"""


class InboxView(View):
    ddl = DDL
    tables = ("engram_inbox", "engram_capture_stops")


class InboxProjection(ViewProjection):
    """Also reports each forget's `inbox` copy: the receipt payload its memory was learned from."""

    name = "inbox"
    view_class = InboxView

    def __init__(self, view: View, index: BlindIndex, purge: PurgeTracker | None = None) -> None:
        super().__init__(view)
        self.index = index
        self.purge = purge

    def _report(self, curs: Cursor[Any], forget_id: str, memory_id: Any, at: datetime, position: int) -> None:
        """The inbox copy of a forgotten memory: purged when no receipt produced it, or when the
        receipt it came from has its payload cleared (its key destroyed, in the forget's transaction)."""
        if self.purge is None:
            return
        curs.execute("SELECT receipt_uuid, cleared FROM engram_inbox WHERE candidate_ids @> %s",
                     (Jsonb([str(memory_id)]),))
        rows = list(curs.fetchall())
        if not rows:
            self.purge.purged(curs, forget_id, INBOX, "no receipt payload produced this memory", at)
        elif all(r["cleared"] for r in rows):
            self.purge.purged(curs, forget_id, INBOX,
                              f"payload of receipt {rows[0]['receipt_uuid']} cleared (its data key destroyed; "
                              f"the inbox row holds no text) by position {position}", at)

    def apply(self, curs: Cursor[Any], e: Any, tracking: Tracking) -> None:
        if isinstance(e, Receipt.Received):
            source_id = (e.source or {}).get("id")  # None once the receipt's key is gone
            blind = self.index.source(e.company, source_id) if source_id else None
            # Not cleared until its PayloadCleared: an ignored receipt keeps no text, but its key seals its
            # source (ADR 0019), so retention and an account forget clear it like any other.
            curs.execute(
                "INSERT INTO engram_inbox (receipt_uuid, company, person, receipt_id, source_blind, kind, state, "
                "reason, received_at, processed_at, cleared) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, false) "
                "ON CONFLICT DO NOTHING",
                (e.originator_id, e.company, e.person, e.receipt_id, blind, e.kind, e.state, e.reason,
                 e.timestamp, e.timestamp if e.state == IGNORED else None),
            )
            if e.kind != "message" and blind:
                curs.execute(
                    "INSERT INTO engram_capture_stops (company, person, source_blind, stopped_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (e.company, e.person, blind, e.timestamp),
                )
        elif isinstance(e, Receipt.Processed):
            curs.execute(
                "UPDATE engram_inbox SET state = 'processed', candidate_ids = %s, processed_at = %s "
                "WHERE receipt_uuid = %s",
                (Jsonb(e.candidate_ids), e.timestamp, e.originator_id),
            )
        elif isinstance(e, (Receipt.Ignored, Receipt.Failed)):
            state = IGNORED if isinstance(e, Receipt.Ignored) else "failed"
            curs.execute(
                "UPDATE engram_inbox SET state = %s, reason = %s, processed_at = %s WHERE receipt_uuid = %s",
                (state, e.reason, e.timestamp, e.originator_id),
            )
        elif isinstance(e, Receipt.PayloadCleared):
            curs.execute("UPDATE engram_inbox SET cleared = true, source_blind = NULL WHERE receipt_uuid = %s "
                         "RETURNING candidate_ids",
                         (e.originator_id,))
            row = curs.fetchone()
            if row and row["candidate_ids"] and self.purge is not None:  # cleared after its memory's forget
                curs.execute("SELECT forget_id, memory_id FROM engram_forgets WHERE memory_id = ANY(%s::uuid[])",
                             (list(row["candidate_ids"]),))
                for forget in list(curs.fetchall()):
                    self._report(curs, forget["forget_id"], forget["memory_id"], e.timestamp, tracking.notification_id)
        elif isinstance(e, (Memory.Forgotten, Memory.Rejected, Memory.Expired)):
            self._report(curs, purge_id_of(e), e.originator_id, e.timestamp, tracking.notification_id)


class InboxQueries:
    """Reads of the inbox, and the worker's leases (coordination, not business state; a numbered
    migration owns `engram_inbox_leases`, since events cannot rebuild it)."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore

    def captures_stopped(self, company: str, person: str, source_blinds: Collection[str]) -> set[str]:
        """Which of these chats (`BlindIndex.source` of their ids, ADR 0019) the person stopped capture in:
        one statement for a whole batch of messages."""
        if not source_blinds:
            return set()
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT source_blind FROM engram_capture_stops WHERE company = %s AND person = %s"
                " AND source_blind = ANY(%s)", (company, person, list(source_blinds))).fetchall()
        return {r["source_blind"] for r in rows}

    def get(self, receipt_uuid: UUID) -> dict[str, Any] | None:
        with self.datastore.get_connection() as conn:
            return conn.execute("SELECT * FROM engram_inbox WHERE receipt_uuid = %s", (receipt_uuid,)).fetchone()

    def claim(self, now: datetime, lease_until: datetime, limit: int) -> list[UUID]:
        """Take up to `limit` queued receipts whose lease lapsed (a crashed worker's) or never existed,
        in turns: each person's oldest first, then each one's second oldest, and so on, so one person's
        batch of a hundred waits behind nobody else's first (ADR 0058)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "SELECT i.receipt_uuid FROM engram_inbox i JOIN ("
                " SELECT q.receipt_uuid, q.received_at, q.ctid AS place, "  # ties: as stored, as the index had them
                "  row_number() OVER (PARTITION BY q.company, q.person ORDER BY q.received_at, q.ctid) AS turn "
                " FROM engram_inbox q LEFT JOIN engram_inbox_leases l USING (receipt_uuid) "
                f" WHERE q.state = '{QUEUED}' AND (l.receipt_uuid IS NULL OR ("
                "  (l.lease_until IS NULL OR l.lease_until < %(now)s) AND (l.not_before IS NULL OR l.not_before <= %(now)s)))"
                ") c USING (receipt_uuid) "
                # locked as taken: a worker beside this one skips these and takes the next turns
                "ORDER BY c.turn, c.received_at, c.place LIMIT %(limit)s FOR UPDATE OF i SKIP LOCKED",
                {"now": now, "limit": limit},
            )
            ids = []
            for row in curs.fetchall():
                # the lease decides: a worker whose choice was made before another's claim committed
                # finds that lease here (its insert waits for it) and leaves the receipt to it
                curs.execute(
                    "INSERT INTO engram_inbox_leases AS l (receipt_uuid, lease_until) VALUES (%(r)s, %(until)s) "
                    "ON CONFLICT (receipt_uuid) DO UPDATE SET lease_until = EXCLUDED.lease_until "
                    "WHERE (l.lease_until IS NULL OR l.lease_until < %(now)s) "
                    "AND (l.not_before IS NULL OR l.not_before <= %(now)s) "
                    "RETURNING receipt_uuid",
                    {"r": row["receipt_uuid"], "until": lease_until, "now": now},
                )
                if curs.fetchone() is not None:
                    ids.append(row["receipt_uuid"])
        return ids

    def attempts(self, receipt_uuid: UUID) -> int:
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT attempts FROM engram_inbox_leases WHERE receipt_uuid = %s",
                               (receipt_uuid,)).fetchone()
        return int(row["attempts"]) if row else 0

    def progress(self, receipt_uuid: UUID) -> tuple[int, str | None]:
        """How many tries a receipt has had, and what the last one is waiting for (None: nothing)."""
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT attempts, waiting_for FROM engram_inbox_leases WHERE receipt_uuid = %s",
                               (receipt_uuid,)).fetchone()
        return (int(row["attempts"]), row["waiting_for"]) if row else (0, None)

    def defer(self, receipt_uuid: UUID, not_before: datetime, *, why: str, count_attempt: bool) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "UPDATE engram_inbox_leases SET lease_until = NULL, not_before = %s, waiting_for = %s, "
                "attempts = attempts + %s WHERE receipt_uuid = %s",
                (not_before, why, 1 if count_attempt else 0, receipt_uuid),
            )

    def release(self, receipt_uuid: UUID) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("DELETE FROM engram_inbox_leases WHERE receipt_uuid = %s", (receipt_uuid,))

    def due_for_clearing(self, before: datetime, limit: int) -> list[UUID]:
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT receipt_uuid FROM engram_inbox WHERE NOT cleared AND processed_at IS NOT NULL "
                "AND processed_at <= %s ORDER BY processed_at LIMIT %s",
                (before, limit),
            ).fetchall()
        return [r["receipt_uuid"] for r in rows]

    def backlog(self, company: str | None = None) -> dict[str, int]:
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT state, count(*) AS n FROM engram_inbox WHERE %(c)s::text IS NULL OR company = %(c)s "
                "GROUP BY state",
                {"c": company},
            ).fetchall()
        return {answered_state(r["state"]): int(r["n"]) for r in rows}
