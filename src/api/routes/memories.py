"""A person's memories: remember, list, read, links, history, correct, export."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from ..dependencies import Insights, Memories, Who
from ..exports import to_markdown
from ..middleware import JsonRoute, answer
from ..models import CandidateOut, ExportOut, History, LinkList, MemoryList, MemoryOut
from ..reference import STORED_NOT_VISIBLE, answers
from ..schemas import CorrectIn, PathId, RememberIn

router = APIRouter(route_class=JsonRoute, tags=["memories"])


@router.post("/v1/memories", status_code=201, response_model=MemoryOut, response_description="Remembered",
             responses=answers({200: (MemoryOut, "Already remembered from this source: the stored memory"),
                                202: (CandidateOut, "Sensitive: a candidate awaiting review (or stored, not yet visible)")},
                               403, 409))
def remember(body: RememberIn, who: Who, memories: Memories) -> Any:
    memory = memories.remember(
        who, text=body.text, source=body.source.model_dump(), occurred_at=body.occurred_at,
        visibility=body.visibility, team=body.team, valid_from=body.valid_from, valid_to=body.valid_to,
        tags=body.tags,
    )
    if memory["status"] == "pending_review":  # sensitive: a candidate awaiting the person's review
        return answer(CandidateOut, memory, status_code=202)
    if memory.get("existing"):  # the same text from the same message: the first memory, nothing new
        return answer(MemoryOut, memory, status_code=200)
    return memory


@router.get("/v1/memories", response_model=MemoryList, responses=answers(None, 400))
def list_memories(
    who: Who, memories: Memories,
    q: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    status: Annotated[Literal["confirmed", "forgotten", "all"] | None, Query()] = None,
    tags: Annotated[list[str] | None, Query(max_length=16, description="repeat `tags=`: a memory matches when it "
                                                                         "has all of them")] = None,
) -> Any:
    return memories.list_memories(who, q=q, limit=limit, cursor=cursor, status=status, tags=tags)


@router.get("/v1/memories/{memory_id}", response_model=MemoryOut, responses=answers(None, 404))
def get_memory(memory_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.get(who, memory_id)


@router.get("/v1/memories/{memory_id}/links", response_model=LinkList, responses=answers(None, 404))
def links(memory_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.linked(who, memory_id)


@router.get("/v1/memories/{memory_id}/history", response_model=History, responses=answers(None, 404))
def history(memory_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.history(who, memory_id)


@router.post("/v1/memories/{memory_id}/correct", response_model=MemoryOut,
             responses=answers({202: (MemoryOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def correct(memory_id: PathId, body: CorrectIn, who: Who, memories: Memories) -> Any:
    return memories.correct(who, memory_id, text=body.text, valid_from=body.valid_from, valid_to=body.valid_to,
                            reason=body.reason, acknowledge_sensitive=body.acknowledge_sensitive,
                            source=body.source.model_dump() if body.source else None)


@router.get("/v1/export", response_model=ExportOut,
            responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}})
def export(who: Who, memories: Memories, insights: Insights, format: Literal["json", "markdown"] = "json") -> Any:  # noqa: A002
    data = {**memories.export(who), "insights": insights.list_insights(who)["items"]}
    if format == "markdown":
        return PlainTextResponse(to_markdown(data), media_type="text/markdown; charset=utf-8")
    return data
