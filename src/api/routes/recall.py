"""Recall: the hot path for bots and the person."""

from typing import Any

from fastapi import APIRouter

from engram.contract.requests import RecallIn
from engram.contract.responses import RecallOut

from ..dependencies import Anyone, Recall
from ..middleware import JsonRoute

router = APIRouter(route_class=JsonRoute, tags=["recall"])


@router.post("/v1/recall", summary="Recall memories for a question", response_model=RecallOut)
def recall(body: RecallIn, who: Anyone, recall: Recall) -> Any:
    """The confirmed memories (and insights) this caller may use right now, best first, each with its
    evidence and valid time, within `max_bytes` of text (a longer text is cut and marked `truncated`).
    `as_of` answers as at an earlier time; `tags` keeps items with every tag given. `degraded: true` when
    the semantic index did not answer in time and the SQL ranking answered alone.
    """
    return recall.recall(who, query=body.query, as_of=body.as_of, max_bytes=body.max_bytes, limit=body.limit,
                         tags=body.tags)
