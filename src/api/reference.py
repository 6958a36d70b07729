"""The API's reference: /openapi.json (the routes' response models, completed with the problem
responses every kind of operation has and the bearer scheme), and /docs, an interactive page whose
assets are served here (no other host is contacted). The response models live in `models.py`.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from engram.contract import examples

from .problems import Problem, problem

# The bearer scheme, as a dependency: it marks every operation that takes a token in /openapi.json.
# It never refuses by itself (auto_error=False): identity.caller_from_token decides, with its codes.
BEARER = HTTPBearer(scheme_name="bearer", bearerFormat="JWT", auto_error=False,
                    description="HS256 JWT with `sub`, `company`, `role`, `bot` (for role bot), `entry`, `exp`.")

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

# A write whose effect the readers have not seen within the visibility timeout (consistency.py).
STORED_NOT_VISIBLE = "Stored, not yet visible to every reader: the same document with `visible: false`"

# -- problem responses --------------------------------------------------------------------------

_PROBLEMS = {
    400: "Malformed JSON, a missing body, or a cursor that is not valid",
    401: "Missing, expired, forged or wrongly signed token (`WWW-Authenticate: Bearer`)",
    403: "Not allowed for this role (`forbidden`), or an unregistered bot (`bot_not_registered`)",
    404: "No such object, or not one this token may see",
    409: "Conflicts with the object's state (`source_revoked`, `sensitive_ack_required`, `conflict`, ...)",
    413: "Body over 1 MiB (`body_too_large`), text over the text limit (`text_too_large`), "
         "or a directory over its limit (`directory_too_large`)",
    415: "The body is declared as something other than JSON (`unsupported_media_type`)",
    422: "Invalid input (`validation_error`, `invalid_text`, `invalid_time`, `invalid_scope`, "
         "`secret_refused`, ...)",
    503: "The database is unreachable (`unavailable`, with `Retry-After`)",
}


def problem_response(status: int) -> dict[str, Any]:
    return {"description": _PROBLEMS.get(status, "Problem"),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_REF, "example": examples.problem(status)}}}


def answers(ok: dict[int, type[BaseModel] | tuple[type[BaseModel], str]] | None = None,
            *problems: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: its success models besides its own `response_model` (status -> model
    or (model, description)) and the problems particular to it; those every operation of a kind has
    are added by `install`."""
    out: dict[int | str, dict[str, Any]] = {}
    for status, spec in (ok or {}).items():
        model, description = spec if isinstance(spec, tuple) else (spec, "")
        out[status] = {"model": model, **({"description": description} if description else {})}
    for status in problems:
        out[status] = problem_response(status)
    return out


def _complete(document: dict[str, Any]) -> dict[str, Any]:
    """Problems common to a kind of operation, the Problem schema, and no FastAPI default 422."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    problem_schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in problem_schema.pop("$defs", {}).items():
        schemas[name] = definition
    schemas["Problem"] = problem_schema
    for path, operations in document.get("paths", {}).items():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            common: list[int] = []
            if operation.get("security"):
                common.append(401)
            if "requestBody" in operation:
                common += [400, 413, 415, 422]
            if operation.get("parameters"):
                common.append(422)
            if path.startswith("/v1/"):
                common.append(503)
            for status in common:
                responses.setdefault(str(status), problem_response(status))
            fastapi_422 = responses.get("422", {}).get("content", {}).get("application/json", {})
            if "HTTPValidationError" in str(fastapi_422.get("schema", "")):
                responses["422"] = problem_response(422)
    used = str(document.get("paths", {}))
    for name in ("HTTPValidationError", "ValidationError"):
        if name in schemas and f"/{name}'" not in used:
            del schemas[name]
    return document


def install(app: FastAPI) -> None:
    """Serve /openapi.json with problems and the bearer scheme, and /docs with local assets."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, routes=app.routes,
                                   description="Engram's HTTP API: memory for bots, owned by the people "
                                               "they serve. Every error is application/problem+json.")
            app.openapi_schema = _complete(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    static = resources.files("fastapi_offline") / "static"
    assets = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "favicon.png": "image/png"}
    policy = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
              "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; base-uri 'none'; "
              "form-action 'self'; frame-ancestors 'none'")

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title="Engram API",
            swagger_js_url=f"{root}/docs/assets/swagger-ui-bundle.js",
            swagger_css_url=f"{root}/docs/assets/swagger-ui.css",
            swagger_favicon_url=f"{root}/docs/assets/favicon.png",
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": False, "tryItOutEnabled": False},
        )
        page.headers["Content-Security-Policy"] = policy  # the browser itself refuses any other host
        return page

    @app.get("/docs/assets/{name}", include_in_schema=False)
    def docs_asset(name: str) -> Response:
        if name not in assets:
            return problem(404, "not_found", "Not Found", "Not Found")
        with resources.as_file(static / name) as path:
            return FileResponse(path, media_type=assets[name], headers={"Cache-Control": "public, max-age=86400"})
