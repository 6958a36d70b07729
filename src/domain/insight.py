"""The Insight aggregate: a derived judgment resting on several confirmed memories of one scope.

An insight is proposed (by a proposer: local rules, Hindsight observations or a model), shown
with all its evidence, and used only once its person confirms it. It rests on exact revisions of
its memories: when any of them is forgotten, corrected away, revoked or out of the caller's scope
it stops being used at once (the reads check every piece of evidence each time), and an
`Invalidated` event records it for good. Its text is personal and sealed under its own key, which
is destroyed when an invalidation comes from a forget (the text was derived from forgotten words).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from .errors import DomainError
from .scope import GENERAL, Scope

PROPOSED = "proposed"
CONFIRMED = "confirmed"
REJECTED = "rejected"
INVALIDATED = "invalidated"
LIVE = (PROPOSED, CONFIRMED)

# Why an insight stopped being used.
FORGOTTEN = "forgotten"
CORRECTED = "corrected"
OUT_OF_SCOPE = "out_of_scope"
REVOKED = "revoked"


class InsightNotOpen(DomainError):
    code, status, title = "insight_not_proposed", 409, "Insight is not waiting for review"


class InsightInvalidated(DomainError):
    code, status, title = "insight_invalidated", 409, "Insight rests on evidence no longer in use"


class InvalidInsight(DomainError):
    code, status, title = "invalid_insight", 422, "Insight evidence is not acceptable"


@dataclass(frozen=True)
class Fact:
    """One confirmed memory as a proposer sees it: its current revision's text."""

    memory_id: str
    revision: int
    text: str


@dataclass(frozen=True)
class Group:
    """The confirmed memories an insight may rest on together: one person's general memories, or
    their restricted memories of one team and source. Proposals never cross groups."""

    scope: Scope
    facts: tuple[Fact, ...]

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return scope_key(self.scope)


@dataclass(frozen=True)
class Proposal:
    """What a proposer suggests: the judgment and the memories it rests on."""

    text: str
    memory_ids: tuple[str, ...]
    proposer: str


def scope_key(scope: Scope) -> tuple[str, str | None, str | None]:
    """General memories share one group; restricted ones group by team and source."""
    if scope.visibility == GENERAL:
        return (GENERAL, None, None)
    return (scope.visibility, scope.team, scope.source_id)


def insight_id(company: str, person: str, proposer: str, memory_ids: Sequence[str]) -> UUID:
    """Deterministic: the same proposer over the same memories proposes the same insight once,
    however often it runs (a rejected one is not proposed again)."""
    name = "\x1f".join(["engram-insight", company, person, proposer, *sorted(memory_ids)])
    return uuid5(NAMESPACE_URL, name)


class Insight(Aggregate):
    if TYPE_CHECKING:
        company: str
        person: str
        visibility: str
        team: str | None
        source: dict[str, Any] | None  # {"id": source id} of a restricted group; sealed like the text
        text: str | None
        evidence: list[dict[str, Any]]  # [{"memory_id", "revision"}]
        proposer: str
        status: str
        reason: str | None

    class Event(Aggregate.Event):
        personal_fields: ClassVar[tuple[str, ...]] = ()
        actor: str

    class Proposed(Event, Aggregate.Created):
        personal_fields = ("text", "source")
        company: str
        person: str
        visibility: str
        team: str | None
        source: dict[str, Any] | None
        text: str | None
        evidence: list[dict[str, Any]]
        proposer: str

        def apply(self, insight: Insight) -> None:
            insight.company = self.company
            insight.person = self.person
            insight.visibility = self.visibility
            insight.team = self.team
            insight.source = self.source
            insight.text = self.text
            insight.evidence = list(self.evidence)
            insight.proposer = self.proposer
            insight.status = PROPOSED
            insight.reason = None

    class Confirmed(Event):
        def apply(self, insight: Insight) -> None:
            insight.status = CONFIRMED

    class Rejected(Event):
        def apply(self, insight: Insight) -> None:
            insight.status = REJECTED

    class Invalidated(Event):
        """Terminal: a piece of its evidence was forgotten, corrected away or revoked."""

        reason: str
        memory_id: str | None
        key_destroyed_at: datetime | None

        def apply(self, insight: Insight) -> None:
            insight.status = INVALIDATED
            insight.reason = self.reason

    @classmethod
    def propose(cls, *, scope: Scope, text: str, evidence: Sequence[Fact], proposer: str, actor: str,
                at: datetime) -> Insight:
        memory_ids = [f.memory_id for f in evidence]
        if len(set(memory_ids)) < 2:
            raise InvalidInsight("an insight rests on two or more memories")
        if not text.strip():
            raise InvalidInsight("an insight needs text")
        return cls._create(
            cls.Proposed, id=insight_id(scope.company, scope.person, proposer, memory_ids), timestamp=at,
            actor=actor, company=scope.company, person=scope.person, visibility=scope.visibility,
            team=scope.team, source=None if scope.source_id is None else {"id": scope.source_id}, text=text,
            evidence=[{"memory_id": f.memory_id, "revision": f.revision} for f in evidence], proposer=proposer,
        )

    @property
    def scope(self) -> Scope:
        """The scope its evidence shares; a restricted one whose key is gone is `shredded`."""
        source_id = None if self.source is None else self.source.get("id")
        return Scope(self.company, self.person, self.visibility, self.team, source_id,
                     shredded=self.visibility != GENERAL and source_id is None)

    @property
    def memory_ids(self) -> list[str]:
        return [e["memory_id"] for e in self.evidence]

    @property
    def is_live(self) -> bool:
        return self.status in LIVE

    def confirm(self, *, actor: str, at: datetime) -> None:
        if self.status != PROPOSED:
            raise InsightNotOpen("only a proposed insight can be confirmed")
        self.trigger_event(self.Confirmed, timestamp=at, actor=actor)

    def reject(self, *, actor: str, at: datetime) -> None:
        if self.status != PROPOSED:
            raise InsightNotOpen("only a proposed insight can be rejected")
        self.trigger_event(self.Rejected, timestamp=at, actor=actor)

    def invalidate(self, *, reason: str, memory_id: str | None, at: datetime,
                   key_destroyed_at: datetime | None = None) -> None:
        if self.status == INVALIDATED:
            return
        self.trigger_event(self.Invalidated, timestamp=at, actor="system", reason=reason, memory_id=memory_id,
                           key_destroyed_at=key_destroyed_at)


def broken_by(evidence: Sequence[dict[str, Any]], memories: dict[str, dict[str, Any]]) -> tuple[str, str] | None:
    """Why (and by which memory) this evidence no longer holds, or None while it all does.

    `memories` maps memory id to what the caller's reads know of it now: `status`, `revision`,
    `usable` (the access policy's verdict for this caller), `revoked` (its source is). A missing memory
    counts as forgotten.
    """
    for piece in evidence:
        memory_id = str(piece["memory_id"])
        now = memories.get(memory_id)
        if now is None or now["status"] == "forgotten":
            return FORGOTTEN, memory_id
        if now["status"] != "confirmed" or int(now["revision"]) != int(piece["revision"]):
            return CORRECTED, memory_id
        if not now["usable"]:
            return (REVOKED if now.get("revoked") else OUT_OF_SCOPE), memory_id
    return None
