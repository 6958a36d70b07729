"""What Hindsight should hold, from events: per memory, the document to retain or to delete."""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor

from domain.memory import Memory

from .base import EngramProjection, View

DDL = """
CREATE TABLE IF NOT EXISTS engram_hindsight_sync (
    memory_id uuid PRIMARY KEY,
    action text NOT NULL,            -- retain | delete
    revision int NOT NULL,
    forget_id text,
    state text NOT NULL,             -- pending | done
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    last_error text,
    synced_at timestamptz,
    changed_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS engram_hindsight_sync_pending ON engram_hindsight_sync (changed_at) WHERE state = 'pending';
"""


class HindsightSyncView(View):
    ddl = DDL
    tables = ("engram_hindsight_sync",)


class HindsightSyncProjection(EngramProjection):
    """Only the wish is projected; `service.hindsight_sync.HindsightSyncer` makes it so and records
    the outcome (attempts, backoff, purge evidence)."""

    name = "hindsight_sync"
    view_class = HindsightSyncView

    def apply(self, curs: Cursor[Any], e: Any, tracking: Tracking) -> None:
        if isinstance(e, Memory.Remembered):
            self._want(curs, e, "retain", 1)
        elif isinstance(e, Memory.Confirmed):
            self._want(curs, e, "retain", None)
        elif isinstance(e, Memory.Corrected):
            self._want(curs, e, "retain", e.revision)
        elif isinstance(e, (Memory.Forgotten, Memory.Expired, Memory.Rejected)):
            self._want(curs, e, "delete", None, getattr(e, "forget_id", None))

    @staticmethod
    def _want(curs: Cursor[Any], e: Any, action: str, revision: int | None, forget_id: str | None = None) -> None:
        curs.execute(
            "INSERT INTO engram_hindsight_sync (memory_id, action, revision, forget_id, state, changed_at) "
            "VALUES (%(id)s, %(action)s, coalesce(%(revision)s, 1), %(forget_id)s, 'pending', %(at)s) "
            "ON CONFLICT (memory_id) DO UPDATE SET action = EXCLUDED.action, "
            "revision = coalesce(%(revision)s, engram_hindsight_sync.revision), "
            "forget_id = coalesce(EXCLUDED.forget_id, engram_hindsight_sync.forget_id), state = 'pending', "
            "attempts = 0, next_attempt_at = NULL, changed_at = EXCLUDED.changed_at "
            "WHERE engram_hindsight_sync.action <> 'delete'",  # a delete is final
            {"id": e.originator_id, "action": action, "revision": revision, "forget_id": forget_id,
             "at": e.timestamp},
        )
