"""A person's memories: the commands that change them and the reads that show them.

Writes return only after the read models have applied them (see `Ledger.save`), so any later
request already sees their effect. Who may do what is the domain's `Access`, read once per call.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import datetime, time, timedelta
from typing import Any
from uuid import UUID, uuid4

from engram.adapters.blind_index import BlindIndex
from engram.contract.responses import CandidateOut, ForgetAccepted, MemoryOut, Rejected
from engram.domain.access import Access
from engram.domain.errors import Conflict, MemoryForgotten, SensitiveAckRequired, SourceRevoked
from engram.domain.evidence import Evidence, Source
from engram.domain.memory import Memory
from engram.domain.memory_rules import CONFIRMED, NORMAL, PENDING, SENSITIVE, check_tags
from engram.domain.receipt import Receipt
from engram.domain.relation import DUPLICATE
from engram.domain.review import SENSITIVE_CONTENT, ContentPolicy, refuse_secrets
from engram.domain.scope import Caller, Scope
from engram.domain.text import validate_text
from engram.domain.when import change_day

from .heavy import HeavyReads
from .ledger import Ledger
from .links import MemoryLinks
from .memory_reads import MemoryReads, parse_uuid
from .ports import MemoryQueries, PurgeReports
from .relations import Relations
from .views import (
    candidate_of,
    memory_of,
)


class MemoryService(MemoryReads):
    """The commands: remember, propose, confirm, reject, correct, forget; and the sweeps that close
    candidates and clear receipts. The reads come from `MemoryReads`."""

    def __init__(self, ledger: Ledger, queries: MemoryQueries, index: BlindIndex, purge: PurgeReports, *,
                 policy: ContentPolicy, remember_key: Callable[[str], bytes], max_text_bytes: int = 8192,
                 candidate_ttl: timedelta = timedelta(days=30), links: MemoryLinks | None = None,
                 relations: Relations | None = None, heavy: HeavyReads | None = None) -> None:
        """`policy` decides what is sensitive or secret; `remember_key(company)` keys the fingerprints
        that recognise a repeated remember (the derivation root's)."""
        self.ledger = ledger
        self.keys = ledger.keys
        self.clock = ledger.clock
        self.queries = queries
        self.index = index
        self.purge = purge
        self.policy = policy
        self.max_text_bytes = max_text_bytes
        self.candidate_ttl = candidate_ttl
        self.remember_key = remember_key
        self.links = links
        self.relations = relations  # duplicates folded, updates offered (ADR 0041); None: every text is new
        self.heavy = heavy  # exports share it with large recalls

    # -- plumbing ------------------------------------------------------------

    def _holder(self, caller: Caller) -> Access:
        """Commands: a person or their registered bot, of a company not off; never an administrative token."""
        Access(caller).require_holder()
        access = self.ledger.access(caller)
        access.admit()
        access.require_may_act()
        return access

    def _text(self, text: str) -> str:
        return validate_text(text, self.max_text_bytes)

    # -- commands ------------------------------------------------------------

    def remembered_id(self, caller: Caller, source: dict[str, Any], text: str) -> UUID:
        """The id the same person's same text from the same message (kind, id, message_id) always gets:
        keyed, so it reveals no text."""
        origin = Source.of(source)
        name = json.dumps([caller.person, origin.kind, origin.id, origin.message_id, text])
        digest = hmac.new(self.remember_key(caller.company), name.encode(), hashlib.sha256).digest()
        return UUID(bytes=digest[:16], version=4)

    def remember(self, caller: Caller, *, text: str, source: dict[str, Any], occurred_at: datetime | None,
                 visibility: str, team: str | None, valid_from: datetime | None,
                 valid_to: datetime | None, id: UUID | None = None, actor: str | None = None,
                 tags: list[str] | None = None) -> MemoryOut | CandidateOut:
        """Confirm exactly the stated text; a sensitive one becomes a candidate, a secret is refused.
        The same text from the same message again stores nothing: the answer is the first memory, with
        `existing` set. `id` and `actor` are for imports (their own keyed id; the history says
        it was imported)."""
        access = self._holder(caller)
        self._text(text)
        tags = check_tags(tags)
        imported = id is not None
        if id is None:
            id = self.remembered_id(caller, source, text)
            first = self._first(access, id)
            if first is not None:
                return first
        verdict = refuse_secrets(self.policy, text)
        now = self.clock.now()
        origin = Source.of(source)
        if origin.id in access.revoked_sources:
            raise SourceRevoked("this source was revoked; nothing from it is remembered")
        if visibility == "restricted":
            access.require_restricted_scope(team, origin.id)
        evidence = [Evidence.quoted(text, text, origin, occurred_at or now).as_dict()]
        actor = actor or caller.bot or caller.person
        if verdict != SENSITIVE_CONTENT and self.relations is not None and not imported:
            repeated = self._repeated(access, Scope(caller.company, caller.person, visibility, team, origin.id),
                                      text, evidence, actor)
            if repeated is not None:
                return repeated
        try:
            if verdict == SENSITIVE_CONTENT:
                candidate = self._create(Memory.propose, caller, source=origin.as_dict(), visibility=visibility,
                                         team=team, text=text, evidence=evidence, review=SENSITIVE,
                                         expires_at=now + self.candidate_ttl, valid_from=valid_from,
                                         valid_to=valid_to, actor=actor, at=now, id=id, tags=tags)
                return candidate_of(candidate)
            memory = self._create(Memory.remember, caller, source=origin.as_dict(), visibility=visibility, team=team,
                                  text=text, evidence=evidence, valid_from=valid_from, valid_to=valid_to, actor=actor,
                                  at=now, id=id, tags=tags)
        except (Conflict, MemoryForgotten):  # the same request, concurrently (or a forgotten id): the first stands
            first = self._first(access, id)
            if first is None:
                raise
            return first
        return memory_of(memory)

    def _repeated(self, access: Access, scope: Scope, text: str, evidence: list[dict[str, Any]],
                  actor: str) -> MemoryOut | None:
        """A remember of what a confirmed memory in the same scope already says: that memory, its
        evidence extended with this quote, marked `existing`; None when it says something new."""
        assert self.relations is not None
        related = self.relations.confirmed(access, scope, text)
        if related is None or related["kind"] != DUPLICATE:
            return None
        memory = self._gather(UUID(related["memory_id"]), CONFIRMED, evidence, receipt=None, actor=actor)
        return None if memory is None else memory_of(memory, existing=True)

    def _gather(self, memory_id: UUID, status: str, evidence: list[dict[str, Any]], *, receipt: str | None,
                actor: str) -> Memory | None:
        """The memory `memory_id` with these quotes added to its evidence, while it has `status`; None
        when it no longer has (closed, forgotten, or it kept changing). A lost race is judged again on
        what the memory is now."""
        for _attempt in range(3):
            memory = self.ledger.get(memory_id, Memory)
            if memory is None or memory.status != status:
                return None
            try:
                if memory.add_evidence(evidence, receipt=receipt, actor=actor, at=self.clock.now()):
                    self.ledger.save(memory)
            except Conflict:
                continue
            except MemoryForgotten:
                return None
            return memory
        return None

    def _first(self, access: Access, memory_id: UUID) -> MemoryOut | CandidateOut | None:
        """The memory a repeated remember stored the first time (a candidate if it was held for
        review, or forgotten since), marked `existing`; None when there is none."""
        memory = self.ledger.get(memory_id, Memory)
        if memory is None or memory.company != access.caller.company or memory.person != access.caller.person:
            return None
        return candidate_of(memory, existing=True) if memory.status == PENDING else memory_of(memory, existing=True)

    def _create(self, factory: Callable[..., Memory], caller: Caller, *, source: dict[str, Any],
                visibility: str, team: str | None, **fields: Any) -> Memory:
        """Save a new memory with its data key (in one transaction)."""
        scope = Scope(caller.company, caller.person, visibility, team, source.get("id"))
        fields["id"] = fields.get("id") or uuid4()
        memory = factory(scope=scope, source=source, **fields)
        self.ledger.create(memory, company=caller.company)
        return memory

    def propose(self, caller: Caller, *, text: str, quote: str, source: dict[str, Any],
                occurred_at: datetime | None, visibility: str = "general", team: str | None = None,
                review: str = NORMAL, id: UUID | None = None, receipt: str | None = None,
                valid_from: datetime | None = None, valid_to: datetime | None = None,
                actor: str = "engram", context: str | None = None, by_meaning: bool = False) -> CandidateOut:
        """A candidate, for the person to review. Learning from receipts and imports build on this
        (`by_meaning`: its relation to confirmed memories is judged by meaning too, learning's choice).
        One that says what a pending candidate already says is folded into it (its quote joins that
        one's evidence); one that repeats or changes a confirmed memory carries that `relation`."""
        Access(caller).require_holder()
        self._text(text)
        if refuse_secrets(self.policy, text, quote) == SENSITIVE_CONTENT:
            review = SENSITIVE
        now = self.clock.now()
        origin = Source.of(source)
        evidence = [Evidence(quote, origin, occurred_at or now).as_dict()]
        relation = None
        if self.relations is not None and (id is None or self.ledger.get(id, Memory) is None):
            access = self.ledger.access(caller)
            scope = Scope(caller.company, caller.person, visibility, team, origin.id)
            twin = self.relations.pending_twin(access, scope, text)
            # the same thing said again while its first candidate waits: one candidate, every quote its
            # evidence; when that one was closed meanwhile, this one stands alone
            folded = self._gather(twin, PENDING, evidence, receipt=receipt, actor=actor) if twin else None
            if folded is not None:
                return candidate_of(folded)
            relation = self.relations.confirmed(access, scope, text, by_meaning=by_meaning)
        memory = self._create(
            Memory.propose, caller, source=origin.as_dict(), visibility=visibility, team=team, text=text,
            evidence=evidence, review=review, expires_at=now + self.candidate_ttl, actor=actor, at=now, id=id,
            receipt=receipt, valid_from=valid_from, valid_to=valid_to, relation=relation, context=context,
        )
        return candidate_of(memory)

    def confirm(self, caller: Caller, memory_id: str, *, text: str | None, acknowledge_sensitive: bool) -> MemoryOut:
        Access(caller).require_reviewer()
        access = self._holder(caller)
        memory = self._load(access, memory_id)
        if text is not None:
            self._text(text)
            if refuse_secrets(self.policy, text) == SENSITIVE_CONTENT and not acknowledge_sensitive:
                raise SensitiveAckRequired("the edited text is sensitive; confirm with acknowledge_sensitive: true")
        target = self._related_target(access, memory)
        if target is not None:
            return self._confirm_into(memory, target, text=text, acknowledge_sensitive=acknowledge_sensitive,
                                      actor=caller.bot or caller.person)
        memory.confirm(text=text, acknowledge_sensitive=acknowledge_sensitive,
                       actor=caller.bot or caller.person, at=self.clock.now())
        self.ledger.save(memory)
        return memory_of(memory)

    def _related_target(self, access: Access, candidate: Memory) -> Memory | None:
        """The confirmed memory a pending candidate repeats or updates, while it still is one the person
        may use; None otherwise (then confirming makes a memory of its own)."""
        relation = getattr(candidate, "relation", None)
        if candidate.status != PENDING or not relation:
            return None
        target = self.ledger.get(parse_uuid(relation["memory_id"]), Memory)
        if target is None or target.status != CONFIRMED or not access.may_use(target.scope):
            return None
        return target

    def _confirm_into(self, candidate: Memory, target: Memory, *, text: str | None, acknowledge_sensitive: bool,
                      actor: str) -> MemoryOut:
        """Confirming a duplicate extends the memory's evidence; confirming an update corrects it (its
        text and evidence, valid from when the message says the change happened, else from when it was
        said). Either way the candidate ends, purged like a rejected one, in the same transaction."""
        now = self.clock.now()
        quotes = list(candidate.evidence or [])
        candidate.merge_into(target, acknowledge_sensitive=acknowledge_sensitive, actor=actor, at=now)
        if candidate.relation and candidate.relation["kind"] == DUPLICATE and text is None:
            target.add_evidence(quotes, receipt=None, actor=actor, at=now)
        else:
            new_text = text if text is not None else candidate.current["text"]
            target.correct(text=new_text, valid_from=self._changed_at(quotes, new_text), valid_to=None, reason=None,
                           actor=actor, at=now, evidence=quotes)
        self._save_closing(candidate, "reject", also=[target])
        return memory_of(target)

    @staticmethod
    def _changed_at(quotes: list[dict[str, Any]], text: str) -> datetime | None:
        """When an update took effect: the day its message names ("last month": its first day), read
        against when it was said; else when it was said."""
        said = next((q for q in quotes if q.get("occurred_at") is not None), None)
        if said is None:
            return None
        at = said["occurred_at"]
        if isinstance(at, str):
            at = datetime.fromisoformat(at)
        day = change_day(f"{said.get('quote') or ''} {text}", at.date())
        return datetime.combine(day, time(), at.tzinfo) if day is not None else at

    def reject(self, caller: Caller, memory_id: str) -> Rejected:
        Access(caller).require_reviewer()
        memory = self._load(self._holder(caller), memory_id)
        memory.reject(actor=caller.bot or caller.person, at=self.clock.now())
        self._save_closing(memory, "reject")  # a rejected candidate is purged like a forgotten one
        return Rejected(id=str(memory.id), status=memory.status, purge_id=memory.purge_id)

    def _save_closing(self, memory: Memory, kind: str, also: list[Memory] | None = None, **fields: Any) -> None:
        """Save a memory's closing event (forgotten, rejected, expired) together with its tombstone,
        its key's destruction and, for each receipt its quotes came from, the clearing of that receipt's
        text: one transaction, so the memory is either still whole or gone in every copy we hold.
        `also`: memories changed with it (the one a candidate was folded into)."""
        shreds = [self.ledger.shred(kind, memory.id, memory.company, person=memory.person, **fields)]
        why = "memory_forgotten" if kind == "forget" else f"candidate_{kind}"
        receipts = []
        for rid in memory.receipts:
            receipt = self.ledger.get(UUID(rid), Receipt)
            if receipt is not None and not receipt.cleared:
                receipt.clear_payload(why, self.clock.now())
                shreds.append(self.ledger.shred("receipt_cleared", receipt.id, receipt.company, why=why))
                receipts.append(receipt)
        # the payloads are cleared before the forget
        self.ledger.save(*receipts, memory, *(also or []), shreds=shreds)

    def _shred_closed_candidate(self, memory: Memory, kind: str) -> None:
        """Finish a candidate closed before its key was destroyed in the same transaction (databases
        from before that, or a restored one): tombstone and key, then its receipt's text."""
        self.ledger.save(shreds=[self.ledger.shred(kind, memory.id, memory.company, person=memory.person)])
        if memory.receipt:
            self.clear_receipt_payload(UUID(memory.receipt), f"candidate_{kind}")

    def correct(self, caller: Caller, memory_id: str, *, text: str, valid_from: datetime | None,
                valid_to: datetime | None, reason: str | None, acknowledge_sensitive: bool = False,
                source: dict[str, Any] | None = None) -> MemoryOut:
        """A new revision whose evidence is the correction itself: its own source when given, else
        `{"kind": "correction", "id": <the actor, person or bot>}` as API.md names it."""
        access = self._holder(caller)
        origin = Source.of(source) if source else Source("correction", caller.bot or caller.person)
        if origin.id in access.revoked_sources:
            raise SourceRevoked("this source was revoked; nothing from it is remembered")
        self._text(text)
        if reason is not None:
            validate_text(reason, self.max_text_bytes)
        if refuse_secrets(self.policy, text, reason) == SENSITIVE_CONTENT and not acknowledge_sensitive:
            raise SensitiveAckRequired("the corrected text is sensitive; send acknowledge_sensitive: true")
        memory = self._load(access, memory_id)
        now = self.clock.now()
        memory.correct(text=text, valid_from=valid_from, valid_to=valid_to, reason=reason,
                       actor=caller.bot or caller.person, at=now,
                       evidence=[Evidence.quoted(text, text, origin, now).as_dict()])
        self.ledger.save(memory)
        return memory_of(memory)

    def forget(self, caller: Caller, memory_id: str) -> ForgetAccepted:
        """Stop using the memory at once: its Forgotten event, its tombstone and its key's destruction
        (and its receipt's text) commit in one transaction; the copies are purged from there.

        A concurrent write can win the race for the next version: then nothing was written, and
        forget reloads and tries again rather than report a conflict.
        """
        access = self._holder(caller)
        return self.forget_loaded(lambda: self._load(access, memory_id), actor=caller.bot or caller.person)

    def forget_loaded(self, load: Callable[[], Memory], *, actor: str) -> ForgetAccepted:
        """The forget itself, of the memory `load` returns once the caller's right to it is checked
        (`load` raises otherwise, and runs again on a retry). Bulk and account forgets come here too."""
        for _attempt in range(5):
            memory = load()
            if memory.is_forgotten:
                if memory.receipt:  # forgotten before receipts were cleared in the same transaction
                    self.clear_receipt_payload(UUID(memory.receipt), "memory_forgotten")
                assert memory.forget_id is not None  # set by the Forgotten event
                return ForgetAccepted(forget_id=memory.forget_id, status=self.purge.status(memory.forget_id))
            now = self.clock.now()
            forget_id = "fg-" + uuid4().hex
            memory.forget(forget_id=forget_id, key_destroyed_at=now, actor=actor, at=now)
            try:
                self._save_closing(memory, "forget", forget_id=forget_id)
            except Conflict:
                continue
            self.keys.vacuum()
            return ForgetAccepted(forget_id=forget_id, status="stopped_using")
        raise Conflict("the memory kept changing; nothing was forgotten, retry")

    def clear_receipt_payload(self, receipt_id: UUID, why: str) -> bool:
        """Record that a receipt's text is gone: its event, tombstone and key destruction together."""
        receipt = self.ledger.get(receipt_id, Receipt)
        if receipt is None or receipt.cleared:
            return False
        receipt.clear_payload(why, self.clock.now())
        try:
            self.ledger.save(receipt, shreds=[self.ledger.shred("receipt_cleared", receipt.id, receipt.company,
                                                                why=why)])
        except Conflict:
            return False  # a concurrent change; the next sweep clears it
        return True

    def expire_due_candidates(self, limit: int = 500) -> int:
        """Expire unreviewed candidates past their time and destroy their keys. Safe to run anywhere, often."""
        now = self.clock.now()
        expired = 0
        for memory_id in self.queries.due_candidates(now, limit):
            memory = self.ledger.get(memory_id, Memory)
            if memory is None or not memory.is_due(now):
                continue
            memory.expire(at=now, key_destroyed_at=now)
            try:
                self._save_closing(memory, "expire")
            except (Conflict, MemoryForgotten):
                continue  # confirmed, rejected or forgotten meanwhile: that decision stands
            expired += 1
        # candidates closed before their key was destroyed with their event (older databases) finish here
        for row in self.queries.closed_candidates_with_keys(limit):
            closed = self.ledger.get(row["memory_id"], Memory)
            if closed is not None:
                self._shred_closed_candidate(closed, "expire" if closed.status == "expired" else "reject")
        if expired:
            self.keys.vacuum()
        return expired
