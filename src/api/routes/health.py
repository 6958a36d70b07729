"""Probes. Liveness never touches the database (async: not even a worker thread), so an outage
cannot fail it; readiness asks the database."""

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from engram.contract.admin import Health

from .. import problems
from ..dependencies import DatabaseAvailability
from ..middleware import JsonRoute
from ..reference import answers

router = APIRouter(route_class=JsonRoute, tags=["health"])


@router.get("/healthz", summary="The process runs", response_model=Health)
async def healthz() -> dict[str, str]:
    """Always 200 while the process runs; never touches the database."""
    return {"status": "ok"}


@router.get("/livez", summary="The process runs", response_model=Health)
async def livez() -> dict[str, str]:
    """Always 200 while the process runs; never touches the database."""
    return {"status": "ok"}


@router.get("/readyz", summary="Ready to serve", response_model=Health, responses=answers(None, 503))
async def readyz(availability: DatabaseAvailability) -> Any:
    """200 when the database answers, else 503 `unavailable` with `Retry-After`."""
    if availability.up and await run_in_threadpool(availability.ready):
        return {"status": "ready"}
    return problems.unavailable()
