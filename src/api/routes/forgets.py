"""Forgetting: one memory, many at once, a whole account; and the proof of each copy's purge (ADR 0015)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from engram.contract.requests import ForgetManyIn
from engram.contract.responses import ForgetAccepted, ForgetList, ForgetMany, ForgetStatus

from ..dependencies import Forgetting, Memories, Who
from ..middleware import JsonRoute
from ..paths import PathId
from ..reference import answers

router = APIRouter(route_class=JsonRoute, tags=["forgetting"])


@router.post("/v1/memories/forget", summary="Forget many memories", status_code=202, response_model=ForgetMany,
             responses=answers(None, 403, 404, 409))
def forget_many(body: ForgetManyIn, who: Who, forgetting: Forgetting) -> Any:
    """Either up to 100 memory ids (all or nothing: one unknown id is 404 and nothing is forgotten) or
    every memory of the caller from one `source_id` (`more: true` when some remain: ask again). Each is
    out of use at once; `forget_ids` follow each purge.
    """
    return forgetting.forget_many(who, ids=body.ids, source_id=body.source_id)


@router.post("/v1/memories/{memory_id}/forget", summary="Forget a memory", status_code=202, response_model=ForgetAccepted,
             responses=answers(None, 403, 404, 409))
def forget_memory(memory_id: PathId, who: Who, memories: Memories) -> Any:
    """Stops every use of the memory at once (`status: stopped_using`) and purges each copy in the
    background: the event store, the recall view, the review queue, the receipt inbox, Hindsight and
    backups. Follow `GET /v1/forgets/{forget_id}` until `purge_complete`. Forgetting again answers the
    same forget.
    """
    return memories.forget(who, memory_id)


@router.post("/v1/me/forget", summary="Forget the whole account",
             status_code=202, response_model=ForgetAccepted, responses=answers(None, 403))
def forget_me(who: Who, forgetting: Forgetting) -> Any:
    """Every memory, candidate, insight and receipt payload of the caller in this company: out of use at
    once, purged in the background; follow it with `GET /v1/forgets/{forget_id}`.
    """
    return forgetting.forget_me(who)


@router.get("/v1/forgets", summary="List the person's forgets", response_model=ForgetList, responses=answers(None, 400))
def list_forgets(
    who: Who, forgetting: Forgetting,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Any:
    """The caller's forget requests, newest first, with each copy's purge state; paged like the
    memories.
    """
    return forgetting.list_forgets(who, limit=limit, cursor=cursor)


@router.get("/v1/forgets/{forget_id}", summary="Follow a forget", response_model=ForgetStatus, responses=answers(None, 404))
def forget_status(forget_id: PathId, who: Who, forgetting: Forgetting) -> Any:
    """`stopped_using` from the moment it was asked, `purge_complete` once every copy reported its
    purge; each copy with its state, evidence and time.
    """
    return forgetting.status(who, forget_id)
