"""The Memory aggregate: a candidate or confirmed memory, and its whole lifecycle.

Business checks live in the public methods; the event classes only apply state,
because their `apply` runs again on every replay. Fields named in an event's
`personal_fields` hold personal text and are sealed at rest by the event mapper;
after a forget they replay as None.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID, uuid4

from eventsourcing.domain import Aggregate

from .errors import MemoryForgotten, NotACandidate, NotAConfirmedMemory, SensitiveAckRequired
from .memory_rules import (
    CONFIRMED,
    EXPIRED,
    FORGOTTEN,
    NORMAL,
    PENDING,
    REJECTED,
    SENSITIVE,
    check_tags,
    check_valid_time,
    tags_of,
)
from .revisions import answer_at, correction_mode, revision_record
from .scope import Scope


class Memory(Aggregate):
    # Set by the events' apply methods; for mypy only, as eventsourcing turns class annotations into __init__ parameters.
    if TYPE_CHECKING:
        company: str
        person: str
        visibility: str
        team: str | None
        source: dict[str, Any] | None  # None once forgotten: sealed like the text (ADR 0019)
        evidence: list[dict[str, Any]] | None  # None once forgotten: it replays without its key
        tags: list[str]  # sealed like the text; empty once forgotten
        status: str
        review: str
        expires_at: datetime | None
        receipt: str | None
        added_receipts: list[str]  # receipts whose quotes were folded into it since (their texts clear with it)
        relation: dict[str, str] | None  # a candidate's: {"kind": "duplicate"|"update", "memory_id"} (ADR 0041)
        context: str | None  # a candidate's: the sentence or two around its quote (None once forgotten)
        merged_into: str | None  # a candidate folded into a confirmed memory when confirmed
        forget_id: str | None
        revisions: list[dict[str, Any]]

    class Event(Aggregate.Event):
        personal_fields: ClassVar[tuple[str, ...]] = ()
        actor: str

    class Created(Event, Aggregate.Created):
        """Common shape of the two ways a memory comes to be."""

        personal_fields: ClassVar[tuple[str, ...]] = ("text", "evidence", "source", "tags")
        company: str
        person: str
        visibility: str
        team: str | None
        source: dict[str, Any] | None
        text: str | None
        evidence: list[dict[str, Any]] | None
        valid_from: datetime | None
        valid_to: datetime | None
        tags: list[str] | None  # absent from events stored before tags: read with `tags_of`

        def apply(self, memory: Memory) -> None:
            memory.company = self.company
            memory.tags = tags_of(self)
            memory.person = self.person
            memory.visibility = self.visibility
            memory.team = self.team
            memory.source = self.source
            memory.evidence = self.evidence
            memory.review = NORMAL
            memory.expires_at = None
            memory.forget_id = None
            memory.receipt = None
            memory.added_receipts = []
            memory.relation = None
            memory.context = None
            memory.merged_into = None
            memory.revisions = [revision_record(
                revision=1, text=self.text, valid_from=self.valid_from, valid_to=self.valid_to,
                time_uncertain=self.valid_from is None, at=self.timestamp, actor=self.actor, mode=None)]

    class Remembered(Created):
        """An explicit request to remember: confirmed as stated."""

        def apply(self, memory: Memory) -> None:
            super().apply(memory)
            memory.status = CONFIRMED

    class Proposed(Created):
        """A candidate learned from what the person said; waits for review."""

        review: str
        expires_at: datetime | None
        receipt: str | None  # the receipt it was learned from, if any
        relation: dict[str, str] | None = None  # how it stands to a confirmed memory (absent before ADR 0041)
        context: str | None = None  # the sentence or two of the message around the quote, sealed like text

        personal_fields: ClassVar[tuple[str, ...]] = ("text", "evidence", "source", "tags", "context")

        def apply(self, memory: Memory) -> None:
            super().apply(memory)
            memory.receipt = self.receipt
            memory.relation = getattr(self, "relation", None)
            memory.context = getattr(self, "context", None)
            memory.status = PENDING
            memory.review = self.review
            memory.expires_at = self.expires_at

    class Confirmed(Event):
        personal_fields = ("text",)
        text: str | None
        edited: bool

        def apply(self, memory: Memory) -> None:
            memory.status = CONFIRMED
            if self.edited:
                memory.revisions[-1] = {**memory.revisions[-1], "text": self.text}

    class Rejected(Event):
        """Also how a candidate ends that was folded into the confirmed memory it repeats or updates
        (`merged_into`): purged like any rejected one, its quotes now that memory's evidence."""

        merged_into: str | None = None

        def apply(self, memory: Memory) -> None:
            memory.status = REJECTED
            memory.merged_into = getattr(self, "merged_into", None)

    class EvidenceAdded(Event):
        """The same thing said again: its quote joins the evidence (the whole list, sealed like text)."""

        personal_fields = ("evidence",)
        evidence: list[dict[str, Any]] | None
        receipt: str | None = None

        def apply(self, memory: Memory) -> None:
            memory.evidence = self.evidence
            if self.receipt:
                memory.added_receipts = [*getattr(memory, "added_receipts", []), self.receipt]

    class Expired(Event):
        """An unreviewed candidate ran out of time; its key is destroyed like a forgotten one's."""

        key_destroyed_at: datetime | None

        def apply(self, memory: Memory) -> None:
            memory.status = EXPIRED

    class Corrected(Event):
        """A new revision; its evidence is the correction itself (events before it carried none)."""

        personal_fields = ("text", "reason", "evidence")
        revision: int
        text: str | None
        valid_from: datetime | None
        valid_to: datetime | None
        reason: str | None
        mode: str
        evidence: list[dict[str, Any]] | None = None

        def apply(self, memory: Memory) -> None:
            if self.evidence is not None:  # the current answer's evidence; older quotes stay in history
                memory.evidence = self.evidence
            memory.revisions.append(revision_record(
                revision=self.revision, text=self.text, valid_from=self.valid_from, valid_to=self.valid_to,
                time_uncertain=self.valid_from is None and memory.revisions[-1]["time_uncertain"],
                at=self.timestamp, actor=self.actor, mode=self.mode))

    class Forgotten(Event):
        """Terminal. Carries no content; the data key is destroyed with it, in its transaction."""

        forget_id: str
        key_destroyed_at: datetime

        def apply(self, memory: Memory) -> None:
            memory.status = FORGOTTEN
            memory.forget_id = self.forget_id

    def answer_at(self, at: datetime) -> dict[str, Any] | None:
        """The revision that answers for valid time `at` (its text and answer period), if any does."""
        return answer_at(self.revisions, at)

    @property
    def purge_id(self) -> str | None:
        """The id whose purge status shows every copy going: a forget's own id, or the one a
        rejection or expiry gets from the memory's id. None while the memory is kept."""
        if self.status == FORGOTTEN:
            return self.forget_id
        if self.status in (REJECTED, EXPIRED):
            return closing_purge_id(self.status, self.id)
        return None

    # -- creation -------------------------------------------------------------

    @classmethod
    def _begin(
        cls,
        event_class: type[Memory.Created],
        *,
        scope: Scope,
        source: dict[str, Any],
        text: str,
        evidence: list[dict[str, Any]],
        valid_from: datetime | None,
        valid_to: datetime | None,
        actor: str,
        at: datetime,
        id: UUID | None,
        tags: list[str] | None = None,
        **extra: Any,
    ) -> Memory:
        check_valid_time(valid_from, valid_to)
        return cls._create(
            event_class, id=id or uuid4(), timestamp=at, actor=actor,
            company=scope.company, person=scope.person, visibility=scope.visibility, team=scope.team,
            source=dict(source), text=text, evidence=evidence, valid_from=valid_from, valid_to=valid_to,
            tags=check_tags(tags) or None, **extra,
        )

    @classmethod
    def remember(
        cls, *, scope: Scope, source: dict[str, Any], text: str, evidence: list[dict[str, Any]],
        valid_from: datetime | None, valid_to: datetime | None, actor: str, at: datetime, id: UUID | None = None,
        tags: list[str] | None = None,
    ) -> Memory:
        """An explicit request to remember: confirmed at once, exactly as stated."""
        return cls._begin(cls.Remembered, scope=scope, source=source, text=text, evidence=evidence,
                          valid_from=valid_from, valid_to=valid_to, actor=actor, at=at, id=id, tags=tags)

    @classmethod
    def propose(
        cls, *, scope: Scope, source: dict[str, Any], text: str, evidence: list[dict[str, Any]], review: str,
        expires_at: datetime | None, actor: str, at: datetime, valid_from: datetime | None = None,
        valid_to: datetime | None = None, id: UUID | None = None, receipt: str | None = None,
        tags: list[str] | None = None, relation: dict[str, str] | None = None, context: str | None = None,
    ) -> Memory:
        """A candidate for the person to review; `relation` says which confirmed memory it repeats or
        changes, if any."""
        return cls._begin(cls.Proposed, scope=scope, source=source, text=text, evidence=evidence,
                          valid_from=valid_from, valid_to=valid_to, actor=actor, at=at, id=id,
                          review=review, expires_at=expires_at, receipt=receipt, tags=tags, relation=relation,
                          context=context)

    # -- views of state -------------------------------------------------------

    @property
    def scope(self) -> Scope:
        """Its scope; once its key is gone its source is too (`Scope.shredded`)."""
        return Scope(
            company=self.company,
            person=self.person,
            visibility=self.visibility,
            team=self.team,
            source_id=None if self.source is None else self.source.get("id"),
            shredded=self.source is None,
        )

    @property
    def current(self) -> dict[str, Any]:
        return self.revisions[-1]

    @property
    def revision(self) -> int:
        return int(self.current["revision"])

    @property
    def is_forgotten(self) -> bool:
        return self.status == FORGOTTEN

    # -- commands -------------------------------------------------------------

    def _refuse_if_forgotten(self) -> None:
        if self.is_forgotten:
            raise MemoryForgotten("this memory was forgotten; nothing more can change it")

    def _require_confirmable(self, acknowledge_sensitive: bool, at: datetime) -> None:
        self._refuse_if_forgotten()
        if self.status != PENDING:
            raise NotACandidate("only a pending candidate can be confirmed")
        if self.expires_at is not None and at >= self.expires_at:
            raise NotACandidate("this candidate has expired")
        if self.review == SENSITIVE and not acknowledge_sensitive:
            raise SensitiveAckRequired("confirming sensitive content needs acknowledge_sensitive: true")

    def confirm(self, *, text: str | None, acknowledge_sensitive: bool, actor: str, at: datetime) -> None:
        self._require_confirmable(acknowledge_sensitive, at)
        edited = text is not None and text != self.current["text"]
        self.trigger_event(
            self.Confirmed, timestamp=at, actor=actor, text=text if edited else None, edited=edited
        )

    def reject(self, *, actor: str, at: datetime) -> None:
        self._refuse_if_forgotten()
        if self.status != PENDING:
            raise NotACandidate("only a pending candidate can be rejected")
        self.trigger_event(self.Rejected, timestamp=at, actor=actor)

    def merge_into(self, target: Memory, *, acknowledge_sensitive: bool, actor: str, at: datetime) -> None:
        """Confirming a candidate that repeats or updates `target` ends the candidate: its quotes go
        there (the caller adds them), it is purged like a rejected one."""
        self._require_confirmable(acknowledge_sensitive, at)
        self.trigger_event(self.Rejected, timestamp=at, actor=actor, merged_into=str(target.id))

    def add_evidence(self, quoted: list[dict[str, Any]], *, receipt: str | None, actor: str, at: datetime) -> bool:
        """The same thing said again (a folded candidate, a repeated remember): each quote not already
        there joins the evidence. False when nothing was new."""
        self._refuse_if_forgotten()
        if self.status not in (PENDING, CONFIRMED):
            raise NotACandidate("only a pending or confirmed memory gathers evidence")
        held = list(self.evidence or [])
        new = [q for q in quoted if q not in held]
        if not new:
            return False
        self.trigger_event(self.EvidenceAdded, timestamp=at, actor=actor, evidence=held + new, receipt=receipt)
        return True

    @property
    def receipts(self) -> list[str]:
        """Every receipt its quotes came from: their texts are cleared when it closes."""
        return [r for r in [self.receipt, *getattr(self, "added_receipts", [])] if r]

    def is_due(self, now: datetime) -> bool:
        return self.status == PENDING and self.expires_at is not None and self.expires_at <= now

    def expire(self, *, at: datetime, key_destroyed_at: datetime | None = None) -> None:
        self._refuse_if_forgotten()
        if self.status != PENDING:
            raise NotACandidate("only a pending candidate can expire")
        self.trigger_event(self.Expired, timestamp=at, actor="system", key_destroyed_at=key_destroyed_at)

    def correct(
        self,
        *,
        text: str,
        valid_from: datetime | None,
        valid_to: datetime | None,
        reason: str | None,
        actor: str,
        at: datetime,
        evidence: list[dict[str, Any]] | None = None,
    ) -> None:
        self._refuse_if_forgotten()
        if self.status != CONFIRMED:
            raise NotAConfirmedMemory("only a confirmed memory can be corrected")
        check_valid_time(valid_from, valid_to)
        self.trigger_event(
            self.Corrected,
            timestamp=at,
            actor=actor,
            revision=self.revision + 1,
            text=text,
            valid_from=valid_from,
            valid_to=valid_to,
            reason=reason,
            mode=correction_mode(valid_from, self.current["valid_from"]),
            evidence=evidence,
        )

    def forget(self, *, forget_id: str, key_destroyed_at: datetime, actor: str, at: datetime) -> None:
        self._refuse_if_forgotten()
        self.trigger_event(
            self.Forgotten,
            timestamp=at,
            actor=actor,
            forget_id=forget_id,
            key_destroyed_at=key_destroyed_at,
        )


def closing_purge_id(status: str, memory_id: object) -> str:
    """A rejected or expired candidate's purge id: `rj-<id>` / `ex-<id>` (a forget has its own `fg-` id)."""
    return f"{'rj' if status == REJECTED else 'ex'}-{memory_id}"


def purge_id_of(event: Memory.Forgotten | Memory.Rejected | Memory.Expired) -> str:
    """The purge id an event that ends a memory opens."""
    if isinstance(event, Memory.Forgotten):
        return event.forget_id
    return closing_purge_id(REJECTED if isinstance(event, Memory.Rejected) else EXPIRED, event.originator_id)
