"""The admin page, `/admin`: the company's health, backlogs, model budget and directory, for its
admins and operators. Counts and names of teams, sources, bots and people only: it reads the same
status document as `GET /v1/admin/status`, which never holds memory text (ADR 0031).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from engram.api.dependencies import Governance, Operations
from engram.contract.requests import DirectoryIn
from engram.domain.errors import DomainError

from .charts import Bar, bar_chart
from .language import ENGLISH
from .pages import PageRoute, redirect, render
from .session import SignedInAdmin

router = APIRouter(route_class=PageRoute, include_in_schema=False)

_SPLIT = re.compile(r"[\s,]+")
DEPENDENCY_NAMES = {"database": "Database", "kafka": "Kafka", "llm": "Model (LLM)", "hindsight": "Hindsight"}


def _names(text: Any) -> list[str]:
    """People, teams or sources typed one a line (or separated by commas), in order, each once."""
    seen: dict[str, None] = {}
    for name in _SPLIT.split(str(text or "")):
        if name:
            seen.setdefault(name, None)
    return list(seen)


def _rows(form: FormData, kind: str) -> list[dict[str, str]]:
    """The form's rows of one kind (`teams-0-name`, `teams-0-members`, ...), in their order."""
    rows: dict[int, dict[str, str]] = {}
    for key, value in form.multi_items():
        found = re.fullmatch(rf"{kind}-(\d{{1,6}})-(\w+)", key)
        if found and isinstance(value, str):
            rows.setdefault(int(found.group(1)), {})[found.group(2)] = value
    return [rows[i] for i in sorted(rows)]


def directory_from_form(form: FormData) -> dict[str, Any]:
    """The directory document the form describes: rows without a name, or marked to remove, left out."""
    def kept(kind: str) -> list[dict[str, str]]:
        return [r for r in _rows(form, kind) if r.get("name", "").strip() and not r.get("remove")]

    return {
        "teams": {r["name"].strip(): {"members": _names(r.get("members"))} for r in kept("teams")},
        "sources": {r["name"].strip(): {"team": r.get("team", "").strip(), "members": _names(r.get("members"))}
                    for r in kept("sources")},
        "bots": {r["name"].strip(): {"teams": _names(r.get("teams")), "sources": _names(r.get("sources"))}
                 for r in kept("bots")},
    }


def budget_chart(status: dict[str, Any]) -> str:
    days = status["budget_days"]
    limit = status["budget_today"]["token_limit"]
    bars = [Bar(label=date.fromisoformat(d["day"]).strftime("%d"), value=d["tokens"],
                note=f"{d['day']}: {d['tokens']:,} tokens, {d['calls']:,} calls, {d['failed_calls']:,} failed")
            for d in days]
    first, last = days[0]["day"], days[-1]["day"]
    return bar_chart(f"Model tokens a day, {first} to {last}",
                     f"Tokens charged each day; the daily limit is {limit:,}. The table below has every figure.",
                     bars, limit)


def _page(request: Request, who: Any, operations: Any, governance: Any, *, status_code: int = 200,
          message: str | None = None, directory: dict[str, Any] | None = None) -> Response:
    status = operations.admin_status(who).model_dump(exclude_unset=True)  # the template reads a document
    return render(request, "admin/index.html", status_code=status_code, in_language=ENGLISH,  # admins read English
                  status=status, chart=budget_chart(status),
                  directory=directory if directory is not None else governance.get_directory(who).model_dump(),
                  message=message, saved="saved" in request.query_params, dependency_names=DEPENDENCY_NAMES)


@router.get("/admin")
def admin_page(request: Request, who: SignedInAdmin, operations: Operations, governance: Governance) -> Response:
    return _page(request, who, operations, governance)


@router.post("/admin/directory")
async def save_directory(request: Request, who: SignedInAdmin, operations: Operations,
                         governance: Governance) -> Response:
    document = directory_from_form(await request.form())
    try:
        DirectoryIn.model_validate(document)  # the bounds `PUT /v1/admin/directory` checks, the same way
        await run_in_threadpool(governance.put_directory, who, document)
    except ValidationError as exc:
        status, message = 422, "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    except DomainError as exc:
        status, message = exc.status, exc.detail
    else:
        return redirect(request, "/admin", saved=1)
    # shown again with the form as it was sent, so nothing typed is lost
    return await run_in_threadpool(lambda: _page(request, who, operations, governance, status_code=status,
                                                 message=message, directory=document))
