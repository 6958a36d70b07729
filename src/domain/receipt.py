"""A receipt: one message handed to Engram for background learning, and what became of it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from .instant import check_instant

MESSAGE = "message"
STOPS_CAPTURE = ("authorization_request", "input_request")
KINDS = (MESSAGE, *STOPS_CAPTURE)

QUEUED, IGNORED, PROCESSED, FAILED = "queued", "ignored", "processed", "failed"
DEFERRED = "deferred"  # as the API answers a queued receipt waiting for a spent model budget (`reason: budget`)


def answered_state(state: str) -> str:
    """A state as the API names it: a processed receipt is `done` to its sender and to operators."""
    return "done" if state == PROCESSED else state


def receipt_uuid(company: str, person: str, receipt_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram:receipt:{company}:{person}:{receipt_id}")


def candidate_uuid(receipt: UUID, quote: str, text: str) -> UUID:
    """Deterministic, so a retried receipt can never add a second copy of a candidate."""
    return uuid5(receipt, f"{quote}\x00{text}")


class Receipt(Aggregate):
    # Set by the events' apply methods; for mypy only, as eventsourcing turns class annotations into __init__ parameters.
    if TYPE_CHECKING:
        company: str
        person: str
        receipt_id: str
        author: str
        kind: str
        text: str | None
        occurred_at: datetime | None
        source: dict[str, Any] | None
        visibility: str
        team: str | None
        state: str
        reason: str | None
        candidate_ids: list[str]
        proposals: list[dict[str, str]] | None
        extractor: str | None
        cleared: bool

    class Event(Aggregate.Event):
        personal_fields: ClassVar[tuple[str, ...]] = ()

    class Received(Event, Aggregate.Created):
        personal_fields = ("text", "source")  # the source is sealed too: None once the key is gone (ADR 0019)
        company: str
        person: str
        receipt_id: str
        author: str
        kind: str
        text: str | None
        occurred_at: datetime | None
        source: dict[str, Any] | None
        visibility: str
        team: str | None
        state: str
        reason: str | None

        def apply(self, r: Receipt) -> None:
            r.company, r.person, r.receipt_id = self.company, self.person, self.receipt_id
            r.author, r.kind, r.text, r.occurred_at = self.author, self.kind, self.text, self.occurred_at
            r.source, r.visibility, r.team = self.source, self.visibility, self.team
            r.state, r.reason = self.state, self.reason
            r.candidate_ids = []
            r.proposals = None
            r.extractor = None
            r.cleared = False

    class Extracted(Event):
        """What the extractor proposed, kept (sealed) so a retry never asks the model again."""

        personal_fields = ("proposals",)
        proposals: list[dict[str, str]] | None
        extractor: str
        model: str

        def apply(self, r: Receipt) -> None:
            r.proposals, r.extractor = self.proposals, self.extractor

    class Processed(Event):
        candidate_ids: list[str]
        proposals: int
        extractor: str

        def apply(self, r: Receipt) -> None:
            r.state, r.candidate_ids = PROCESSED, list(self.candidate_ids)

    class Ignored(Event):
        reason: str

        def apply(self, r: Receipt) -> None:
            r.state, r.reason = IGNORED, self.reason

    class Failed(Event):
        reason: str

        def apply(self, r: Receipt) -> None:
            r.state, r.reason = FAILED, self.reason

    class PayloadCleared(Event):
        """The receipt's key is destroyed: its text is gone from every copy."""

        why: str

        def apply(self, r: Receipt) -> None:
            r.cleared = True
            r.text = None

    @classmethod
    def receive(cls, *, company: str, person: str, receipt_id: str, author: str, kind: str, text: str | None,
                occurred_at: datetime | None, source: dict[str, Any], visibility: str, team: str | None,
                ignored_because: str | None, at: datetime) -> Receipt:
        check_instant(occurred_at, "occurred_at")
        state = IGNORED if ignored_because else QUEUED
        return cls._create(
            cls.Received, id=receipt_uuid(company, person, receipt_id), timestamp=at, company=company,
            person=person, receipt_id=receipt_id, author=author, kind=kind, text=text, occurred_at=occurred_at,
            source=dict(source), visibility=visibility, team=team, state=state, reason=ignored_because,
        )

    @property
    def stops_capture(self) -> bool:
        return self.kind in STOPS_CAPTURE

    def extracted(self, proposals: list[dict[str, str]], extractor: str, model: str, at: datetime) -> None:
        if self.state == QUEUED and self.proposals is None:
            self.trigger_event(self.Extracted, timestamp=at, proposals=proposals, extractor=extractor, model=model)

    def processed(self, candidate_ids: list[str], proposals: int, extractor: str, at: datetime) -> None:
        if self.state == QUEUED:
            self.trigger_event(self.Processed, timestamp=at, candidate_ids=candidate_ids, proposals=proposals,
                               extractor=extractor)

    def ignore(self, reason: str, at: datetime) -> None:
        if self.state == QUEUED:
            self.trigger_event(self.Ignored, timestamp=at, reason=reason)

    def fail(self, reason: str, at: datetime) -> None:
        if self.state == QUEUED:
            self.trigger_event(self.Failed, timestamp=at, reason=reason)

    def clear_payload(self, why: str, at: datetime) -> None:
        if not self.cleared:
            self.trigger_event(self.PayloadCleared, timestamp=at, why=why)
