"""A person's memories: remember, list, read, links, history, correct, export."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from engram.contract.examples import EXPORT
from engram.contract.requests import CorrectIn, RememberIn
from engram.contract.responses import CandidateOut, ExportOut, History, LinkList, MemoryList, MemoryOut

from ..dependencies import Insights, Memories, Who
from ..exports import to_markdown
from ..middleware import JsonRoute, written
from ..paths import PathId
from ..reference import STORED_NOT_VISIBLE, answers

router = APIRouter(route_class=JsonRoute, tags=["memories"])
MARKDOWN = to_markdown(ExportOut.model_validate(EXPORT))  # the export example, as people read it


@router.post("/v1/memories", summary="Remember something the person said",
             status_code=201, response_model=MemoryOut, response_description="Remembered",
             responses=answers({200: (MemoryOut, "Already remembered from this source: the stored memory"),
                                202: (CandidateOut, "Sensitive: a candidate awaiting review (or stored, not yet visible)")},
                               403, 409))
def remember(body: RememberIn, who: Who, memories: Memories) -> Any:
    """A confirmed memory from the caller's own words, with the message they came from as evidence.

    The same text from the same person and source again answers 200 with the first memory (nothing new is
    stored). Text a rule finds sensitive (health, money, ...) becomes a candidate awaiting the person's
    review: 202 with `status: pending_review`. A bot must be registered in the company directory (403
    `bot_not_registered`); a revoked source is 409 `source_revoked`; text over the limit is 413
    `text_too_large`; an invalid time (outside 1900-2200 UTC, or without an offset) is 422 `invalid_time`.
    """
    memory = memories.remember(
        who, text=body.text, source=body.source.model_dump(), occurred_at=body.occurred_at,
        visibility=body.visibility, team=body.team, valid_from=body.valid_from, valid_to=body.valid_to,
        tags=body.tags,
    )
    if isinstance(memory, CandidateOut):  # sensitive: a candidate awaiting the person's review
        return written(memory, status_code=202)
    # the same text from the same message: the first memory, nothing new
    return written(memory, status_code=200 if memory.existing else 201)


@router.get("/v1/memories", summary="List the person's memories", response_model=MemoryList, responses=answers(None, 400))
def list_memories(
    who: Who, memories: Memories,
    q: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    status: Annotated[Literal["confirmed", "forgotten", "all"] | None, Query()] = None,
    tags: Annotated[list[str] | None, Query(max_length=16, description="repeat `tags=`: a memory matches when it "
                                                                         "has all of them")] = None,
) -> Any:
    """The caller's own memories, newest first, one page at a time: pass `next_cursor` back as `cursor`
    until it is null. `q` filters by words, `tags` (repeated) keeps memories with every tag given, and
    `status` chooses confirmed (default), forgotten or all.
    """
    return memories.list_memories(who, q=q, limit=limit, cursor=cursor, status=status, tags=tags)


@router.get("/v1/memories/{memory_id}", summary="Read one memory", response_model=MemoryOut, responses=answers(None, 404))
def get_memory(memory_id: PathId, who: Who, memories: Memories) -> Any:
    """One memory with its evidence, valid time and links. 404 for an unknown id and for a memory this
    token may not see (another person's, another company's): the two are not told apart.
    """
    return memories.get(who, memory_id)


@router.get("/v1/memories/{memory_id}/links", summary="The memories linked to one",
            response_model=LinkList, responses=answers(None, 404))
def memory_links(memory_id: PathId, who: Who, memories: Memories) -> Any:
    """Memories mentioned in the same message as this one, active or invalidated; only memories the
    caller may use are listed.
    """
    return memories.linked(who, memory_id)


@router.get("/v1/memories/{memory_id}/history", summary="A memory's history",
            response_model=History, responses=answers(None, 404))
def memory_history(memory_id: PathId, who: Who, memories: Memories) -> Any:
    """Every revision of the memory in order: created, confirmed, corrected (with reason, mode and the
    correction's own evidence), forgotten. Texts are null once it is forgotten.
    """
    return memories.history(who, memory_id)


@router.post("/v1/memories/{memory_id}/correct", summary="Correct a memory", response_model=MemoryOut,
             responses=answers({202: (MemoryOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def correct_memory(memory_id: PathId, body: CorrectIn, who: Who, memories: Memories) -> Any:
    """A new revision that supersedes the current one from `valid_from` (default: now); the old revision
    stays in the history and answers recall `as_of` earlier times. Sensitive new text needs
    `acknowledge_sensitive: true` (409 `sensitive_ack_required`).
    """
    return memories.correct(who, memory_id, text=body.text, valid_from=body.valid_from, valid_to=body.valid_to,
                            reason=body.reason, acknowledge_sensitive=body.acknowledge_sensitive,
                            source=body.source.model_dump() if body.source else None)


@router.get("/v1/export", summary="Export everything the person holds", response_model=ExportOut,
            responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}, "example": MARKDOWN}}}})
def export(who: Who, memories: Memories, insights: Insights, format: Literal["json", "markdown"] = "json") -> Any:
    """Every memory with its full history, and every insight, as JSON or (with `format=markdown`) as a
    Markdown document for people.
    """
    data = memories.export(who, insights.list_insights(who))
    if format == "markdown":
        return PlainTextResponse(to_markdown(data), media_type="text/markdown; charset=utf-8")
    return data
