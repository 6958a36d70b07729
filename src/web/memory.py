"""The person's page, `/memory`: what Engram holds about the signed-in person, and their controls.

Each page calls the service the matching JSON route calls (`engram.api.routes`), with the same caller,
so what a page shows is exactly what the API answers this person, and every change goes through the
same command. Forms post here and redirect (303) to a page that shows the result.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, Field, ValidationError

from engram.api.dependencies import Forgetting, Governance, Insights, Memories
from engram.api.exports import to_markdown
from engram.api.paths import PathId
from engram.contract.requests import ConfirmIn, CorrectIn

from .language import N_
from .pages import PageRoute, redirect, render, words
from .session import Admitted

router = APIRouter(route_class=PageRoute, include_in_schema=False)

PAGE_SIZE = 20

# What a redirect after a form says happened: fixed words, never the person's text.
DONE = {
    "confirmed": N_("Confirmed: bots may use this memory from now on."),
    "rejected": N_("Rejected: the candidate will never be used, and its text is being purged."),
    "bulk_confirmed": N_("Confirmed the candidates you chose (sensitive ones wait for you one by one)."),
    "bulk_rejected": N_("Rejected the candidates you chose: they will never be used, and their text is being purged."),
    "insight_confirmed": N_("Insight confirmed."),
    "insight_rejected": N_("Insight rejected: it will not be proposed again from the same memories."),
    "corrected": N_("Corrected: the new text is the answer from its valid time; the old one stays in the history."),
    "settings": N_("Your controls are saved."),
}


def _done(request: Request, done: str | None) -> str | None:
    return words(request, DONE[done]) if done in DONE else None


Model = TypeVar("Model", bound=BaseModel)


def _checked(model: type[Model], fields: dict[str, Any]) -> Model:
    """A form's fields checked by the API's own request model: the same rules, the same limits."""
    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


def _text(value: str) -> str:
    return value.replace("\r\n", "\n")  # a browser sends a textarea's line breaks as CRLF


def _utc(value: str) -> str | None:
    """A `datetime-local` field, read as UTC (the form says so), as RFC 3339 with its offset."""
    value = value.strip()
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC).isoformat()
    except ValueError:
        return value  # the request model refuses it with the API's own message


# -- the overview ----------------------------------------------------------------------------------


@router.get("/memory")
def memory_page(
    request: Request, who: Admitted, memories: Memories, insights: Insights, governance: Governance,
    forgetting: Forgetting,
    q: Annotated[str | None, Query(max_length=1024)] = None,
    tag: Annotated[str | None, Query(max_length=64)] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    done: str | None = None,
) -> Response:
    q = (q or "").strip() or None
    tag = (tag or "").strip() or None
    listing = memories.list_memories(who, q=q, limit=PAGE_SIZE, cursor=cursor, tags=[tag] if tag else None)
    return render(
        request, "memory/index.html",
        candidates=memories.candidates(who).items,
        proposed=insights.list_insights(who, status="proposed").items,
        confirmed_insights=insights.list_insights(who, status="confirmed").items,
        memories=listing.items, next_cursor=listing.next_cursor, q=q, tag=tag, cursor=cursor,
        settings=governance.get_settings(who),
        forgets=forgetting.list_forgets(who, limit=5, cursor=None).items,
        done=_done(request, done),
    )


# -- the review queue ------------------------------------------------------------------------------


MOST_AT_ONCE = 200  # candidates one bulk decision may name


@router.post("/memory/candidates/bulk")
def decide_candidates(
    request: Request, who: Admitted, memories: Memories,
    decision: Annotated[Literal["confirm", "reject"], Form()],
    ids: Annotated[list[Annotated[str, Field(max_length=200)]], Form(max_length=MOST_AT_ONCE)] = [],  # noqa: B006
) -> Response:
    """Confirm or reject the ticked candidates, each by the same command as one at a time. A sensitive
    one is never confirmed in bulk (it needs its own acknowledgement); one handled meanwhile elsewhere
    (confirmed, rejected, expired, forgotten) is left as it is."""
    pending = {c.id: c for c in memories.candidates(who).items}
    for memory_id in dict.fromkeys(ids):
        candidate = pending.get(memory_id)
        if candidate is None or (decision == "confirm" and candidate.review == "sensitive"):
            continue
        if decision == "confirm":
            memories.confirm(who, memory_id, text=None, acknowledge_sensitive=False)
        else:
            memories.reject(who, memory_id)
    return redirect(request, "/memory", done=f"bulk_{decision}ed")


@router.post("/memory/candidates/{memory_id}/confirm")
def confirm_candidate(
    request: Request, memory_id: PathId, who: Admitted, memories: Memories,
    text: Annotated[str, Form()] = "", original: Annotated[str, Form()] = "",
    acknowledge_sensitive: Annotated[bool, Form()] = False,
) -> Response:
    edited = _text(text) if _text(text) != _text(original) else None  # unchanged: confirmed as proposed
    body = _checked(ConfirmIn, {"text": edited, "acknowledge_sensitive": acknowledge_sensitive})
    memories.confirm(who, memory_id, text=body.text, acknowledge_sensitive=body.acknowledge_sensitive)
    return redirect(request, "/memory", done="confirmed")


@router.post("/memory/candidates/{memory_id}/reject")
def reject_candidate(request: Request, memory_id: PathId, who: Admitted, memories: Memories) -> Response:
    memories.reject(who, memory_id)
    return redirect(request, "/memory", done="rejected")


@router.post("/memory/insights/{insight_id}/{decision}")
def decide_insight(request: Request, insight_id: PathId, decision: Literal["confirm", "reject"], who: Admitted,
                   insights: Insights) -> Response:
    (insights.confirm if decision == "confirm" else insights.reject)(who, insight_id)
    return redirect(request, "/memory", done=f"insight_{decision}ed")


# -- one memory ------------------------------------------------------------------------------------


@router.get("/memory/m/{memory_id}")
def memory_detail(request: Request, memory_id: PathId, who: Admitted, memories: Memories,
                  done: str | None = None) -> Response:
    memory = memories.get(who, memory_id)  # another person's memory: the same 404 as an unknown id
    history = memories.history(who, memory_id).events
    return render(request, "memory/detail.html", memory=memory, history=history, done=_done(request, done))


@router.post("/memory/m/{memory_id}/correct")
def correct_memory(
    request: Request, memory_id: PathId, who: Admitted, memories: Memories,
    text: Annotated[str, Form()] = "", valid_from: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "", acknowledge_sensitive: Annotated[bool, Form()] = False,
) -> Response:
    body = _checked(CorrectIn, {"text": _text(text), "valid_from": _utc(valid_from),
                                "reason": _text(reason).strip() or None, "acknowledge_sensitive": acknowledge_sensitive})
    memories.correct(who, memory_id, text=body.text, valid_from=body.valid_from, valid_to=body.valid_to,
                     reason=body.reason, acknowledge_sensitive=body.acknowledge_sensitive)
    return redirect(request, f"/memory/m/{memory_id}", done="corrected")


@router.post("/memory/m/{memory_id}/forget")
def forget_memory(request: Request, memory_id: PathId, who: Admitted, memories: Memories) -> Response:
    forget = memories.forget(who, memory_id)
    return redirect(request, f"/memory/forgets/{forget.forget_id}")


# -- forgetting ------------------------------------------------------------------------------------


@router.get("/memory/forgets/{forget_id}")
def forget_status(request: Request, forget_id: PathId, who: Admitted, forgetting: Forgetting) -> Response:
    forget = forgetting.status(who, forget_id).model_dump(by_alias=True, exclude_unset=True)  # copies by "copy"
    return render(request, "memory/forget_status.html", forget=forget)


@router.get("/memory/forget-everything")
def forget_everything_form(request: Request, who: Admitted) -> Response:
    return render(request, "memory/forget_everything.html")


@router.post("/memory/forget-everything")
def forget_everything(request: Request, who: Admitted, forgetting: Forgetting,
                      confirm: Annotated[bool, Form()] = False) -> Response:
    if not confirm:  # the confirmation step: nothing happens without the tick
        return render(request, "memory/forget_everything.html", status_code=422, missing_confirmation=True)
    forget = forgetting.forget_me(who)
    return redirect(request, f"/memory/forgets/{forget.forget_id}")


# -- controls and export ---------------------------------------------------------------------------


@router.post("/memory/settings")
def save_settings(request: Request, who: Admitted, governance: Governance,
                  learning_paused: Annotated[bool, Form()] = False,
                  use_paused: Annotated[bool, Form()] = False) -> Response:
    governance.put_settings(who, learning_paused=learning_paused, use_paused=use_paused)
    return redirect(request, "/memory", done="settings")


@router.get("/memory/export")
def export(who: Admitted, memories: Memories, insights: Insights,
           format: Literal["json", "markdown"] = "json") -> Response:
    """The same document as `GET /v1/export`, as a file to keep."""
    data = memories.export(who, insights.list_insights(who))
    if format == "markdown":
        return PlainTextResponse(to_markdown(data), media_type="text/markdown; charset=utf-8",
                                 headers={"Content-Disposition": 'attachment; filename="engram-memories.md"',
                                          "Cache-Control": "no-store"})
    body = data.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(body, media_type="application/json",
                    headers={"Content-Disposition": 'attachment; filename="engram-memories.json"',
                             "Cache-Control": "no-store"})
