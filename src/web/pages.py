"""How a page is answered: a Jinja2 template rendered on the server, with headers that keep the browser
from loading anything from another host, and errors shown as pages instead of problem documents.

Every page route uses `PageRoute`: a state-changing request passes the CSRF check before the route
runs (nothing is written otherwise), `?token=` signs in and redirects, and a refusal of the services
(`DomainError`: 401, 403, 404, 409, ...) becomes a page with the same status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.exceptions import HTTPException

from engram.adapters.availability import RETRY_AFTER_SECONDS, UNAVAILABLE_ERRORS
from engram.api.identity import Unauthenticated
from engram.domain.errors import DomainError

from .session import CSRF_FIELD, TOKEN_PARAMETER, SignedInByLink, csrf_token, keep_nonce, require_csrf, start_session

log = logging.getLogger("engram.web")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Everything from this service; no inline script or style, no other host (the browser enforces it).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",  # personal text: never kept by a shared cache or the back button's disk cache
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}

# The services' refusals in words for people; any other keeps its own detail (never personal text).
PLAIN_WORDS = {
    "not_found": "There is nothing here, or it is not yours to see.",
    "sensitive_ack_required": "This text looks sensitive (health, money, identity or someone else's personal data). "
                              "Go back, tick the box saying you understand, and send it again.",
}

ASSETS = {"engram.css": "text/css; charset=utf-8", "forget-status.js": "text/javascript; charset=utf-8"}


def href(request: Request, path: str, **query: Any) -> str:
    """A path of this service as the browser reaches it (behind a proxy's root path too)."""
    kept = {k: v for k, v in query.items() if v not in (None, "", [])}
    root = request.scope.get("root_path", "").rstrip("/")
    return f"{root}{path}" + (f"?{urlencode(kept, doseq=True)}" if kept else "")


def _when(value: Any) -> str:
    """A time as people read it, with its offset (the page never guesses the reader's time zone)."""
    if value is None or value == "":
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    text = moment.strftime("%Y-%m-%d %H:%M")
    offset = moment.strftime("%z")
    return f"{text} UTC" if offset in ("", "+0000") else f"{text} UTC{offset[:3]}:{offset[3:]}"


def _iso(value: Any) -> str:
    if value is None or value == "":
        return ""
    return value.isoformat() if isinstance(value, datetime) else str(value)


TEMPLATES = Environment(loader=PackageLoader("engram.web", "templates"), autoescape=select_autoescape(["html"]),
                        trim_blocks=True, lstrip_blocks=True)
TEMPLATES.filters["when"] = _when
TEMPLATES.filters["iso"] = _iso


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page: the template with what every page has (the caller, the CSRF field, links), and the headers."""
    token = csrf_token(request)
    html = TEMPLATES.get_template(template).render(
        caller=getattr(request.state, "web_caller", None),
        signed_in_by_cookie=getattr(request.state, "web_auth", None) == "cookie",
        csrf_field=Markup('<input type="hidden" name="{}" value="{}">').format(CSRF_FIELD, token),
        href=lambda path, **query: href(request, path, **query),
        asset=lambda name: href(request, f"/web/assets/{name}"),
        current_path=request.url.path,
        **context,
    )
    response = HTMLResponse(html, status_code=status_code, headers=PAGE_HEADERS)
    keep_nonce(request, response)
    return response


def redirect(request: Request, path: str, **query: Any) -> RedirectResponse:
    """After a form: see the result with a GET (303), so a reload never posts twice."""
    return RedirectResponse(href(request, path, **query), status_code=303, headers=PAGE_HEADERS)


def sign_in_page(request: Request, *, status_code: int = 401, message: str | None = None,
                 next_path: str | None = None) -> HTMLResponse:
    response = render(request, "sign_in.html", status_code=status_code, message=message,
                      next_path=next_path or request.url.path, signed_out="signed_out" in request.query_params)
    if status_code == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def error_page(request: Request, status_code: int, title: str, detail: str) -> HTMLResponse:
    return render(request, "error.html", status_code=status_code, title=title, detail=detail)


def _signed_in_by_link(request: Request, token: str) -> Response:
    """The same page without the token in its address, with the session cookie."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_PARAMETER]
    target = href(request, request.url.path) + (f"?{urlencode(query)}" if query else "")
    response = RedirectResponse(target, status_code=303, headers=PAGE_HEADERS)
    start_session(request, response, token)
    return response


class PageRoute(APIRoute):
    """Every web page: CSRF before any state-changing request, sign-in by link, errors as pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                if request.method not in SAFE_METHODS:
                    await require_csrf(request)
                return await handler(request)
            except SignedInByLink as link:
                return _signed_in_by_link(request, link.token)
            except UNAVAILABLE_ERRORS:  # never the driver's message
                response = error_page(request, 503, "Not available right now",
                                      "Engram cannot reach its database at the moment. Try again in a few seconds.")
                response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
                return response
            except Unauthenticated as exc:
                message = None if exc.code == "unauthenticated" else "That token is not valid or has expired."
                return sign_in_page(request, message=message)
            except DomainError as exc:  # its detail never holds personal text
                return error_page(request, exc.status, exc.title, PLAIN_WORDS.get(exc.code, exc.detail))
            except RequestValidationError:
                return error_page(request, 422, "Not a valid request",
                                  "Some of what was sent is not valid. Go back, check the form and try again.")
            except HTTPException as exc:
                return error_page(request, exc.status_code, str(exc.detail), str(exc.detail))
            except Exception as exc:  # noqa: BLE001  (as the API's handler: its type only, never its message)
                log.error("unhandled error on a page: %s", type(exc).__name__)
                return error_page(request, 500, "Something went wrong",
                                  "The page could not be shown. Try again; if it keeps happening, tell whoever runs "
                                  "Engram.")

        return page


def asset(name: str) -> Response:
    """A file of the page's look or script, served by this service itself."""
    if name not in ASSETS:
        return Response("Not Found", status_code=404, media_type="text/plain")
    body = (resources.files("engram.web") / "static" / name).read_bytes()
    return Response(body, media_type=ASSETS[name],
                    headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"})
