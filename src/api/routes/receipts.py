"""Capture: messages handed over for background learning, and each one's state."""

from typing import Any

from fastapi import APIRouter

from engram.contract.requests import ReceiptBatchIn, ReceiptIn
from engram.contract.responses import ReceiptBatch, ReceiptState

from ..dependencies import Learning, Who
from ..middleware import JsonRoute, written
from ..paths import PathId
from ..reference import answers

router = APIRouter(route_class=JsonRoute, tags=["capture"])


def _message(body: ReceiptIn) -> dict[str, Any]:
    return {"receipt_id": body.receipt_id, "author": body.author, "kind": body.kind, "text": body.text,
            "occurred_at": body.occurred_at, "source": body.source.model_dump(), "visibility": body.visibility,
            "team": body.team}


@router.post("/v1/receipts", summary="Hand over messages for learning",
             status_code=202, response_model=ReceiptState | ReceiptBatch,
             response_description="Queued or ignored: one receipt's state, or `items` for a whole conversation",
             responses=answers(None, 403))
def receive(body: ReceiptBatchIn | ReceiptIn, who: Who, learning: Learning) -> Any:
    """One message, or a whole conversation as `{"messages": [...]}` (up to 100, stored together or not
    at all). Each is idempotent by `receipt_id`: sending it again answers its state. Learning runs in the
    background within the company's daily budgets; follow a receipt with `GET /v1/receipts/{receipt_id}`.
    Messages that are not the person's own words, or arrive while learning is paused, are `ignored` with a
    `reason`.
    """
    if isinstance(body, ReceiptBatchIn):
        return written(learning.receive_many(who, [_message(m) for m in body.messages]), status_code=202)
    return written(learning.receive(who, **_message(body)), status_code=202)


@router.get("/v1/receipts/{receipt_id}", summary="Follow a receipt", response_model=ReceiptState, responses=answers(None, 404))
def receipt_status(receipt_id: PathId, who: Who, learning: Learning) -> Any:
    """`queued`, `done` (with the candidates learned from it), `ignored` or `failed` (with `reason`),
    the `attempts` made and the `last_error`'s code. Never the message's text.
    """
    return learning.status(who, receipt_id)
