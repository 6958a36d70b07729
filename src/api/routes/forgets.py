"""Forgetting a memory, and the proof of each copy's purge."""

from typing import Any

from fastapi import APIRouter

from ..dependencies import Memories, Who
from ..middleware import JsonRoute
from ..models import ForgetAccepted, ForgetStatus
from ..reference import answers
from ..schemas import PathId

router = APIRouter(route_class=JsonRoute, tags=["forgetting"])


@router.post("/v1/memories/{memory_id}/forget", status_code=202, response_model=ForgetAccepted,
             responses=answers(None, 403, 404, 409))
def forget(memory_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.forget(who, memory_id)


@router.get("/v1/forgets/{forget_id}", response_model=ForgetStatus, responses=answers(None, 404))
def forget_status(forget_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.forget_status(who, forget_id)
