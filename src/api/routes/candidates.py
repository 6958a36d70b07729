"""The review queue: the person's pending candidates, confirmed or rejected."""

from typing import Any

from fastapi import APIRouter

from engram.contract.requests import ConfirmIn
from engram.contract.responses import CandidateList, MemoryOut, Rejected

from ..dependencies import Memories, Reviewer, Who
from ..middleware import JsonRoute
from ..paths import PathId
from ..reference import STORED_NOT_VISIBLE, answers

router = APIRouter(route_class=JsonRoute, tags=["review"])


@router.get("/v1/candidates", summary="The review queue", response_model=CandidateList)
def list_candidates(who: Who, memories: Memories) -> Any:
    """Candidate memories learned from the person's messages, waiting for their review, each with the
    exact quote it came from. Unreviewed candidates expire.
    """
    return memories.candidates(who)


@router.post("/v1/candidates/{memory_id}/confirm", summary="Confirm a candidate", response_model=MemoryOut,
             responses=answers({202: (MemoryOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def confirm_candidate(memory_id: PathId, who: Reviewer, memories: Memories, body: ConfirmIn | None = None) -> Any:
    """The candidate becomes a confirmed memory, used by recall from now on. `text` confirms it edited;
    a sensitive candidate needs `acknowledge_sensitive: true` (409 `sensitive_ack_required`). Only the
    person reviews: a bot token gets 403 `person_only`.
    """
    body = body or ConfirmIn()
    return memories.confirm(who, memory_id, text=body.text, acknowledge_sensitive=body.acknowledge_sensitive)


@router.post("/v1/candidates/{memory_id}/reject", summary="Reject a candidate", response_model=Rejected,
             responses=answers({202: (Rejected, STORED_NOT_VISIBLE)}, 403, 404, 409))
def reject_candidate(memory_id: PathId, who: Reviewer, memories: Memories) -> Any:
    """The candidate is never used and its content is purged; `purge_id` follows the purge as a forget
    does.
    """
    return memories.reject(who, memory_id)
