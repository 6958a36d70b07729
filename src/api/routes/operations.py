"""For operators: the company's status (admins and operators) and Prometheus metrics (no auth)."""

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from engram.contract.admin import AdminStatus
from engram.contract.examples import METRICS

from ..dependencies import Anyone, AppMetrics, Operations
from ..metrics import CONTENT_TYPE
from ..middleware import JsonRoute
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
def metrics(registry: AppMetrics) -> Response:
    """Counts only, never a company's name or any text: requests and their latency by route template
    and status, degraded recalls, backlogs, projector lag, model calls that failed. No token needed;
    answers while the database is away too (`engram_database_up 0`, without what it could not read).
    """
    return Response(registry.exposition(), media_type=CONTENT_TYPE)
