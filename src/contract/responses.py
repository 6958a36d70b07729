"""Response models: what each JSON answer holds, for /openapi.json and for validating every answer.

Each model lists its fields in the order the service builds the document. Routes answer with
exactly the keys the service returned
(`middleware.JsonRoute`): a field that is always there is required here, a field the service
sometimes leaves out has a default and stays out when left out, and a key the service adds that no
model declares is not answered (declare it here first).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from . import examples
from .examples import extra


def _timestamp(value: Any) -> datetime | str:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise PydanticCustomError("timestamp", "not an RFC 3339 time") from None
        return value
    raise PydanticCustomError("timestamp", "not a time")


# A time as the service holds it: a datetime is written as pydantic writes one (`Z` for UTC, as answers
# without a model were written too), a time the service already wrote as text (recall, documents
# unsealed from a view) is answered unchanged.
Timestamp = Annotated[datetime | str, PlainValidator(_timestamp), WithJsonSchema({"type": "string", "format": "date-time"})]

# Never written: a remember's answer when the same text from the same message was remembered before
# (HTTP answers it 200 instead of 201).
EXISTING = "stored by an earlier request; nothing new was stored"
NOT_VISIBLE = "false when stored but not yet visible to every reader (then with status 202); absent otherwise"


class SourceOut(BaseModel):
    kind: str
    id: str
    message_id: str | None


class EvidenceOut(BaseModel):
    quote: str = Field(description="an exact substring of the person's message (or the corrected text)")
    source: SourceOut
    occurred_at: Timestamp | None
    memory_id: str | None = Field(default=None, description="an insight's evidence: the memory it comes from; "
                                                            "absent otherwise")


class _MemoryFields(BaseModel):
    id: str
    text: str | None = Field(description="exactly as given; null once forgotten")
    status: str = Field(description="confirmed, forgotten, pending_review, rejected or expired")
    revision: int
    visibility: str = Field(description="general or restricted")
    team: str | None
    source: SourceOut | None = Field(description="null once forgotten: sealed with the text (ADR 0019)")
    valid_from: Timestamp | None
    valid_to: Timestamp | None
    time_uncertain: bool
    evidence: list[EvidenceOut]
    created_at: Timestamp
    updated_at: Timestamp
    tags: list[str] = Field(default_factory=list, description="as remembered; [] once forgotten")


class LinkOut(BaseModel):
    memory_id: str = Field(description="the linked memory; only memories the caller may use are listed")
    kind: str = Field(description="co_mention: both were mentioned in one message (their evidence cites it)")
    status: str = Field(description="active, or invalidated once either memory stopped citing that message")
    since: Timestamp = Field(description="when both memories first cited the message")
    invalidated_at: Timestamp | None = Field(description="when the link was broken; null while active")
    reason: str | None = Field(description="what broke it: corrected, forgotten, rejected or expired; null while "
                                           "active")


class LinkList(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.LINKS))

    items: list[LinkOut]


class MemoryOut(_MemoryFields):
    model_config = ConfigDict(json_schema_extra=extra(examples.MEMORY))

    visible: bool | None = Field(default=None, description=NOT_VISIBLE)
    purge_id: str | None = Field(default=None, description="forgotten, rejected or expired: the id whose "
                                 "GET /v1/forgets/{purge_id} shows each copy's purge (stopped using at once, "
                                 "purge_complete once every copy reported)")
    links: list[LinkOut] | None = Field(default=None, description="GET /v1/memories/{id} only: the memories "
                                        "linked to this one (as GET /v1/memories/{id}/links); absent elsewhere")
    existing: bool = Field(default=False, exclude=True, description=EXISTING)


class RelationOut(BaseModel):
    kind: str = Field(description="duplicate (confirming extends that memory's evidence) or update (confirming "
                                  "corrects it)")
    memory_id: str


class CandidateOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.CANDIDATE))

    id: str
    text: str | None
    status: str = Field(description="pending_review")
    review: str = Field(description="normal or sensitive")
    visibility: str
    team: str | None
    source: SourceOut | None = Field(description="null once its key is gone")
    evidence: list[EvidenceOut]
    context: str | None = Field(default=None, description="the sentence or two of the message around the quote")
    relation: RelationOut | None = Field(default=None, description="the confirmed memory it repeats or changes")
    valid_from: Timestamp | None = Field(default=None, description="when it holds from, resolved against the "
                                         "message's time where that is certain (\"I moved last month\"); else null")
    valid_to: Timestamp | None = Field(default=None, description="a plan's end: after the last day it names "
                                       "(\"next Thursday\", 下个月8号); else null")
    time_uncertain: bool = Field(default=True, description="true when the message named no time that is certain")
    proposed_at: Timestamp
    expires_at: Timestamp | None
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)
    existing: bool = Field(default=False, exclude=True, description=EXISTING)


class MemoryList(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.MEMORY_LIST))

    items: list[MemoryOut]
    next_cursor: str | None


class CandidateList(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.CANDIDATES))

    items: list[CandidateOut]


class HistoryEvent(BaseModel):
    type: str
    at: Timestamp
    actor: str
    revision: int
    text: str | None = Field(description="null for events without text, and for every event once forgotten")
    # corrections only
    reason: str | None = None
    mode: str | None = Field(default=None, description="a correction: supersede or replace")
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    evidence: list[EvidenceOut] | None = Field(default=None, description="the revision's own evidence: the "
                                               "quote it was made from, or the correction itself; null once "
                                               "forgotten")


class History(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.HISTORY))

    events: list[HistoryEvent]


class RecallItem(BaseModel):
    id: str
    kind: str = Field(description="memory or insight")
    text: str
    revision: int
    valid_from: Timestamp | None
    valid_to: Timestamp | None
    time_uncertain: bool
    evidence: list[EvidenceOut]
    score: float
    truncated: bool | None = Field(default=None, description="true when the text was cut to fit max_bytes; absent otherwise")
    evidence_memory_ids: list[str] | None = Field(default=None, description="an insight: the memories it rests on; "
                                                                            "absent for a memory")


class InsightOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.INSIGHT))

    id: str
    text: str | None = Field(description="null once a memory it rests on was forgotten (its text came from it), "
                                         "or once rejected")
    status: str = Field(description="proposed, confirmed, invalidated or rejected; invalidated as soon as any "
                                    "memory it rests on is forgotten, corrected or revoked")
    reason: str | None = Field(description="invalidated: forgotten or corrected; null otherwise")
    proposer: str = Field(description="local (repeated preferences), hindsight (observations) or model")
    evidence_memory_ids: list[str]
    evidence: list[EvidenceOut] = Field(description="the evidence of every memory it rests on that is still "
                                                    "in use, each with its memory_id")
    proposed_at: Timestamp
    updated_at: Timestamp
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class InsightList(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.INSIGHTS))

    items: list[InsightOut]


class RecallOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.RECALL))

    items: list[RecallItem]
    degraded: bool
    bytes: int = Field(ge=0)
    omitted: int = Field(ge=0, description="items left out entirely because max_bytes was spent")
    mode: str | None = Field(default=None, description="off or shadow: the company's rollout mode, when it "
                                                       "answers this caller nothing; absent otherwise")
    paused: bool | None = Field(default=None, description="true while the person paused use; absent otherwise")


class ForgetAccepted(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.FORGET_ACCEPTED))

    forget_id: str
    status: str = Field(description="stopped_using or purge_complete")
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class ForgetCopy(BaseModel):
    copy_: str = Field(alias="copy")
    state: str = Field(description="pending or purged")
    evidence: str | None
    purged_at: Timestamp | None


class ForgetStatus(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.FORGET_STATUS))

    forget_id: str
    memory_id: str | None = Field(default=None, description="a memory forget: its memory; absent for an account")
    status: str = Field(description="stopped_using or purge_complete")
    copies: list[ForgetCopy] = Field(description="an account forget: each copy aggregated over its memories, "
                                                 "purged when every one's is")
    kind: str = Field(description="memory or account")
    # account forgets only
    person: str | None = Field(default=None, description="an account forget: whose account")
    memories: int | None = Field(default=None, description="an account forget: the memories it covers")
    receipts_cleared: int | None = Field(default=None, description="an account forget: receipt payloads it cleared")
    requested_at: Timestamp | None = None
    finished_at: Timestamp | None = Field(default=None, description="an account forget: when every memory was "
                                                                    "forgotten and every receipt cleared; null until then")


class ForgetList(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.FORGETS))

    items: list[ForgetStatus]
    next_cursor: str | None


class ForgetMany(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.FORGET_MANY))

    forget_ids: list[str] = Field(description="one per memory, in the order asked (already forgotten: its forget id)")
    more: bool | None = Field(default=None, description="by source: true when more of its memories remain than one "
                                                        "request forgets (ask again); absent for ids")
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class Rejected(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.REJECTED))

    id: str
    status: str
    purge_id: str | None = Field(default=None, description="GET /v1/forgets/{purge_id}: the rejected candidate's "
                                 "copies, each with the evidence of its purge")
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class ReceiptState(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.RECEIPT))

    receipt_id: str
    state: str = Field(description="queued, deferred (waiting for a spent daily model budget), done, ignored or failed")
    reason: str | None = Field(default=None, description="why it is deferred (`budget`), ignored or failed; on a "
                               "done one, `budget`: the rules learnt from it while the model's budget was spent "
                               "(ENGRAM_BUDGET_FALLBACK=rules)")
    extractor: str | None = Field(default=None, description="what learnt from it once it has been read: `rules` or `llm`")
    attempts: int | None = None
    last_error: str | None = None
    candidate_ids: list[str] | None = Field(default=None, description="the candidates learned from it, once any")
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class ReceiptBatch(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.RECEIPT_BATCH))

    items: list[ReceiptState] = Field(description="one per message, in the order sent")


class Revocation(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.REVOCATION))

    source_id: str
    scope: str = Field(description="person or company")
    status: str
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class PersonSettingsOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.SETTINGS))

    learning_paused: bool
    use_paused: bool
    visible: bool | None = Field(default=None, description=NOT_VISIBLE)


class Answer(BaseModel):
    revision: int
    text: str | None
    valid_from: Timestamp | None
    valid_to: Timestamp | None


class ExportedMemory(_MemoryFields):
    history: list[HistoryEvent]
    answer: Answer | None = Field(default=None, description="the revision that answers now (a later revision "
                                  "may only take over in the future); null when none does")


class ExportOut(BaseModel):
    model_config = ConfigDict(json_schema_extra=extra(examples.EXPORT))

    exported_at: Timestamp
    company: str
    person: str
    memories: list[ExportedMemory]
    insights: list[InsightOut] = Field(default_factory=list, description="proposed, confirmed and invalidated "
                                       "insights, each with the memories it rests on")
