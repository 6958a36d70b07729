"""Every error leaves as application/problem+json with a `code`; never with personal text."""

from __future__ import annotations

import json
import logging
import typing
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from engram.adapters.availability import RETRY_AFTER_SECONDS, UNAVAILABLE_ERRORS, DatabaseUnavailable
from engram.contract.examples import ARGUMENTS
from engram.domain.errors import DomainError, RateLimited

log = logging.getLogger("engram.api")

_HTTP_CODES = {400: "malformed_json", 404: "not_found", 405: "method_not_allowed", 413: "body_too_large",
               415: "unsupported_media_type"}


def problem(status: int, code: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": f"https://engram.dev/problems/{code}", "title": title, "status": status,
            "detail": detail, "code": code, **extra}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers)


def of(exc: DomainError) -> JSONResponse:
    """A refusal as its problem: a 401 with its `reason`, a rate limit with its `Retry-After`."""
    response = problem(exc.status, exc.code, exc.title, exc.detail, **({"reason": exc.reason} if exc.reason else {}))
    if isinstance(exc, RateLimited):  # when to try again, in seconds
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def unavailable(detail: str = DatabaseUnavailable.detail) -> JSONResponse:
    """503 `unavailable`: the database is away or too slow; the client may retry after the header's seconds."""
    response = problem(503, "unavailable", "Service unavailable", detail)
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class FieldError(BaseModel):
    field: str
    message: str
    example: Any = Field(default=None, description="a valid value of the field, where the reference has one")


class Problem(BaseModel):
    """RFC 9457 problem details, as every error response carries them (application/problem+json)."""

    model_config = ConfigDict(title="Problem", json_schema_extra={"additionalProperties": True})
    type: str = Field(description="a URI naming the problem type", examples=["https://engram.dev/problems/not_found"])
    title: str
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="what went wrong; never the submitted personal text")
    code: str = Field(description="a stable code a program can act on", examples=["not_found"])
    errors: list[FieldError] | None = Field(default=None, description="for validation errors: field, message and a valid example")


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """The methods some route accepts on this request's path (the body of an `Allow` header).

    Asked of the router as a request with each method would be, so routes included from routers
    count like the app's own."""
    routes = request.app.router.routes
    return [method for method in _METHODS
            if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)]


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc if p != "body") or "body"


_NONE = object()


def _walk(document: Any, parts: tuple[Any, ...]) -> Any:
    for part in parts:
        if isinstance(part, int) and isinstance(document, list) and document:
            document = document[0]
        elif isinstance(part, str) and isinstance(document, dict) and part in document:
            document = document[part]
        elif isinstance(part, str) and (part[:1].isupper() or "[" in part):
            continue  # a union's member or a validator's name in the location: not a field
        else:
            return _NONE
    return document


def example_of(request: Request, loc: tuple[Any, ...]) -> Any:
    """A valid value for the body field at `loc`, from the route's own models' examples; never from
    the request. `_NONE` when there is none to show."""
    named = [p for p in loc if isinstance(p, str) and p != "body"]
    if loc[:1] != ("body",) or not named:
        return _NONE
    if named[-1] in ARGUMENTS and loc[-1] == named[-1]:
        return ARGUMENTS[named[-1]]
    body = getattr(request.scope.get("route"), "body_field", None)
    annotation = getattr(getattr(body, "field_info", None), "annotation", None)
    for model in typing.get_args(annotation) or (annotation,):
        extra = getattr(model, "model_config", {}).get("json_schema_extra")
        examples = extra.get("examples") if isinstance(extra, dict) else None
        if examples:
            found = _walk(examples[0], loc[1:])
            if found is not _NONE:
                return found
    return _NONE


def install(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
        return of(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return problem(400, "malformed_json", "Malformed JSON", "the request body is not valid JSON")
        # Only field names, pydantic's messages and our own examples: never the submitted values.
        fields: list[dict[str, Any]] = []
        for e in errors:
            loc = tuple(e.get("loc", ()))
            field: dict[str, Any] = {"field": _field(loc), "message": e.get("msg", "")}
            example = example_of(request, loc)
            if example is not _NONE:
                field["example"] = example
            fields.append(field)
        if any(f["field"] == "body" for f in fields) and any(e.get("type") == "missing" for e in errors):
            return problem(400, "missing_body", "Missing body", "a JSON body is required")
        detail = "; ".join(f"{f['field']}: {f['message']}" + (
            f" (for example {json.dumps(f['example'], ensure_ascii=False)})" if "example" in f else "")
            for f in fields)
        if any(e.get("type") == "invalid_time" for e in errors):
            return problem(422, "invalid_time", "Time is not valid", detail, errors=fields)
        return problem(422, "validation_error", "Request is not valid", detail, errors=fields)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        response = problem(exc.status_code, code, str(exc.detail), str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        if exc.status_code == 405:  # every method of every route on this path, not only the first route's
            response.headers["Allow"] = ", ".join(allowed_methods(request)) or response.headers.get("Allow", "")
        return response

    async def database_error(_: Request, exc: Exception) -> JSONResponse:
        # No log line per request: the availability tracker logs the outage once. Never the driver's message.
        return unavailable(exc.detail if isinstance(exc, DatabaseUnavailable) else DatabaseUnavailable.detail)

    for database_exception in UNAVAILABLE_ERRORS:
        app.add_exception_handler(cast(type[Exception], database_exception), database_error)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error: %s", type(exc).__name__)
        return problem(500, "internal_error", "Internal error", "the server could not complete the request")
