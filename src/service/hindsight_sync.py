"""Keep Hindsight in step with the event store: retain, replace, delete, with retries and evidence."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from engram.adapters.hindsight import HindsightClient, HindsightUnavailable, bank_for
from engram.domain.hints import SemanticHints
from engram.domain.memory import CONFIRMED, Memory
from engram.projections.recall import record_purged_copy

from .engram import MemoryService

log = logging.getLogger("engram.hindsight")

MAX_BACKOFF = timedelta(minutes=30)
PURGE_PROBES = 3  # recalls with a deleted document's own fact texts, to check nothing still points at it


class HindsightSyncer:
    def __init__(self, memories: MemoryService, client: HindsightClient) -> None:
        self.memories = memories
        self.client = client
        self.app = memories.app
        self.datastore = memories.app.factory.datastore  # type: ignore[attr-defined]

    def _claim(self, now: datetime, limit: int) -> list[dict[str, Any]]:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "SELECT memory_id, action, revision, forget_id, attempts FROM engram_hindsight_sync "
                "WHERE state = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= %s) "
                "ORDER BY changed_at LIMIT %s FOR UPDATE SKIP LOCKED",
                (now, limit),
            )
            rows = list(curs.fetchall())
            for row in rows:  # a short lease; a crashed syncer's rows come back after it
                curs.execute("UPDATE engram_hindsight_sync SET next_attempt_at = %s WHERE memory_id = %s",
                             (now + timedelta(seconds=60), row["memory_id"]))
        return rows

    def sync(self, limit: int = 50) -> int:
        now = self.memories.clock.now()
        done = 0
        for row in self._claim(now, limit):
            try:
                self._sync_one(row, now)
                done += 1
            except HindsightUnavailable as e:
                backoff = min(timedelta(seconds=2 ** min(row["attempts"], 11)), MAX_BACKOFF)
                with self.datastore.transaction(commit=True) as curs:
                    curs.execute(
                        "UPDATE engram_hindsight_sync SET attempts = attempts + 1, next_attempt_at = %s, "
                        "last_error = %s WHERE memory_id = %s AND state = 'pending'",
                        (now + backoff, str(e)[:120], row["memory_id"]),
                    )
        return done

    def _sync_one(self, row: dict[str, Any], now: datetime) -> None:
        memory_id: UUID = row["memory_id"]
        try:
            memory = self.app.repository.get(memory_id)
        except AggregateNotFoundError:
            return
        assert isinstance(memory, Memory)
        bank = bank_for(memory.scope)
        text = memory.current["text"]
        if row["action"] == "retain" and memory.status == CONFIRMED and text is not None:
            self.client.retain(bank, str(memory_id), text, memory.current["valid_from"])
            self._done(memory_id, row, now, None)
            return
        # delete (forgotten, expired, rejected), withdraw (scope lost), or a retain that no longer applies
        evidence = self._delete_and_confirm(bank, str(memory_id))
        self._done(memory_id, row, now, evidence)

    def _delete_and_confirm(self, bank: str, document_id: str) -> str:
        """Delete the document, then show it is gone: the document answers 404, none of its facts is
        listed, and recalling each of its facts' own words returns nothing that references it (no
        fact of the document, no observation derived from one)."""
        facts = self.client.document_facts(bank, document_id)
        self.client.delete(bank, document_id)
        if self.client.exists(bank, document_id):
            raise HindsightUnavailable("document still present after delete")
        if self.client.document_facts(bank, document_id):
            raise HindsightUnavailable("facts still listed after delete")
        fact_ids = {f for f, _ in facts}
        for _fact_id, text in facts[:PURGE_PROBES]:
            for hint in self.client.recall(bank, text, deadline=30, budget="mid"):
                if hint.document_id == document_id or document_id in hint.source_document_ids \
                        or fact_ids & set(hint.source_fact_ids):
                    raise HindsightUnavailable("a recall result still references the deleted document")
        probes = min(len(facts), PURGE_PROBES)
        return (f"document {document_id} answers 404 in its bank after delete; {len(facts)} fact(s) before, "
                f"0 after; {probes} recall probe(s) found no result referencing it")

    def _done(self, memory_id: UUID, row: dict[str, Any], now: datetime, evidence: str | None) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "UPDATE engram_hindsight_sync SET state = 'done', synced_at = %s, last_error = NULL, "
                "next_attempt_at = NULL WHERE memory_id = %s AND action = %s AND revision = %s",
                (now, memory_id, row["action"], row["revision"]),
            )
            if evidence and row["forget_id"]:
                record_purged_copy(curs, row["forget_id"], "hindsight", evidence, now)

    def backlog(self) -> dict[str, int]:
        with self.datastore.get_connection() as conn:
            rows = conn.execute("SELECT state, count(*) AS n FROM engram_hindsight_sync GROUP BY state").fetchall()
        return {r["state"]: int(r["n"]) for r in rows}


class SemanticIndex:
    """Recall hints from Hindsight within a deadline. Facts map to memories by document id;
    observations through their source facts' document ids (see `domain.hints` for how they count)."""

    def __init__(self, client: HindsightClient, deadline_ms: float) -> None:
        self.client = client
        self.deadline = deadline_ms / 1000

    def hints(self, scopes: list[Any], query: str) -> SemanticHints:
        from .engram import SemanticIndexUnavailable

        started = time.monotonic()
        out = SemanticHints()
        for scope in scopes:
            left = self.deadline - (time.monotonic() - started)
            if left <= 0:
                raise SemanticIndexUnavailable("deadline passed")
            try:
                hints = self.client.recall(bank_for(scope), query, deadline=left)
            except HindsightUnavailable as e:
                raise SemanticIndexUnavailable(str(e)) from None
            for h in hints:
                if h.kind == "observation":
                    out.add_observation(h.score, frozenset(_memory_id(d) for d in h.source_document_ids))
                elif (memory_id := _memory_id(h.document_id)) is not None:
                    out.add_fact(memory_id, h.score)
        return out


def _memory_id(document_id: str | None) -> str | None:
    try:
        return str(UUID(document_id)) if document_id else None
    except ValueError:
        return None
