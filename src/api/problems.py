"""Every error leaves as application/problem+json with a `code`; never with personal text."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from domain.errors import DomainError

log = logging.getLogger("engram.api")

_HTTP_CODES = {400: "malformed_json", 404: "not_found", 405: "method_not_allowed", 413: "body_too_large", 415: "unsupported_media_type"}


def problem(status: int, code: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": f"https://engram.dev/problems/{code}", "title": title, "status": status,
            "detail": detail, "code": code, **extra}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc if p != "body") or "body"


def install(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
        return problem(exc.status, exc.code, exc.title, exc.detail)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return problem(400, "malformed_json", "Malformed JSON", "the request body is not valid JSON")
        # Only field names and pydantic's messages: never the submitted values.
        fields = [{"field": _field(tuple(e.get("loc", ()))), "message": e.get("msg", "")} for e in errors]
        if any(f["field"] == "body" for f in fields) and any(e.get("type") == "missing" for e in errors):
            return problem(400, "missing_body", "Missing body", "a JSON body is required")
        detail = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
        if any(e.get("type") == "invalid_time" for e in errors):
            return problem(422, "invalid_time", "Time is not valid", detail, errors=fields)
        return problem(422, "validation_error", "Request is not valid", detail, errors=fields)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return problem(exc.status_code, code, str(exc.detail), str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error: %s", type(exc).__name__)
        return problem(500, "internal_error", "Internal error", "the server could not complete the request")
