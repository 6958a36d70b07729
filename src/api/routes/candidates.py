"""The review queue: the person's pending candidates, confirmed or rejected."""

from typing import Any

from fastapi import APIRouter

from ..dependencies import Memories, Who
from ..middleware import JsonRoute
from ..models import CandidateList, MemoryOut, Rejected
from ..reference import STORED_NOT_VISIBLE, answers
from ..schemas import ConfirmIn, PathId

router = APIRouter(route_class=JsonRoute, tags=["review"])


@router.get("/v1/candidates", response_model=CandidateList)
def candidates(who: Who, memories: Memories) -> Any:
    return memories.candidates(who)


@router.post("/v1/candidates/{memory_id}/confirm", response_model=MemoryOut,
             responses=answers({202: (MemoryOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def confirm(memory_id: PathId, who: Who, memories: Memories, body: ConfirmIn | None = None) -> Any:
    body = body or ConfirmIn()
    return memories.confirm(who, memory_id, text=body.text, acknowledge_sensitive=body.acknowledge_sensitive)


@router.post("/v1/candidates/{memory_id}/reject", response_model=Rejected,
             responses=answers({202: (Rejected, STORED_NOT_VISIBLE)}, 403, 404, 409))
def reject(memory_id: PathId, who: Who, memories: Memories) -> Any:
    return memories.reject(who, memory_id)
