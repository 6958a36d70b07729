"""Engram's application service: every command and query any entry point may call.

Writes return only after the in-process (or remote) projectors have applied them,
so any later request already sees their effect.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import InfrastructureFactory, RecordConflictError

from engram.adapters.blind_index import BlindIndex
from engram.adapters.crypto import MasterKey
from engram.adapters.keystore import KeyStore
from engram.adapters.mapper import SealingMapper
from engram.domain.bundle import fit
from engram.domain.clock import Clock
from engram.domain.directory import Directory
from engram.domain.errors import (
    Conflict,
    DomainError,
    Forbidden,
    InvalidScope,
    MemoryForgotten,
    NotFound,
    SensitiveAckRequired,
    SourceRevoked,
)
from engram.domain.evidence import Evidence, Source
from engram.domain.hints import SemanticHints
from engram.domain.instant import check_instant
from engram.domain.memory import CONFIRMED, FORGOTTEN, NORMAL, SENSITIVE, Memory
from engram.domain.receipt import Receipt
from engram.domain.review import SENSITIVE_CONTENT, AcceptEverything, ContentPolicy, refuse_secrets
from engram.domain.rollout import ENABLED, OFF, SHADOW, EngramOff, Rollout
from engram.domain.scope import Caller, Grants, Scope
from engram.domain.text import validate_text
from engram.domain.visibility import may_act, may_use, require_may_act
from engram.projections.governance import GovernanceQueries, Standing
from engram.projections.recall import RecallQueries
from engram.projections.sealing import unseal_from_view

from .pending_writes import collector
from .views import candidate_of, candidate_of_row, memory_of, memory_of_row

PURGED_COPIES = ("event_store", "recall_view", "review_queue")


class SemanticIndexUnavailable(Exception):
    """The semantic index did not answer in time; recall falls back to SQL ranking."""


class EngramApplication(Application):
    """The write side: the event store with the sealing mapper."""

    name = "engram"

    def __init__(self, env: dict[str, str], master: MasterKey, fence: Any = frozenset()) -> None:
        self._master = master
        self._fence = fence
        super().__init__(env)

    def construct_factory(self, env: Any) -> InfrastructureFactory:
        factory = super().construct_factory(env)
        self.keys = KeyStore(factory.datastore, self._master, self._fence)  # type: ignore[attr-defined]
        return factory

    def construct_mapper(self) -> SealingMapper:
        return SealingMapper(self.construct_transcoder(), self.keys)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _row_scope(row: dict[str, Any]) -> Scope:
    return Scope(row["company"], row["person"], row["visibility"], row["team"], row["source"].get("id"))


def _parse_uuid(memory_id: str) -> UUID:
    try:
        return UUID(memory_id)
    except (ValueError, TypeError, AttributeError):
        raise NotFound("no such memory") from None


class MemoryService:
    def __init__(
        self,
        app: EngramApplication,
        projector: Any,  # ProjectorRunner in-process, PartitionSettle when workers project from Kafka
        queries: RecallQueries,
        index: BlindIndex,
        clock: Clock,
        *,
        max_text_bytes: int = 8192,
        candidate_ttl: timedelta = timedelta(days=30),
        governance: GovernanceQueries,
        modes: Rollout | None = None,
        policy: ContentPolicy | None = None,
        tombstones: Any = None,
    ) -> None:
        self.app = app
        self.keys = app.keys
        self.projector = projector
        self.queries = queries
        self.index = index
        self.clock = clock
        self.max_text_bytes = max_text_bytes
        self.candidate_ttl = candidate_ttl
        self.governance = governance
        self.modes = modes or Rollout()
        self.policy: ContentPolicy = policy or AcceptEverything()
        self.tombstones = tombstones  # a Fence: records where a database restore cannot undo it
        self.purged_copies: tuple[str, ...] = PURGED_COPIES  # plus "hindsight" when it is configured
        self.semantic: Any = None  # a SemanticIndex when Hindsight is configured

    # -- plumbing ------------------------------------------------------------

    def standing(self, caller: Caller) -> Standing:
        return self.governance.standing(caller.company, caller.person)

    def grants(self, caller: Caller, standing: Standing | None = None) -> Grants:
        """The directory as it is right now decides; nothing cached across requests."""
        standing = standing or self.standing(caller)
        return Directory.from_document(standing.directory).grants(caller, standing.revoked_sources)

    def use_blocked(self, caller: Caller, standing: Standing | None = None) -> bool:
        """A bot gets nothing while the company is in shadow mode or the person paused use."""
        if caller.role != "bot":
            return False
        if self.modes.mode(caller.company) != ENABLED:
            return True
        return (standing or self.standing(caller)).use_paused

    def require_may_act(self, caller: Caller, standing: Standing | None = None) -> Standing:
        """Every write and control: a bot only while registered in the directory (403 otherwise)."""
        standing = standing or self.standing(caller)
        if caller.role == "bot":
            require_may_act(caller, self.grants(caller, standing))
        return standing

    def may_read(self, caller: Caller, standing: Standing | None = None) -> bool:
        """Reads of a removed bot find nothing."""
        return caller.role != "bot" or may_act(caller, self.grants(caller, standing))

    def admit(self, caller: Caller) -> None:
        """Refuse every call of a company whose rollout mode is off (recall answers empty instead)."""
        if self.modes.mode(caller.company) == OFF:
            raise EngramOff("Engram is off for this company")

    def tombstone(self, kind: str, aggregate_id: Any, company: str, **fields: Any) -> None:
        """Content-free: ids and times only."""
        if self.tombstones is not None:
            self.tombstones.record({"kind": kind, "aggregate_id": str(aggregate_id), "company": company,
                                    "at": self.clock.now().isoformat(), **fields})

    def save(self, *aggregates: Any) -> None:
        try:
            recordings = self.app.save(*aggregates)
        except RecordConflictError:
            raise Conflict("the memory changed while this request was handled") from None
        pending = collector()
        if pending is not None and getattr(self.projector, "defers", False):
            pending.add(recordings)  # the HTTP layer waits for visibility without holding this thread
        else:
            self.projector.settle_recordings(recordings)

    def _load(self, caller: Caller, memory_id: str) -> Memory:
        """Load a memory the caller may use; anything else is indistinguishable from absent."""
        try:
            memory = self.app.repository.get(_parse_uuid(memory_id))
        except AggregateNotFoundError:
            raise NotFound("no such memory") from None
        standing = self.standing(caller)
        if not isinstance(memory, Memory) or not may_use(caller, memory.scope, self.grants(caller, standing)) \
                or self.use_blocked(caller, standing):
            raise NotFound("no such memory")
        return memory

    def _refuse_administrative(self, caller: Caller) -> None:
        if caller.is_administrative:
            raise Forbidden("administrative tokens cannot hold or change memories")

    def _text(self, text: str) -> str:
        return validate_text(text, self.max_text_bytes)

    # -- commands ------------------------------------------------------------

    def remember(
        self,
        caller: Caller,
        *,
        text: str,
        source: dict[str, Any],
        occurred_at: datetime | None,
        visibility: str,
        team: str | None,
        valid_from: datetime | None,
        valid_to: datetime | None,
    ) -> dict[str, Any]:
        """Confirm exactly the stated text; a sensitive one becomes a candidate, a secret is refused."""
        self._refuse_administrative(caller)
        standing = self.require_may_act(caller)
        self._text(text)
        verdict = refuse_secrets(self.policy, text)
        now = self.clock.now()
        origin = Source.of(source)
        if origin.id in standing.revoked_sources:
            raise SourceRevoked("this source was revoked; nothing from it is remembered")
        if visibility == "restricted":
            self._check_restricted(caller, team, origin.id, standing)
        evidence = [Evidence.quoted(text, text, origin, occurred_at or now).as_dict()]
        if verdict == SENSITIVE_CONTENT:
            candidate = self._create_memory(
                Memory.propose, caller, source=origin.as_dict(), visibility=visibility, team=team, text=text,
                evidence=evidence, review=SENSITIVE, expires_at=now + self.candidate_ttl,
                valid_from=valid_from, valid_to=valid_to, actor=caller.bot or caller.person, at=now,
            )
            return candidate_of(candidate)
        memory = self._create_memory(
            Memory.remember, caller, source=origin.as_dict(), visibility=visibility, team=team, text=text,
            evidence=evidence, valid_from=valid_from, valid_to=valid_to, actor=caller.bot or caller.person, at=now,
        )
        return memory_of(memory)

    def _check_restricted(self, caller: Caller, team: str | None, source_id: str,
                          standing: Standing | None = None) -> None:
        """A restricted memory names a directory source, that source's team, and both must be held."""
        standing = standing or self.standing(caller)
        directory = Directory.from_document(standing.directory)
        owner = directory.team_of(source_id)
        if owner is None or owner != team:
            raise InvalidScope("a restricted memory needs a source of the directory and that source's team")
        grants = directory.grants(caller, standing.revoked_sources)
        if team not in grants.teams or source_id not in grants.sources:
            raise InvalidScope("the caller does not hold that team and source")

    def _create_memory(self, factory: Callable[..., Memory], caller: Caller, *, source: dict[str, Any],
                       visibility: str, team: str | None, **fields: Any) -> Memory:
        """Create the memory's data key before its first (sealed) event, then save."""
        scope = Scope(caller.company, caller.person, visibility, team, source.get("id"))
        fields["id"] = fields.get("id") or uuid4()
        memory = factory(scope=scope, source=source, **fields)
        self.keys.create(memory.id, caller.company)
        self.save(memory)
        return memory

    def propose(
        self,
        caller: Caller,
        *,
        text: str,
        quote: str,
        source: dict[str, Any],
        occurred_at: datetime | None,
        visibility: str = "general",
        team: str | None = None,
        review: str = NORMAL,
        id: UUID | None = None,
        receipt: str | None = None,
    ) -> dict[str, Any]:
        """A candidate, for the person to review. Learning from receipts builds on this."""
        self._refuse_administrative(caller)
        self._text(text)
        if refuse_secrets(self.policy, text, quote) == SENSITIVE_CONTENT:
            review = SENSITIVE
        now = self.clock.now()
        origin = Source.of(source)
        memory = self._create_memory(
            Memory.propose, caller, source=origin.as_dict(), visibility=visibility, team=team, text=text,
            evidence=[Evidence(quote, origin, occurred_at or now).as_dict()],
            review=review, expires_at=now + self.candidate_ttl, actor="engram", at=now, id=id, receipt=receipt,
        )
        return candidate_of(memory)

    def confirm(self, caller: Caller, memory_id: str, *, text: str | None, acknowledge_sensitive: bool) -> dict[str, Any]:
        self._refuse_administrative(caller)
        self.require_may_act(caller)
        memory = self._load(caller, memory_id)
        if text is not None:
            self._text(text)
            if refuse_secrets(self.policy, text) == SENSITIVE_CONTENT and not acknowledge_sensitive:
                raise SensitiveAckRequired("the edited text is sensitive; confirm with acknowledge_sensitive: true")
        memory.confirm(text=text, acknowledge_sensitive=acknowledge_sensitive,
                       actor=caller.bot or caller.person, at=self.clock.now())
        self.save(memory)
        return memory_of(memory)

    def reject(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        self._refuse_administrative(caller)
        self.require_may_act(caller)
        memory = self._load(caller, memory_id)
        memory.reject(actor=caller.bot or caller.person, at=self.clock.now())
        self.save(memory)
        self._shred_closed_candidate(memory, "reject")  # a rejected candidate is purged like a forgotten one
        return {"id": str(memory.id), "status": memory.status}

    def _shred_closed_candidate(self, memory: Memory, kind: str) -> None:
        """After a candidate's Rejected or Expired event is recorded: destroy its key and its
        receipt's text. Recorded first, so a confirm that wins the race keeps its key. The tombstone
        goes before the key: if it cannot be recorded the key stays, and the sweeper's repair retries."""
        self.tombstone(kind, memory.id, memory.company, person=memory.person)
        self.keys.destroy(memory.id, memory.company, self.clock.now())
        if memory.receipt:
            self.clear_receipt_payload(UUID(memory.receipt), f"candidate_{kind}")

    def correct(
        self, caller: Caller, memory_id: str, *, text: str, valid_from: datetime | None,
        valid_to: datetime | None, reason: str | None, acknowledge_sensitive: bool = False,
    ) -> dict[str, Any]:
        self._refuse_administrative(caller)
        self.require_may_act(caller)
        self._text(text)
        if reason is not None:
            validate_text(reason, self.max_text_bytes)
        if refuse_secrets(self.policy, text, reason) == SENSITIVE_CONTENT and not acknowledge_sensitive:
            raise SensitiveAckRequired("the corrected text is sensitive; send acknowledge_sensitive: true")
        memory = self._load(caller, memory_id)
        memory.correct(text=text, valid_from=valid_from, valid_to=valid_to, reason=reason,
                       actor=caller.bot or caller.person, at=self.clock.now())
        self.save(memory)
        return memory_of(memory)

    def forget(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        """Record the tombstone, destroy the key (use stops at once), then record the content-free event.

        The tombstone comes first so a forget that cannot record it changes nothing and can be retried.
        A concurrent write can win the race for the next version; the key is already gone
        then, so forget reloads and records again rather than report a conflict.
        """
        self._refuse_administrative(caller)
        self.require_may_act(caller)
        for _attempt in range(5):
            memory = self._load(caller, memory_id)
            if memory.is_forgotten:
                if memory.receipt:  # an earlier attempt may have stopped before clearing it
                    self.clear_receipt_payload(UUID(memory.receipt), "memory_forgotten")
                return {"forget_id": memory.forget_id, "status": self._forget_status(memory.forget_id)}
            now = self.clock.now()
            forget_id = "fg-" + uuid4().hex
            self.tombstone("forget", memory.id, memory.company, person=memory.person, forget_id=forget_id)
            destroyed_at = self.keys.destroy(memory.id, memory.company, now)
            memory.forget(forget_id=forget_id, key_destroyed_at=destroyed_at,
                          actor=caller.bot or caller.person, at=now)
            try:
                self.save(memory)
            except Conflict:
                continue
            if memory.receipt:
                self.clear_receipt_payload(UUID(memory.receipt), "memory_forgotten")
            self.keys.vacuum()
            return {"forget_id": forget_id, "status": "stopped_using"}
        raise Conflict("the memory kept changing; its key is destroyed, retry to record the forget")

    def clear_receipt_payload(self, receipt_id: UUID, why: str) -> bool:
        """Tombstone, destroy a receipt's key (its text in every copy), then record that it is gone."""
        try:
            receipt = self.app.repository.get(receipt_id)
        except AggregateNotFoundError:
            return False
        if not isinstance(receipt, Receipt) or receipt.cleared:
            return False
        now = self.clock.now()
        self.tombstone("receipt_cleared", receipt.id, receipt.company, why=why)
        self.keys.destroy(receipt.id, receipt.company, now)
        receipt.clear_payload(why, now)
        try:
            self.save(receipt)
        except Conflict:
            return False  # a concurrent change; the key is gone already and the next sweep records it
        return True

    def expire_due_candidates(self, limit: int = 500) -> int:
        """Expire unreviewed candidates past their time and destroy their keys. Safe to run anywhere, often."""
        now = self.clock.now()
        expired = 0
        for memory_id in self.queries.due_candidates(now, limit):
            try:
                memory = self.app.repository.get(memory_id)
            except AggregateNotFoundError:
                continue
            if not isinstance(memory, Memory) or not memory.is_due(now):
                continue
            memory.expire(at=now, key_destroyed_at=now)
            try:
                self.save(memory)
            except (Conflict, MemoryForgotten):
                continue  # confirmed, rejected or forgotten meanwhile: that decision stands
            self._shred_closed_candidate(memory, "expire")
            expired += 1
        # a crash between an Expired/Rejected event and its key destruction is finished here
        for row in self.queries.closed_candidates_with_keys(limit):
            memory = self.app.repository.get(row["memory_id"])
            self._shred_closed_candidate(memory, "expire" if memory.status == "expired" else "reject")
        if expired:
            self.keys.vacuum()
        return expired

    # -- queries -------------------------------------------------------------

    def get(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        return memory_of(self._load(caller, memory_id))

    def history(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        memory = self._load(caller, memory_id)
        events = []
        revision = 1
        for e in self.app.events.get(memory.id):
            kind = type(e).__name__
            text = None
            if isinstance(e, Memory.Created):
                text = e.text
            elif isinstance(e, Memory.Corrected):
                revision, text = e.revision, e.text
            elif isinstance(e, Memory.Confirmed) and e.edited:
                text = e.text
            entry = {"type": kind, "at": e.timestamp, "actor": e.actor, "revision": revision, "text": text}
            if isinstance(e, Memory.Corrected):
                entry.update(reason=e.reason, mode=e.mode, valid_from=e.valid_from, valid_to=e.valid_to)
            events.append(entry)
        return {"events": events}

    def _unsealed(self, row: dict[str, Any]) -> tuple[Any, list[Any]]:
        """The text and evidence of a view row, or (None, []) when its key is gone."""
        key = self.keys.unwrap_row(row["memory_id"], row.get("wrapped"))
        if key is None:
            return None, []
        text = unseal_from_view(key, row["memory_id"], "text", row.get("sealed_text"))
        return text, unseal_from_view(key, row["memory_id"], "evidence", row.get("sealed_evidence")) or []

    def list_memories(self, caller: Caller, *, q: str | None, limit: int, cursor: str | None,
                      status: str | None = None) -> dict[str, Any]:
        standing = self.standing(caller)
        if caller.is_administrative or self.use_blocked(caller, standing):
            return {"items": [], "next_cursor": None}
        statuses = [CONFIRMED] if status is None else ([status] if status != "all" else
                                                        [CONFIRMED, FORGOTTEN])
        if q:
            validate_text(q, self.max_text_bytes)
        terms = self.index.query_terms(caller.company, q) if q else None
        after = _decode_cursor(cursor) if cursor else None
        grants = self.grants(caller, standing)
        rows = self.queries.list_memories(company=caller.company, person=caller.person, statuses=statuses,
                                          terms=terms, after=after, limit=limit + 1)
        items = []
        for row in rows[:limit]:
            if not may_use(caller, _row_scope(row), grants):
                continue
            text, evidence = (None, []) if row["status"] == FORGOTTEN else self._unsealed(row)
            items.append(memory_of_row(row, text, evidence))
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = _encode_cursor(last["created_at"], str(last["memory_id"]))
        return {"items": items, "next_cursor": next_cursor}

    def candidates(self, caller: Caller) -> dict[str, Any]:
        standing = self.standing(caller)
        if caller.is_administrative or self.use_blocked(caller, standing):
            return {"items": []}
        grants = self.grants(caller, standing)
        items = []
        for row in self.queries.candidates(company=caller.company, person=caller.person):
            if not may_use(caller, _row_scope(row), grants):
                continue
            text, evidence = self._unsealed(row)
            items.append(candidate_of_row(row, text, evidence))
        return {"items": items}

    def recall(self, caller: Caller, *, query: str, as_of: datetime | None, max_bytes: int, limit: int) -> dict[str, Any]:
        validate_text(query, self.max_text_bytes, allow_empty=True)
        check_instant(as_of, "as_of")
        empty: dict[str, Any] = {"items": [], "degraded": False, "bytes": 0, "omitted": 0}
        mode = self.modes.mode(caller.company)
        if mode == OFF or (mode == SHADOW and caller.role == "bot"):
            return {**empty, "mode": mode}
        if caller.is_administrative or limit <= 0:
            return empty
        standing = self.standing(caller)
        if standing.use_paused:
            return {**empty, "paused": True}
        grants = self.grants(caller, standing)
        if caller.role == "bot" and not grants.bot_registered:
            return empty
        as_of = as_of or self.clock.now()
        filters = {"company": caller.company, "person": caller.person, "as_of": as_of,
                   "teams": sorted(grants.teams), "sources": sorted(grants.sources),
                   "revoked": sorted(grants.revoked_sources)}
        hints, degraded = self._semantic_hints(caller, standing, grants, query)
        rows: list[dict[str, Any]] = []
        if hints:
            # Hindsight only ranks: every hinted memory is re-read, re-unsealed and re-authorized here
            usable = {str(r["memory_id"]): r for r in self.queries.by_ids(ids=sorted(hints.memory_ids()), **filters)
                      if r["status"] == CONFIRMED and may_use(caller, _row_scope(r), grants)}
            scores = hints.scores(set(usable))
            for memory_id in sorted(scores, key=lambda m: -scores[m]):
                rows.append({**usable[memory_id], "score": scores[memory_id], "hinted": True})
        seen = {str(r["memory_id"]) for r in rows}
        rows += [r for r in self.queries.search(terms=self.index.query_terms(caller.company, query),
                                                limit=limit + 10, **filters) if str(r["memory_id"]) not in seen]
        items: list[dict[str, Any]] = []
        total = omitted = 0
        for row in rows:
            if len(items) + omitted >= limit:
                break
            if row["status"] != CONFIRMED or not may_use(caller, _row_scope(row), grants):
                continue
            text, evidence = self._unsealed(row)
            if text is None:
                continue
            if total >= max_bytes:
                omitted += 1  # the budget is spent: counted, never silently dropped
                continue
            text, evidence, size, truncated = fit(text, evidence, max_bytes - total)
            raw = float(row["score"] or 0.0)
            item = {
                "id": str(row["memory_id"]), "kind": "memory", "text": text, "revision": row["revision"],
                "valid_from": _iso(row["valid_from"]), "valid_to": _iso(row["valid_to"]),
                "time_uncertain": row["time_uncertain"],
                "evidence": evidence,
                "score": raw if row.get("hinted") else round(raw / (raw + 1.0), 4),
            }
            if truncated:
                item["truncated"] = True
            items.append(item)
            total += size
        return {"items": items, "degraded": degraded, "bytes": total, "omitted": omitted}

    def _semantic_hints(self, caller: Caller, standing: Standing, grants: Grants,
                        query: str) -> tuple[SemanticHints, bool]:
        """Ranking hints from the semantic index, and whether recall is degraded (an index is
        configured but was down or slower than the deadline); without an index SQL ranks, undegraded."""
        if self.semantic is None or not query.strip():
            return SemanticHints(), False
        directory = Directory.from_document(standing.directory)
        scopes = [Scope(caller.company, caller.person)]
        scopes += [Scope(caller.company, caller.person, "restricted", directory.team_of(s), s)
                   for s in sorted(grants.sources) if directory.team_of(s) in grants.teams]
        try:
            return self.semantic.hints(scopes, query), False
        except SemanticIndexUnavailable:
            return SemanticHints(), True

    def _forget_status(self, forget_id: str | None) -> str:
        if forget_id is None:
            return "stopped_using"
        _, copies = self.queries.forget(forget_id)
        purged = {c["copy"] for c in copies if c["state"] == "purged"}
        return "purge_complete" if purged >= set(self.purged_copies) else "stopped_using"

    def forget_status(self, caller: Caller, forget_id: str) -> dict[str, Any]:
        head, copies = self.queries.forget(forget_id)
        if head is None or head["company"] != caller.company or head["person"] != caller.person \
                or caller.is_administrative or not self.may_read(caller):
            raise NotFound("no such forget request")
        by_copy = {c["copy"]: c for c in copies}
        out = []
        for name in self.purged_copies:
            c = by_copy.get(name)
            out.append({
                "copy": name,
                "state": c["state"] if c else "pending",
                "evidence": c["evidence"] if c else None,
                "purged_at": c["purged_at"] if c else None,
            })
        complete = all(c["state"] == "purged" for c in out)
        return {"forget_id": forget_id, "memory_id": str(head["memory_id"]),
                "status": "purge_complete" if complete else "stopped_using", "copies": out}

    def export(self, caller: Caller) -> dict[str, Any]:
        items = []
        cursor = None
        while True:
            page = self.list_memories(caller, q=None, limit=200, cursor=cursor)
            for item in page["items"]:
                item = dict(item)
                item["history"] = self.history(caller, item["id"])["events"]
                items.append(item)
            cursor = page["next_cursor"]
            if not cursor:
                break
        return {"exported_at": self.clock.now(), "company": caller.company, "person": caller.person,
                "memories": items}


def _encode_cursor(at: datetime, memory_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([at.isoformat(), memory_id]).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        at, memory_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        UUID(memory_id)
        return datetime.fromisoformat(at), memory_id
    except Exception:  # noqa: BLE001
        raise InvalidCursor("cursor is not valid") from None


class InvalidCursor(DomainError):
    code, status, title = "invalid_cursor", 400, "Cursor is not valid"
