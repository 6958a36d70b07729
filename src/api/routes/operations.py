"""For operators: the company's status (admins and operators) and Prometheus metrics (no auth)."""

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from ..dependencies import Anyone, Operations
from ..middleware import JsonRoute
from ..models import AdminStatus
from ..reference import answers

router = APIRouter(route_class=JsonRoute, tags=["operations"])


@router.get("/v1/admin/status", response_model=AdminStatus, responses=answers(None, 403))
def admin_status(who: Anyone, operations: Operations) -> Any:
    return operations.admin_status(who)


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(operations: Operations) -> PlainTextResponse:
    return PlainTextResponse(operations.metrics(), media_type="text/plain; version=0.0.4")
