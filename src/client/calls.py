"""The requests the client sends: one function per call of the API, building the request from its
keyword arguments (the request body's fields) and saying how to read the answer and whether the
API makes the call idempotent (only those are retried). `Client` and `AsyncClient` send them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from engram.contract.admin import AdminStatus
from engram.contract.responses import (
    CandidateList,
    CandidateOut,
    ExportOut,
    ForgetAccepted,
    ForgetList,
    ForgetMany,
    ForgetStatus,
    History,
    InsightList,
    InsightOut,
    LinkList,
    MemoryList,
    MemoryOut,
    PersonSettingsOut,
    RecallOut,
    ReceiptBatch,
    ReceiptState,
    Rejected,
    Revocation,
)

from .checks import checked

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Time = datetime | str  # a datetime with its offset, or RFC 3339 text
Source = Mapping[str, Any] | BaseModel  # {"kind", "id", "message_id"}, or a memory's `source`


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    idempotent: bool  # sending it twice has the effect of sending it once: it may be retried
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)


def _wire(value: Any) -> Any:
    """A keyword argument as JSON: datetimes as RFC 3339, models as their fields, None fields left out."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return {str(k): _wire(v) for k, v in value.items() if v is not None}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_wire(v) for v in value]
    return value


def _body(**fields: Any) -> dict[str, Any]:
    wired: dict[str, Any] = _wire(fields)
    return wired


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate(response.json())


def _path(template: str, *ids: str) -> str:
    """Ids as single path segments, whatever they hold (a `/` included)."""
    return template.format(*(quote(str(i), safe="") for i in ids))


def _get(path: str, model: type[M], **params: Any) -> Call[M]:
    return Call("GET", path, _model(model), idempotent=True,
                params={k: v for k, v in params.items() if v is not None})


def _post(path: str, model: type[M], *, idempotent: bool = False, json: Any = None) -> Call[M]:
    return Call("POST", path, _model(model), idempotent=idempotent, json=json)


# Capture and remember

@checked
def remember(*, text: str, source: Source, explicit: bool = True, occurred_at: Time | None = None,
             visibility: Literal["general", "restricted"] | None = None, team: str | None = None,
             valid_from: Time | None = None, valid_to: Time | None = None,
             tags: Sequence[str] | None = None) -> Call[MemoryOut | CandidateOut]:
    """`POST /v1/memories`: remember exactly this text, from the person's own message.

    A memory (`status` confirmed); a sensitive text becomes a `CandidateOut` awaiting review.
    Retried only when `source` names a `message_id` (the API then stores it once)."""
    body = _body(text=text, explicit=explicit, source=source, occurred_at=occurred_at, visibility=visibility,
                 team=team, valid_from=valid_from, valid_to=valid_to, tags=tags)

    def read(response: httpx.Response) -> MemoryOut | CandidateOut:
        document = response.json()
        if document.get("status") == "pending_review":
            return CandidateOut.model_validate(document)
        return MemoryOut.model_validate(document)

    return Call("POST", "/v1/memories", read, idempotent=bool(body["source"].get("message_id")), json=body)


@checked
def receive(*, receipt_id: str | None = None, author: Literal["user", "assistant", "system", "tool"] | None = None,
            text: str | None = None, source: Source | None = None, occurred_at: Time | None = None,
            kind: str | None = None, visibility: Literal["general", "restricted"] | None = None,
            team: str | None = None,
            messages: Sequence[Mapping[str, Any]] | None = None) -> Call[ReceiptState | ReceiptBatch]:
    """`POST /v1/receipts`: one message for background learning (a `ReceiptState`), or with
    `messages=[{receipt_id, author, text, source, ...}, ...]` a whole conversation (a `ReceiptBatch`).
    Idempotent by `receipt_id`, so always retried."""
    one = _body(receipt_id=receipt_id, author=author, text=text, source=source, occurred_at=occurred_at, kind=kind,
                visibility=visibility, team=team)
    if messages is None:
        return Call("POST", "/v1/receipts", _model(ReceiptState), idempotent=True, json=one)
    if one:
        raise TypeError("give either one message's fields or messages=[...], not both")
    return Call("POST", "/v1/receipts", _model(ReceiptBatch), idempotent=True, json=_body(messages=messages))


@checked
def receipt(receipt_id: str, /) -> Call[ReceiptState]:
    """`GET /v1/receipts/{receipt_id}`: its state, attempts and candidates."""
    return _get(_path("/v1/receipts/{}", receipt_id), ReceiptState)


# Recall and inspection

@checked
def recall(*, query: str, as_of: Time | None = None, max_bytes: int | None = None, limit: int | None = None,
           tags: Sequence[str] | None = None) -> Call[RecallOut]:
    """`POST /v1/recall`: confirmed memories and insights in the caller's scope, valid at `as_of`."""
    return _post("/v1/recall", RecallOut, idempotent=True,
                 json=_body(query=query, as_of=as_of, max_bytes=max_bytes, limit=limit, tags=tags))


@checked
def memories(*, q: str | None = None, limit: int | None = None, cursor: str | None = None,
             status: Literal["confirmed", "forgotten", "all"] | None = None,
             tags: Sequence[str] | None = None) -> Call[MemoryList]:
    """`GET /v1/memories`: one page; `next_cursor` asks for the next (or use `iter_memories`). `tags`:
    only memories holding all of them."""
    return _get("/v1/memories", MemoryList, q=q, limit=limit, cursor=cursor, status=status,
                tags=list(tags) if tags else None)


@checked
def memory(memory_id: str, /) -> Call[MemoryOut]:
    """`GET /v1/memories/{id}`."""
    return _get(_path("/v1/memories/{}", memory_id), MemoryOut)


@checked
def history(memory_id: str, /) -> Call[History]:
    """`GET /v1/memories/{id}/history`: every event, with text while the memory is not forgotten."""
    return _get(_path("/v1/memories/{}/history", memory_id), History)


@checked
def links(memory_id: str, /) -> Call[LinkList]:
    """`GET /v1/memories/{id}/links`: memories mentioned in the same message."""
    return _get(_path("/v1/memories/{}/links", memory_id), LinkList)


@checked
def correct(memory_id: str, /, *, text: str, valid_from: Time | None = None, valid_to: Time | None = None,
            reason: str | None = None, source: Source | None = None,
            acknowledge_sensitive: bool | None = None) -> Call[MemoryOut]:
    """`POST /v1/memories/{id}/correct`: the next revision. With `valid_from` it supersedes from then on,
    without it it replaces. Never retried (each one is a new revision)."""
    return _post(_path("/v1/memories/{}/correct", memory_id), MemoryOut,
                 json=_body(text=text, valid_from=valid_from, valid_to=valid_to, reason=reason, source=source,
                            acknowledge_sensitive=acknowledge_sensitive))


# Forgetting

@checked
def forget(memory_id: str, /) -> Call[ForgetAccepted]:
    """`POST /v1/memories/{id}/forget`: stopped using at once; `forget_status` follows the purge."""
    return _post(_path("/v1/memories/{}/forget", memory_id), ForgetAccepted, idempotent=True)


@checked
def forget_many(*, ids: Sequence[str] | None = None, source_id: str | None = None) -> Call[ForgetMany]:
    """`POST /v1/memories/forget`: the caller's memories by `ids` (retried) or by `source_id` (not retried)."""
    return _post("/v1/memories/forget", ForgetMany, idempotent=ids is not None,
                 json=_body(ids=ids, source_id=source_id))


@checked
def forget_status(forget_id: str, /) -> Call[ForgetStatus]:
    """`GET /v1/forgets/{forget_id}`: each copy's purge, with its evidence."""
    return _get(_path("/v1/forgets/{}", forget_id), ForgetStatus)


@checked
def forgets(*, limit: int | None = None, cursor: str | None = None) -> Call[ForgetList]:
    """`GET /v1/forgets`: the caller's forgets, newest first."""
    return _get("/v1/forgets", ForgetList, limit=limit, cursor=cursor)


@checked
def forget_me() -> Call[ForgetAccepted]:
    """`POST /v1/me/forget`: everything the caller's person holds in this company."""
    return _post("/v1/me/forget", ForgetAccepted)


@checked
def revoke_source(source_id: str, /) -> Call[Revocation]:
    """`POST /v1/sources/{source_id}/revoke`: memories and insights resting on it stop being used."""
    return _post(_path("/v1/sources/{}/revoke", source_id), Revocation)


# Review

@checked
def candidates() -> Call[CandidateList]:
    """`GET /v1/candidates`: the caller's pending candidates."""
    return _get("/v1/candidates", CandidateList)


@checked
def confirm(candidate_id: str, /, *, text: str | None = None,
            acknowledge_sensitive: bool | None = None) -> Call[MemoryOut]:
    """`POST /v1/candidates/{id}/confirm`, optionally with an edited text; a sensitive candidate needs
    `acknowledge_sensitive=True`."""
    return _post(_path("/v1/candidates/{}/confirm", candidate_id), MemoryOut,
                 json=_body(text=text, acknowledge_sensitive=acknowledge_sensitive))


@checked
def reject(candidate_id: str, /) -> Call[Rejected]:
    """`POST /v1/candidates/{id}/reject`."""
    return _post(_path("/v1/candidates/{}/reject", candidate_id), Rejected)


@checked
def insights(*, status: Literal["proposed", "confirmed", "invalidated"] | None = None) -> Call[InsightList]:
    """`GET /v1/insights`: derived judgments, optionally of one status."""
    return _get("/v1/insights", InsightList, status=status)


@checked
def confirm_insight(insight_id: str, /) -> Call[InsightOut]:
    """`POST /v1/insights/{id}/confirm`: recall returns it from now on."""
    return _post(_path("/v1/insights/{}/confirm", insight_id), InsightOut)


@checked
def reject_insight(insight_id: str, /) -> Call[InsightOut]:
    """`POST /v1/insights/{id}/reject`."""
    return _post(_path("/v1/insights/{}/reject", insight_id), InsightOut)


# Controls and export

@checked
def settings(*, learning_paused: bool | None = None, use_paused: bool | None = None) -> Call[PersonSettingsOut]:
    """`GET /v1/settings` without arguments; `PUT /v1/settings` with both (the whole document, so
    retried like any PUT)."""
    if learning_paused is None and use_paused is None:
        return _get("/v1/settings", PersonSettingsOut)
    if learning_paused is None or use_paused is None:
        raise TypeError("give both learning_paused and use_paused (PUT /v1/settings stores the whole document)")
    return Call("PUT", "/v1/settings", _model(PersonSettingsOut), idempotent=True,
                json={"learning_paused": learning_paused, "use_paused": use_paused})


@checked
def export(*, format: Literal["json", "markdown"] = "json") -> Call[ExportOut | str]:
    """`GET /v1/export`: the caller's confirmed memories with evidence and history; an `ExportOut`,
    or with `format="markdown"` the Markdown text."""

    def read(response: httpx.Response) -> ExportOut | str:
        return response.text if format == "markdown" else ExportOut.model_validate(response.json())

    return Call("GET", "/v1/export", read, idempotent=True, params={"format": format})


@checked
def admin_status() -> Call[AdminStatus]:
    """`GET /v1/admin/status` (admins and operators): dependencies, backlogs, budget use."""
    return _get("/v1/admin/status", AdminStatus)
