"""Keep Hindsight in step with the event store: retain, replace, delete, with retries and evidence."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from engram.adapters.hindsight import HindsightClient, HindsightUnavailable, bank_for
from engram.domain.memory import CONFIRMED, Memory
from engram.projections.purge import HINDSIGHT, PurgeTracker

from .ledger import Ledger

log = logging.getLogger("engram.hindsight")

MAX_BACKOFF = timedelta(minutes=30)
PURGE_PROBES = 3  # recalls with a deleted document's own fact texts, to check nothing still points at it


class HindsightSyncer:
    def __init__(self, ledger: Ledger, client: HindsightClient, purge: PurgeTracker) -> None:
        self.ledger = ledger
        self.client = client
        self.purge = purge
        self.datastore = ledger.store.datastore

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
        now = self.ledger.clock.now()
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
        memory = self.ledger.get(memory_id, Memory)
        if memory is None:
            return
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
                self.purge.purged(curs, row["forget_id"], HINDSIGHT, evidence, now)

    def backlog(self) -> dict[str, int]:
        with self.datastore.get_connection() as conn:
            rows = conn.execute("SELECT state, count(*) AS n FROM engram_hindsight_sync GROUP BY state").fetchall()
        return {r["state"]: int(r["n"]) for r in rows}
