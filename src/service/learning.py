"""Background learning: durable receipts in, candidates with exact-quote evidence out, within budget."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from engram.adapters.budget import EXHAUSTED, PAUSED, TOO_LARGE, BudgetLedger, Limits, Refusal
from engram.adapters.extractors import Extractor, ExtractorError
from engram.contract.responses import ReceiptBatch, ReceiptState
from engram.domain.access import Access
from engram.domain.errors import Conflict, DomainError, Forbidden, MemoryForgotten, NotFound
from engram.domain.evidence import Source
from engram.domain.extraction import Proposal, accept_proposals, context_of
from engram.domain.memory_rules import NORMAL
from engram.domain.receipt import (
    DEFERRED,
    FAILED,
    QUEUED,
    STOPS_CAPTURE,
    Receipt,
    answered_state,
    candidate_uuid,
    receipt_uuid,
)
from engram.domain.scope import Caller
from engram.domain.text import validate_id, validate_text
from engram.domain.when import valid_time
from engram.projections.inbox import InboxQueries

from .ledger import Ledger
from .memories import MemoryService
from .tally import Tally

log = logging.getLogger("engram.learning")


@dataclass(frozen=True)
class LearningRules:
    limits: Limits
    lease: timedelta = timedelta(seconds=120)
    max_attempts: int = 5
    retry_after: timedelta = timedelta(seconds=30)
    paused_retry: timedelta = timedelta(minutes=5)
    payload_retention: timedelta = timedelta(days=1)
    fallback: Extractor | None = None  # learns while a model budget is spent, instead of deferring


BUDGET_FALLBACK = ":budget"  # an extractor name's suffix: it learnt instead of a model whose budget was spent


def next_utc_midnight(now: datetime) -> datetime:
    day = now.astimezone(UTC).date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _error_code(waiting_for: str | None) -> str | None:
    """Why the last try did not finish, as a code: budgets by name, anything else `extractor_error`."""
    if waiting_for is None:
        return None
    return waiting_for if waiting_for in (EXHAUSTED, PAUSED) else "extractor_error"


class LearningService:
    def __init__(self, memories: MemoryService, inbox: InboxQueries, budget: BudgetLedger,
                 extractor: Extractor, rules: LearningRules) -> None:
        self.memories = memories
        self.ledger: Ledger = memories.ledger
        self.clock = memories.clock
        self.inbox = inbox
        self.budget = budget
        self.extractor = extractor
        self.rules = rules
        self.failed_runs = Tally()  # receipt runs that raised in this process (/metrics)

    # -- intake ----------------------------------------------------------------

    def receive(self, caller: Caller, *, receipt_id: str, author: str, kind: str, text: str,
                occurred_at: datetime | None, source: dict[str, Any], visibility: str,
                team: str | None) -> ReceiptState:
        """Store a durable receipt (idempotent by receipt_id) and say whether it will be mined."""
        return self.receive_many(caller, [{
            "receipt_id": receipt_id, "author": author, "kind": kind, "text": text, "occurred_at": occurred_at,
            "source": source, "visibility": visibility, "team": team}]).items[0]

    def receive_many(self, caller: Caller, messages: list[dict[str, Any]]) -> ReceiptBatch:
        """A whole conversation at once: every message is checked first (one refused, none is stored),
        then every new one is stored in one transaction; each stays idempotent by its receipt_id."""
        self.ledger.admit(caller)
        if caller.is_administrative:
            raise Forbidden("administrative tokens do not send messages")
        access = self.ledger.access(caller)
        access.require_may_act()
        for m in messages:
            validate_text(m["text"], self.memories.max_text_bytes, allow_empty=True)
            validate_id(m["receipt_id"], "receipt_id")
            if m["visibility"] == "restricted":
                access.require_restricted_scope(m["team"], Source.of(m["source"]).id)  # its candidates' scope
        rids = [receipt_uuid(caller.company, caller.person, m["receipt_id"]) for m in messages]
        known: dict[UUID, Receipt] = self.ledger.get_many(list(dict.fromkeys(rids)), Receipt)
        fresh = [m for rid, m in zip(rids, messages, strict=True) if rid not in known]
        stopped = self._stopped(caller, fresh)  # the chats of the batch where capture was stopped: one query
        new: dict[UUID, dict[str, Any]] = {}
        for rid, m in zip(rids, messages, strict=True):
            if rid not in known:  # (the same receipt twice in one batch is made once)
                known[rid] = self._receipt(caller, access, m, stopped)
                new[rid] = m
        # Receipts are eventually visible (API.md): the request returns after the commit, except when one
        # stops capture, which the next request's `_stopped` must find in the views (ADR 0063).
        visible = any(m["kind"] in STOPS_CAPTURE for m in new.values())
        if new:  # every receipt has a key: its source is sealed even without its text (ADR 0019)
            try:
                self.ledger.create(*(known[rid] for rid in new), company=caller.company, visible=visible)
            except Conflict:  # some arrived at the same time through another request: keep each once
                for rid, m in new.items():  # the failed save took their events and keys with it: again, one by one
                    stored = self._get(rid)
                    if stored is None:
                        known[rid] = self._receipt(caller, access, m, stopped)
                        try:
                            self.ledger.create(known[rid], company=caller.company, visible=visible)
                            continue
                        except Conflict:
                            stored = self._get(rid)
                    known[rid] = stored or known[rid]  # the other request's
        return ReceiptBatch(items=[ReceiptState.model_validate(self.receipt_view(known[rid])) for rid in rids])

    def _stopped(self, caller: Caller, messages: list[dict[str, Any]]) -> set[str]:
        """The ids of these messages' chats in which the person stopped capture (the views know them
        only blinded, ADR 0019: each chat's id is blinded once)."""
        blinds = {self.memories.index.source(caller.company, chat): chat
                  for chat in {Source.of(m["source"]).id for m in messages}}
        return {blinds[b] for b in self.inbox.captures_stopped(caller.company, caller.person, blinds)}

    def _receipt(self, caller: Caller, access: Access, m: dict[str, Any], stopped: set[str]) -> Receipt:
        """A new receipt, its text kept only when it will be mined (else the reason it is ignored);
        `stopped`: `_stopped` of its batch."""
        origin = Source.of(m["source"])
        text = m["text"]
        reason = None
        if m["kind"] in STOPS_CAPTURE:
            reason = "capture_stopped"
        elif origin.id in stopped:
            reason = "capture_stopped"
        elif m["author"] != "user":
            reason = "not_user_text"
        elif access.learning_paused:
            reason = "learning_paused"
        elif origin.id in access.revoked_sources:
            reason = "source_revoked"
        elif self.memories.policy.is_secret(text):
            reason = "secret_refused"
        elif not text.strip():
            reason = "empty"
        return Receipt.receive(
            company=caller.company, person=caller.person, receipt_id=m["receipt_id"], author=m["author"],
            kind=m["kind"], text=text if reason is None else None, occurred_at=m["occurred_at"],
            source=origin.as_dict(), visibility=m["visibility"], team=m["team"], ignored_because=reason,
            at=self.clock.now(),
        )

    def _get(self, rid: UUID) -> Receipt | None:
        return self.ledger.get(rid, Receipt)

    @staticmethod
    def receipt_view(r: Receipt) -> dict[str, Any]:
        """A receipt as its sender sees it: state `queued`, `done`, `ignored` or `failed` (and why)."""
        view: dict[str, Any] = {"receipt_id": r.receipt_id, "state": answered_state(r.state)}
        if r.reason:
            view["reason"] = r.reason
        if r.extractor:
            view["extractor"] = r.extractor.removesuffix(BUDGET_FALLBACK)  # `rules` or `llm`
        if r.extractor and r.extractor.endswith(BUDGET_FALLBACK):
            view["reason"] = "budget"  # the rules learnt from it while the model's budget was spent
        if r.candidate_ids:
            view["candidate_ids"] = r.candidate_ids
        return view

    def status(self, caller: Caller, receipt_id: str) -> ReceiptState:
        """Its state, the tries so far (0 before the first) and the last one's error as a code (never text)."""
        access = self.ledger.access(caller)
        r = self._get(receipt_uuid(caller.company, caller.person, receipt_id))
        if r is None or caller.is_administrative or not access.may_read:
            raise NotFound("no such receipt")
        attempts, waiting_for = self.inbox.progress(r.id)
        last_error = r.reason if r.state == FAILED else _error_code(waiting_for)
        view = {**self.receipt_view(r), "attempts": attempts, "last_error": last_error,
                "candidate_ids": list(r.candidate_ids or [])}
        if r.state == QUEUED and waiting_for in (EXHAUSTED, PAUSED):  # waits for the model budget, said so
            view.update(state=DEFERRED, reason="budget")
        return ReceiptState.model_validate(view)

    # -- the worker ------------------------------------------------------------

    def work(self, limit: int = 10) -> int:
        """Claim and process up to `limit` receipts; returns how many reached an end state."""
        self.ledger.caught_up()  # receipts were saved without waiting for the views
        now = self.clock.now()
        done = 0
        for rid in self.inbox.claim(now, now + self.rules.lease, limit):
            try:
                if self.process(rid):
                    done += 1
            except Exception as e:  # noqa: BLE001 - one bad receipt must not stop the queue
                log.warning("receipt processing failed (%s); it will be retried", type(e).__name__)
                self.failed_runs.add()
                self._retry_or_fail(rid, now)
        return done

    def _retry_or_fail(self, rid: UUID, now: datetime) -> None:
        """A receipt that keeps failing ends as failed (and so has its payload cleared), never loops."""
        attempts = self.inbox.attempts(rid) + 1
        if attempts < self.rules.max_attempts:
            self.inbox.defer(rid, now + self.rules.retry_after * attempts, why="error", count_attempt=True)
            return
        receipt = self._get(rid)
        if receipt is not None and receipt.state == QUEUED:
            self._end(receipt, lambda: receipt.fail("processing_failed", now))
        else:
            self.inbox.release(rid)

    def process(self, rid: UUID) -> bool:
        receipt = self._get(rid)
        if receipt is None or receipt.state != QUEUED:
            self.inbox.release(rid)
            return False
        now = self.clock.now()
        caller = Caller(receipt.company, receipt.person, "user")
        access = self.ledger.access(caller)
        if access.learning_paused:
            return self._end(receipt, lambda: receipt.ignore("learning_paused", now))
        if (receipt.source or {}).get("id") in access.revoked_sources:
            return self._end(receipt, lambda: receipt.ignore("source_revoked", now))
        if receipt.text is None:
            return self._end(receipt, lambda: receipt.fail("payload_gone", now))
        if receipt.proposals is None and not self._extract(receipt, now):
            return False
        accepted = accept_proposals([Proposal(p["text"], p["quote"]) for p in receipt.proposals or []],
                                    receipt.text, self.memories.policy, self.memories.max_text_bytes)
        candidate_ids = [self._propose(receipt, p) for p in accepted]
        return self._end(receipt, lambda: receipt.processed(
            [c for c in candidate_ids if c], len(receipt.proposals or []), receipt.extractor or "", now))


    def _extract_free(self, receipt: Receipt, extractor: Extractor, now: datetime, *,
                      instead_of_budget: bool = False) -> bool:
        """Extraction that calls no model (the rules): never charged. `instead_of_budget`: the model's budget is
        spent and the receipt is learnt from by the rules meanwhile, which its extractor name says."""
        text = receipt.text or ""
        extraction = extractor.extract(text)
        accepted = accept_proposals(extraction.proposals, text, self.memories.policy, self.memories.max_text_bytes)
        receipt.extracted([{"text": p.text, "quote": p.quote} for p in accepted],
                          f"{extractor.name}{BUDGET_FALLBACK if instead_of_budget else ''}", extraction.model, now)
        self.ledger.save(receipt)
        return True

    def _end(self, receipt: Receipt, change: Any) -> bool:
        change()
        self.ledger.save(receipt)
        self.inbox.release(receipt.id)
        return True

    def _extract(self, receipt: Receipt, now: datetime) -> bool:
        """One metered model call (the rules are not one: free, never charged or deferred). False when the
        receipt must wait (budget) or retry (error)."""
        text = receipt.text or ""
        if not getattr(self.extractor, "calls_a_model", True):
            return self._extract_free(receipt, self.extractor, now)
        estimate = self.extractor.estimate_tokens(text)
        day = now.astimezone(UTC).date()
        reservation = self.budget.reserve(receipt.company, receipt.person, day, estimate, self.rules.limits, now)
        if isinstance(reservation, Refusal):
            if reservation.reason == TOO_LARGE:
                self._end(receipt, lambda: receipt.fail(TOO_LARGE, now))
            elif reservation.reason == EXHAUSTED and self.rules.fallback is not None:
                return self._extract_free(receipt, self.rules.fallback, now, instead_of_budget=True)
            elif reservation.reason == EXHAUSTED:
                self.inbox.defer(receipt.id, next_utc_midnight(now), why=EXHAUSTED, count_attempt=False)
            else:
                assert reservation.reason == PAUSED
                self.inbox.defer(receipt.id, now + self.rules.paused_retry, why=PAUSED, count_attempt=False)
            return False
        attempts = self.inbox.attempts(receipt.id) + 1
        try:
            extraction = self.extractor.extract(text)
        except ExtractorError as e:
            # the provider reported no usage for a failed call: nothing is charged beyond that (the call counts)
            self.budget.settle(reservation.reservation_id, 0, self.clock.now())
            self._ledger(receipt, day, attempts, reservation.tokens, None, None, 0, 0, 0, "error")
            if attempts >= self.rules.max_attempts:
                self._end(receipt, lambda: receipt.fail("extractor_failed", now))
            else:
                self.inbox.defer(receipt.id, now + self.rules.retry_after * attempts, why=str(e)[:80],
                                 count_attempt=True)
            return False
        charged = self.budget.settle(reservation.reservation_id, extraction.usage.total, self.clock.now())
        accepted = accept_proposals(extraction.proposals, text, self.memories.policy, self.memories.max_text_bytes)
        self._ledger(receipt, day, attempts, reservation.tokens, extraction.usage.prompt_tokens,
                     extraction.usage.completion_tokens, charged or reservation.tokens,
                     len(extraction.proposals), len(accepted), "ok")
        # only what passed the checks is kept: the rest never reaches storage
        receipt.extracted([{"text": p.text, "quote": p.quote} for p in accepted], self.extractor.name,
                          extraction.model, now)
        self.ledger.save(receipt)
        return True

    def _ledger(self, receipt: Receipt, day: Any, attempts: int, reserved: int, prompt: int | None,
                completion: int | None, charged: int, proposals: int, accepted: int, outcome: str) -> None:
        self.budget.record_usage(
            company=receipt.company, person=receipt.person, day=day, extractor=self.extractor.name,
            model=getattr(self.extractor, "model", self.extractor.name), attempts=attempts, tokens_reserved=reserved,
            prompt_tokens=prompt, completion_tokens=completion, tokens_charged=charged, proposals=proposals,
            accepted=accepted, outcome=outcome, at=self.clock.now(),
        )

    def _propose(self, receipt: Receipt, p: Proposal) -> str | None:
        """Create the candidate under a deterministic id; a retry finds it already there."""
        cid = candidate_uuid(receipt.id, p.quote, p.text)
        caller = Caller(receipt.company, receipt.person, "user")
        said_at = receipt.occurred_at
        if isinstance(said_at, str):
            said_at = datetime.fromisoformat(said_at)
        valid_from, valid_to = valid_time(p.text, said_at)  # "next Thursday", 下个月, against the message's time
        try:
            made = self.memories.propose(
                caller, text=p.text, quote=p.quote, source=receipt.source or {}, occurred_at=receipt.occurred_at,
                visibility=receipt.visibility, team=receipt.team, review=NORMAL, id=cid, receipt=str(receipt.id),
                context=context_of(receipt.text or "", p.quote), valid_from=valid_from, valid_to=valid_to,
                by_meaning=True,
            )
            return made.id  # its own, or the pending candidate it was folded into
        except Conflict:
            pass  # created by an earlier attempt
        except MemoryForgotten:
            return None  # forgotten since: never revived
        except DomainError:
            return None  # this proposal cannot be a candidate (scope, size); the others still can
        return str(cid)

    # -- payload retention -----------------------------------------------------

    def clear_processed_payloads(self, limit: int = 500) -> int:
        now = self.clock.now()
        cleared = 0
        for rid in self.inbox.due_for_clearing(now - self.rules.payload_retention, limit):
            if self.memories.clear_receipt_payload(rid, "retention"):
                cleared += 1
        return cleared
