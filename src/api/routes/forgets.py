"""Forgetting: one memory, many at once, a whole account; and the proof of each copy's purge (ADR 0015)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ..dependencies import Forgetting, Memories, Who
from ..middleware import JsonRoute
from ..models import ForgetAccepted, ForgetList, ForgetMany, ForgetStatus
from ..reference import answers
from ..schemas import ForgetManyIn, PathId

router = APIRouter(route_class=JsonRoute, tags=["forgetting"])


@router.post("/v1/memories/forget", status_code=202, response_model=ForgetMany,
             responses=answers(None, 403, 404, 409))
def forget_many(body: ForgetManyIn, who: Who, forgetting: Forgetting) -> Any:
    return forgetting.forget_many(who, ids=body.ids, source_id=body.source_id)


@router.post("/v1/memories/{memory_id}/forget", status_code=202, response_model=ForgetAccepted,
             responses=answers(None, 403, 404, 409))
def forget(memory_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.forget(who, memory_id)


@router.post("/v1/me/forget", status_code=202, response_model=ForgetAccepted, responses=answers(None, 403))
def forget_me(who: Who, forgetting: Forgetting) -> Any:
    return forgetting.forget_me(who)


@router.get("/v1/forgets", response_model=ForgetList, responses=answers(None, 400))
def list_forgets(
    who: Who, forgetting: Forgetting,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Any:
    return forgetting.list_forgets(who, limit=limit, cursor=cursor)


@router.get("/v1/forgets/{forget_id}", response_model=ForgetStatus, responses=answers(None, 404))
def forget_status(forget_id: PathId, who: Who, forgetting: Forgetting) -> Any:
    return forgetting.status(who, forget_id)
