"""Capture: messages handed over for background learning, and each one's state."""

from typing import Any

from fastapi import APIRouter

from ..dependencies import Learning, Who
from ..middleware import JsonRoute
from ..models import ReceiptBatch, ReceiptState
from ..reference import answers
from ..schemas import PathId, ReceiptBatchIn, ReceiptIn

router = APIRouter(route_class=JsonRoute, tags=["capture"])


def _message(body: ReceiptIn) -> dict[str, Any]:
    return {"receipt_id": body.receipt_id, "author": body.author, "kind": body.kind, "text": body.text,
            "occurred_at": body.occurred_at, "source": body.source.model_dump(), "visibility": body.visibility,
            "team": body.team}


@router.post("/v1/receipts", status_code=202, response_model=ReceiptState | ReceiptBatch,
             response_description="Queued or ignored: one receipt's state, or `items` for a whole conversation",
             responses=answers(None, 403))
def receive(body: ReceiptBatchIn | ReceiptIn, who: Who, learning: Learning) -> Any:
    if isinstance(body, ReceiptBatchIn):
        return learning.receive_many(who, [_message(m) for m in body.messages])
    return learning.receive(who, **_message(body))


@router.get("/v1/receipts/{receipt_id}", response_model=ReceiptState, responses=answers(None, 404))
def receipt_status(receipt_id: PathId, who: Who, learning: Learning) -> Any:
    return learning.status(who, receipt_id)
