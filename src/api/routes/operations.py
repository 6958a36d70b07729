"""For operators: the company's status (admins and operators) and Prometheus metrics (no auth)."""

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from ..dependencies import Anyone, Operations
from ..examples import METRICS
from ..middleware import JsonRoute
from ..models import AdminStatus
from ..reference import answers

router = APIRouter(route_class=JsonRoute, tags=["operations"])


@router.get("/v1/admin/status", summary="The company's status", response_model=AdminStatus, responses=answers(None, 403))
def admin_status(who: Anyone, operations: Operations) -> Any:
    """Dependencies, quarantined events, backlogs (inbox, Hindsight sync, purge, insights, projector
    lag) and today's budget use. Admins and operators only; never any memory text.
    """
    return operations.admin_status(who)


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}, "example": METRICS}}}})
def metrics(operations: Operations) -> PlainTextResponse:
    """Counts only, never a company's name or any text: recalls, degraded recalls, backlogs, projector
    lag, model calls and their failures. No token needed.
    """
    return PlainTextResponse(operations.metrics(), media_type="text/plain; version=0.0.4")
