"""Keep Hindsight in step with the event store: retain, replace, delete, with retries and evidence.

Work on one memory is ordered (ADR 0018):
- one owner at a time: a syncer leases the memory in `engram_hindsight_leases` (not in the wish
  row, so a new wish never frees it; `hindsight_wishes.SyncWishes`), renews the lease before every
  request that changes Hindsight, and the lease outlasts the client's bounded request time;
- a wish carries the generation of the event that made it: a syncer that finishes an older one
  changes nothing and leaves the newer wish pending for the next claim;
- deletes are claimed before retains, one row at a time, so a delete never waits behind a queue
  of failing retains;
- a retain that ended without an answer (timeout, 5xx, a crash) may still land: until that doubt
  has passed, a delete is done at once but checked again afterwards before the purge is reported,
  and a retain is repeated afterwards (a late older text must not stay);
- the audit re-reads deleted documents (a restored Hindsight database brings them back) and has
  them deleted again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from engram.adapters.hindsight import (
    HindsightClient,
    HindsightDatabase,
    HindsightRefused,
    HindsightUnavailable,
    bank_for,
)
from engram.domain.memory import Memory
from engram.domain.memory_rules import CONFIRMED
from engram.domain.scope import GENERAL
from engram.projections.purge import HINDSIGHT, PurgeTracker

from .hindsight_wishes import RETAIN_DOUBT, UNREACHABLE, LeaseLost, SyncWishes
from .ledger import Ledger

log = logging.getLogger("engram.hindsight")

PURGE_PROBES = 3  # recalls with a deleted document's own fact texts, to check nothing still points at it
MIN_LEASE = timedelta(minutes=5)  # and at least ten of the client's request timeouts
AUDIT_BATCH = 100  # deleted documents the periodic audit re-reads per run
OUTAGE_PROBE_SECONDS = 5.0  # while wishes wait out an outage's backoff, how often Hindsight's health is asked

NOT_VERIFIED = ("Hindsight's own PostgreSQL may still hold the text in dead rows, planner statistics and WAL "
                "until its autovacuum, analyze and checkpoints have run; Engram has no access to that database "
                "(ENGRAM_HINDSIGHT_DATABASE_URL) and cannot verify it")


@dataclass
class _Deleted:
    """A delete confirmed in Hindsight, waiting for the database vacuum before it is reported."""

    row: dict[str, Any]
    evidence: str
    deleted_at: datetime
    report: bool  # a forget whose hindsight copy has not been reported with this delete yet


class HindsightSyncer:
    def __init__(self, ledger: Ledger, client: HindsightClient, purge: PurgeTracker,
                 database: HindsightDatabase | None = None) -> None:
        self.ledger = ledger
        self.client = client
        self.purge = purge
        self.database = database
        self.datastore = ledger.store.datastore
        self.wishes = SyncWishes(self.datastore, purge, now=self._now, lease=lambda: self.lease)
        self.outage_probe_seconds = OUTAGE_PROBE_SECONDS
        self._next_probe = 0.0

    @property
    def lease(self) -> timedelta:
        return max(MIN_LEASE, timedelta(seconds=10 * float(getattr(self.client, "timeout", 30.0))))

    def _now(self) -> datetime:
        return self.ledger.clock.now()

    # -- the loop -----------------------------------------------------------------

    def sync(self, limit: int = 50) -> int:
        """Work through up to `limit` wishes, one claim at a time; returns how many were completed."""
        done = 0
        deleted: list[_Deleted] = []
        since = time.monotonic()
        self._wake_after_outage()
        try:
            for _ in range(limit):
                row = self.wishes.claim()
                if row is None:
                    break
                if not deleted:
                    since = time.monotonic()
                done += self._work(row, deleted)
                if deleted and time.monotonic() - since > self.lease.total_seconds() / 2:
                    done += self._report(deleted)  # while their leases still hold
                    deleted = []
        finally:
            done += self._report(deleted)
        return done

    def _wake_after_outage(self) -> None:
        """Wishes that failed only because Hindsight gave no answer at all back off like any other (up
        to 30 minutes), but once Hindsight answers its health check again they are all due at once: a
        purge waiting on its Hindsight copy should not wait out a backoff earned while Hindsight was
        down. Asked at most every OUTAGE_PROBE_SECONDS, and only while such wishes wait."""
        if time.monotonic() < self._next_probe:
            return
        self._next_probe = time.monotonic() + self.outage_probe_seconds
        waiting = "state = 'pending' AND next_attempt_at > %s AND starts_with(last_error, %s)"
        with self.datastore.get_connection() as conn:
            if conn.execute(f"SELECT 1 FROM engram_hindsight_sync WHERE {waiting} LIMIT 1",
                            (self._now(), UNREACHABLE)).fetchone() is None:
                return
        if not self.client.healthy():
            return
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(f"UPDATE engram_hindsight_sync SET next_attempt_at = NULL WHERE {waiting}",
                         (self._now(), UNREACHABLE))
            woken = curs.rowcount
        log.info("hindsight answers again: %d waiting sync wishes are due now", woken)

    def _work(self, row: dict[str, Any], deleted: list[_Deleted]) -> int:
        try:
            outcome = self._sync_one(row)
        except LeaseLost:
            return 0  # the new owner finishes it
        except HindsightUnavailable as e:
            self.wishes.failed(row, e)
            return 0
        except BaseException:
            self.wishes.failed(row, None)
            raise
        if isinstance(outcome, _Deleted):
            deleted.append(outcome)
            return 0
        return outcome

    def _sync_one(self, row: dict[str, Any]) -> int | _Deleted:
        memory_id: UUID = row["memory_id"]
        memory = self.ledger.get(memory_id, Memory)
        if memory is None:  # never stored here: nothing to index
            return self.wishes.finish(row)
        # Its bank as noted at its creation: once forgotten its source (part of a restricted bank's name)
        # is shredded with its key (ADR 0019).
        bank = row.get("bank")
        if bank is None:
            if memory.scope.shredded and memory.visibility != GENERAL:
                # Every retain notes its bank first (below), so an unnoted one was never retained here.
                return self.wishes.finish(row, evidence="never retained in Hindsight: no bank was ever noted for it")
            bank = bank_for(memory.scope)
            with self.datastore.transaction(commit=True) as curs:
                curs.execute("INSERT INTO engram_hindsight_banks (memory_id, bank) VALUES (%s, %s) "
                             "ON CONFLICT DO NOTHING", (memory_id, bank))
        text = memory.current["text"]
        if row["action"] == "retain" and memory.status == CONFIRMED and text is not None:
            return self._retain(row, bank, text, memory.current["valid_from"])
        # delete (forgotten, expired, rejected), withdraw (scope lost), or a retain that no longer applies
        return self._delete(row, bank)

    def _retain(self, row: dict[str, Any], bank: str, text: str, valid_from: datetime | None) -> int:
        memory_id = row["memory_id"]
        earlier: datetime | None = row["retain_in_doubt_until"]
        # Until Hindsight answers, this retain may land at any time: say so first (a crash keeps it said).
        mine = self._now() + self.lease + RETAIN_DOUBT
        self.wishes.hold(memory_id, retain_in_doubt_until=mine if earlier is None else max(earlier, mine))
        try:
            self.client.retain(bank, str(memory_id), text, valid_from)
        except HindsightRefused:
            self.wishes.hold(memory_id, retain_in_doubt_until=earlier)  # it certainly did nothing
            raise
        self.wishes.hold(memory_id, retain_in_doubt_until=earlier)  # answered: this one can no longer land later
        if earlier is not None and earlier > self._now():
            # an older retain may still land with older text: retain again once it no longer can
            return self.wishes.later(row, earlier, "retained; an earlier retain may still land")
        return self.wishes.finish(row)

    def _delete(self, row: dict[str, Any], bank: str) -> int | _Deleted:
        memory_id, document_id = row["memory_id"], str(row["memory_id"])
        present = self.client.exists(bank, document_id)
        facts, probes = self._delete_and_confirm(bank, document_id, lambda: self.wishes.hold(memory_id))
        now = self._now()
        back = (present or bool(facts)) and row["deleted_at"] is not None
        if present or facts or row["deleted_at"] is None:
            deleted_at, facts_before = now, len(facts)
            self.wishes.hold(memory_id, deleted_at=deleted_at, facts_before=facts_before)
        else:  # gone already: the delete that made it so is the one on record
            deleted_at, facts_before = row["deleted_at"], row["facts_before"] or 0
        doubt: datetime | None = row["retain_in_doubt_until"]
        if doubt is not None and doubt > now:
            return self.wishes.later(row, doubt, "deleted; a retain may still land, checking again after it")
        what = (f"deleted at {deleted_at.isoformat()} and answers 404 in its bank; {facts_before} fact(s) before, "
                f"0 after; {probes} recall probe(s) found no result referencing it")
        if back:
            evidence = (f"document {document_id} was found in its bank again after an earlier delete (a retain "
                        f"that was still running, or a restored Hindsight database), and was {what}")
        else:
            evidence = f"document {document_id} {what}"
        if doubt is not None:
            evidence += f"; checked again at {now.isoformat()}, after every retain that might still land: nothing came back"
        report = row["action"] == "delete" and bool(row["forget_id"]) and (back or not self._reported(row))
        return _Deleted(row, evidence, deleted_at, report)

    def _delete_and_confirm(self, bank: str, document_id: str,
                            hold: Callable[[], None]) -> tuple[list[tuple[str, str]], int]:
        """Delete the document (`hold` renews the lease just before), then show it is gone: the
        document answers 404, none of its facts is listed, and recalling each of its facts' own
        words returns nothing that references it (no fact of the document, no observation derived
        from one). Returns its facts before, and the number of recall probes."""
        facts = self.client.document_facts(bank, document_id)
        hold()
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
        return facts, min(len(facts), PURGE_PROBES)

    def _reported(self, row: dict[str, Any]) -> bool:
        with self.datastore.get_connection() as conn:
            found = conn.execute("SELECT 1 FROM engram_purge_copies WHERE forget_id = %s AND copy = %s "
                                 "AND state = 'purged'", (row["forget_id"], HINDSIGHT)).fetchone()
        return found is not None

    def _report(self, deleted: list[_Deleted]) -> int:
        """Vacuum Hindsight's database once for every delete of this run (when Engram may), then
        report each; a failed vacuum leaves them pending, to be deleted, checked and vacuumed again."""
        if not deleted:
            return 0
        note = NOT_VERIFIED
        if self.database is not None and any(d.report for d in deleted):
            try:
                tables = self.database.vacuum()
            except HindsightUnavailable as e:
                for d in deleted:
                    self.wishes.failed(d.row, e)
                return 0
            note = (f"Hindsight's database: VACUUM (ANALYZE) of {', '.join(tables)} at {self._now().isoformat()} "
                    "removed the deleted rows and recomputed the planner statistics; WAL written before it is "
                    "recycled after Hindsight's next checkpoints")
        return sum(self.wishes.finish(d.row, evidence=f"{d.evidence}; {note}" if d.report else None,
                                purged_at=d.deleted_at) for d in deleted)

    # -- the audit ----------------------------------------------------------------

    def audit(self, limit: int | None = AUDIT_BATCH) -> dict[str, int]:
        """Re-read the documents of forgotten, expired and rejected memories, least recently checked
        first (`limit` per run; None: all). One found again in its bank (Hindsight's database was
        restored, or a late write landed) is deleted again at once, with the same lease, checks and
        evidence as any delete; its forget's evidence says it came back."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT s.memory_id, b.bank "
                "FROM engram_hindsight_sync s JOIN engram_hindsight_banks b USING (memory_id) "
                "LEFT JOIN engram_hindsight_audits a USING (memory_id) "
                "WHERE s.action = 'delete' ORDER BY a.checked_at NULLS FIRST, s.memory_id LIMIT %s",
                (limit,)).fetchall()
        found = deleted_again = 0
        for r in rows:
            bank = r["bank"]
            document_id = str(r["memory_id"])
            back = self.client.exists(bank, document_id) or bool(self.client.document_facts(bank, document_id))
            now = self._now()
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(
                    "INSERT INTO engram_hindsight_audits (memory_id, checked_at, found_again, last_found_at) "
                    "VALUES (%(id)s, %(now)s, %(n)s, %(found)s) ON CONFLICT (memory_id) DO UPDATE SET "
                    "checked_at = EXCLUDED.checked_at, checks = engram_hindsight_audits.checks + 1, "
                    "found_again = engram_hindsight_audits.found_again + EXCLUDED.found_again, "
                    "last_found_at = coalesce(EXCLUDED.last_found_at, engram_hindsight_audits.last_found_at)",
                    {"id": r["memory_id"], "now": now, "n": int(back), "found": now if back else None},
                )
                if back:
                    curs.execute("UPDATE engram_hindsight_sync SET state = 'pending', next_attempt_at = NULL, "
                                 "attempts = 0, last_error = 'found again by the audit' WHERE memory_id = %s",
                                 (r["memory_id"],))
            if not back:
                continue
            found += 1
            row = self.wishes.claim(only=r["memory_id"])
            if row is not None:  # else another syncer holds it and deletes it
                deleted: list[_Deleted] = []
                self._work(row, deleted)
                deleted_again += self._report(deleted)
        if found:
            log.warning("hindsight audit: %d deleted document(s) found again in Hindsight", found)
        return {"checked": len(rows), "found_again": found, "deleted_again": deleted_again}

    def backlog(self, company: str | None = None) -> dict[str, int]:
        """Wishes by state (pending, done): one company's, or every company's."""
        if company is not None:
            return self.backlogs(company).get(company, {})
        with self.datastore.get_connection() as conn:
            rows = conn.execute("SELECT state, count(*) AS n FROM engram_hindsight_sync GROUP BY state").fetchall()
        return {r["state"]: int(r["n"]) for r in rows}

    def backlogs(self, company: str | None = None) -> dict[str, dict[str, int]]:
        """Wishes by company and state; `company`: that one only."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT c.company, s.state, count(*) AS n FROM engram_hindsight_sync s "
                "JOIN engram_hindsight_scopes c USING (memory_id) WHERE %(company)s::text IS NULL "
                "OR c.company = %(company)s GROUP BY c.company, s.state ORDER BY c.company, s.state",
                {"company": company}).fetchall()
        out: dict[str, dict[str, int]] = {}
        for r in rows:
            out.setdefault(r["company"], {})[r["state"]] = int(r["n"])
        return out
