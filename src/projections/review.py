"""The review queue: each person's pending candidates, sealed like every other view."""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.adapters.keystore import KeyStore
from engram.adapters.view_cipher import seal_for_view
from engram.domain.memory import Memory, purge_id_of

from .base import ViewProjection
from .purge import REVIEW_QUEUE, PurgeTracker
from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_candidates (
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    sealed_source bytea,             -- under the memory's key, like the text (ADR 0019)
    review text NOT NULL,
    sealed_text bytea,
    sealed_evidence bytea,
    sealed_context bytea,            -- the sentence or two around the quote, under the memory's key
    relation jsonb,                  -- {"kind": "duplicate"|"update", "memory_id"}: no text (ADR 0041)
    valid_from timestamptz,          -- resolved against the message's time where that is certain; else null
    valid_to timestamptz,
    proposed_at timestamptz NOT NULL,
    expires_at timestamptz
);
CREATE INDEX IF NOT EXISTS engram_candidates_owner ON engram_candidates (company, person, proposed_at);
CREATE INDEX IF NOT EXISTS engram_candidates_expiry ON engram_candidates (expires_at);
"""


class ReviewView(View):
    ddl = DDL
    tables = ("engram_candidates",)


class ReviewProjection(ViewProjection):
    name = "review"
    view_class = ReviewView

    def __init__(self, view: View, keys: KeyStore, purge: PurgeTracker) -> None:
        super().__init__(view)
        self.keys = keys
        self.purge = purge

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        if isinstance(event, Memory.Proposed):
            key = self.keys.get(event.originator_id) if event.text is not None else None
            if key is None:
                return  # already forgotten: nothing to review
            context = getattr(event, "context", None)
            relation = getattr(event, "relation", None)
            curs.execute(
                "INSERT INTO engram_candidates (memory_id, company, person, visibility, team, sealed_source, review, "
                "sealed_text, sealed_evidence, sealed_context, relation, proposed_at, expires_at, valid_from, valid_to) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                (
                    event.originator_id, event.company, event.person, event.visibility, event.team,
                    seal_for_view(key, event.originator_id, "source", event.source), event.review,
                    seal_for_view(key, event.originator_id, "text", event.text),
                    seal_for_view(key, event.originator_id, "evidence", event.evidence),
                    seal_for_view(key, event.originator_id, "context", context) if context else None,
                    Jsonb(relation) if relation else None, event.timestamp, event.expires_at,
                    event.valid_from, event.valid_to,
                ),
            )
        elif isinstance(event, Memory.EvidenceAdded):  # the same thing said again: one candidate, every quote
            key = self.keys.get(event.originator_id) if event.evidence is not None else None
            if key is not None:
                curs.execute("UPDATE engram_candidates SET sealed_evidence = %s WHERE memory_id = %s",
                             (seal_for_view(key, event.originator_id, "evidence", event.evidence),
                              event.originator_id))
        elif isinstance(event, Memory.Confirmed):
            curs.execute("DELETE FROM engram_candidates WHERE memory_id = %s", (event.originator_id,))
        elif isinstance(event, (Memory.Forgotten, Memory.Rejected, Memory.Expired)):
            curs.execute("DELETE FROM engram_candidates WHERE memory_id = %s", (event.originator_id,))
            self.purge.purged(
                curs, purge_id_of(event), REVIEW_QUEUE,
                f"deleted {curs.rowcount} candidate rows at position {tracking.notification_id}",
                event.timestamp,
            )
