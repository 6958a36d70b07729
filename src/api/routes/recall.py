"""Recall: the hot path for bots and the person."""

from typing import Any

from fastapi import APIRouter

from ..dependencies import Anyone, Recall
from ..middleware import JsonRoute
from ..models import RecallOut
from ..schemas import RecallIn

router = APIRouter(route_class=JsonRoute, tags=["recall"])


@router.post("/v1/recall", response_model=RecallOut)
def recall(body: RecallIn, who: Anyone, recall: Recall) -> Any:
    return recall.recall(who, query=body.query, as_of=body.as_of, max_bytes=body.max_bytes, limit=body.limit,
                         tags=body.tags)
