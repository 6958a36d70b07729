"""The person's page, `/memory`: what Engram holds about the signed-in person, and their controls.

Each page calls the service the matching JSON route calls (`engram.api.routes`), with the same caller:
what the page shows is exactly what the API would answer this person.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .pages import PageRoute, render
from .session import Admitted

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/memory")
def memory_page(request: Request, who: Admitted) -> Response:
    return render(request, "memory/index.html")
