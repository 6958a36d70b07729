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

from . import language
from .language import N_, translated
from .session import (
    CSRF_FIELD,
    TOKEN_PARAMETER,
    SignedInByLink,
    SwitchAsked,
    csrf_token,
    keep_nonce,
    require_csrf,
    start_session,
)

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

HOME = "/memory"

# The services' refusals in words for people, by code; any other keeps its own detail in English (never
# personal text) and is said in general words in another language.
PLAIN_WORDS = {
    "not_found": N_("There is nothing here, or it is not yours to see."),
    "sensitive_ack_required": N_("This text looks sensitive (health, money, identity or someone else's personal data). "
                                 "Go back, tick the box saying you understand, and send it again."),
    "csrf_refused": N_("The form was not sent from this page, or the page is too old. Reload the page and try again."),
    "engram_off": N_("Engram is switched off for your company at the moment: there is nothing to show or change here."),
    "person_only": N_("Only you review what your bots may use: a bot cannot confirm, reject or edit it."),
    "text_too_large": N_("The text is too long. Shorten it and send it again."),
    "invalid_text": N_("The text cannot be kept as it is: it is empty or holds characters that are not text. "
                       "Check it and send it again."),
    "secret_refused": N_("The text looks like a secret (a password, key or token), so it was not stored."),
    "invalid_time": N_("The time is not valid. Give a date and time between the years 1900 and 2200."),
    "invalid_valid_time": N_("The valid time is not valid: its end must come after its start."),
    "invalid_tags": N_("A tag is not valid: each is a short word or phrase of printable characters."),
    "invalid_cursor": N_("That page of older memories is no longer there. Start again from the first page."),
    "memory_forgotten": N_("This memory was forgotten: nothing can change it any more."),
    "not_confirmed": N_("Only a confirmed memory can be corrected."),
    "not_a_candidate": N_("This candidate is no longer waiting for review: it was confirmed, rejected or expired meanwhile."),
    "conflict": N_("The memory changed while this was being saved, and nothing was changed. Reload the page and try again."),
    "source_revoked": N_("The source of this was revoked: nothing from it is remembered."),
    "insight_not_proposed": N_("This insight is no longer waiting for review."),
    "insight_invalidated": N_("A memory this insight rests on was forgotten, corrected or revoked, so it cannot be "
                              "confirmed."),
    "person_suspended": N_("An administrator of your company suspended your account: nothing can be shown or "
                           "changed until they resume it. Your memories are kept."),
    "rate_limited": N_("Too many requests in a short time. Wait a few seconds and try again."),
}
# The titles of those refusals (the services' own words), and the general words for any other.
TITLES = (N_("Not found"), N_("Sensitive content needs acknowledgement"), N_("This form cannot be accepted"),
          N_("Engram is off for this company"), N_("Only the person may review this"), N_("Text is too large"),
          N_("Text is not valid"), N_("Secrets are never stored"), N_("Time is not valid"),
          N_("Valid time is not valid"), N_("Tags are not valid"), N_("Cursor is not valid"),
          N_("The memory was forgotten"), N_("The memory is not confirmed"), N_("Not a pending candidate"),
          N_("Changed concurrently; read it again and retry"), N_("The source was revoked"),
          N_("Insight is not waiting for review"), N_("Insight rests on evidence no longer in use"), N_("Forbidden"),
          N_("Person suspended"), N_("Too many requests"))
REFUSED, REFUSED_WORDS = N_("Request refused"), N_("Engram did not accept this request. Go back, check what you sent "
                                                   "and try again.")
NOT_VALID_TOKEN = N_("That token is not valid or has expired.")

ASSETS = {"engram.css": "text/css; charset=utf-8", "forget-status.js": "text/javascript; charset=utf-8"}


def href(request: Request, path: str, **query: Any) -> str:
    """A path of this service as the browser reaches it (behind a proxy's root path too)."""
    kept = {k: v for k, v in query.items() if v not in (None, "", [])}
    root = request.scope.get("root_path", "").rstrip("/")
    return f"{root}{path}" + (f"?{urlencode(kept, doseq=True)}" if kept else "")


def _iso(value: Any) -> str:
    if value is None or value == "":
        return ""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _templates(lang: str) -> Environment:
    """The templates in one language: `_()` and `ngettext()` give its words, `when` its dates."""
    templates = Environment(loader=PackageLoader("engram.web", "templates"), autoescape=select_autoescape(["html"]),
                            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.i18n"])
    templates.install_gettext_translations(language.catalogue(lang), newstyle=True)  # type: ignore[attr-defined]
    templates.filters["when"] = lambda value: language.when(value, lang)
    templates.filters["iso"] = _iso
    return templates


TEMPLATES = {lang: _templates(lang) for lang in language.LANGUAGES}


def _here(request: Request) -> str:
    """Where the language switch comes back to: this page (without a sign-in token), or home after a form."""
    if request.method != "GET":
        return HOME
    query = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_PARAMETER]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def render(request: Request, template: str, *, status_code: int = 200, in_language: str | None = None,
           switch_back: str | None = None, **context: Any) -> HTMLResponse:
    """A page: the template with what every page has (the caller, the CSRF field, links), in the person's
    language (or `in_language`, which offers no switch), and the headers. The language switch comes back to
    this page, or to `switch_back`."""
    token = csrf_token(request)
    page_language = in_language or language.of(request)
    html = TEMPLATES[page_language].get_template(template).render(
        caller=getattr(request.state, "web_caller", None),
        signed_in_by_cookie=getattr(request.state, "web_auth", None) == "cookie",
        csrf_field=Markup('<input type="hidden" name="{}" value="{}">').format(CSRF_FIELD, token),
        href=lambda path, **query: href(request, path, **query),
        asset=lambda name: href(request, f"/web/assets/{name}"),
        current_path=request.url.path,
        language=page_language,
        language_switch=None if in_language else switch_back or _here(request),
        **context,
    )
    response = HTMLResponse(html, status_code=status_code, headers=PAGE_HEADERS)
    keep_nonce(request, response)
    return response


def words(request: Request, message: str) -> str:
    """A message of the code (marked with `N_`) in the page's language."""
    return translated(language.of(request), message) or message


def redirect(request: Request, path: str, **query: Any) -> RedirectResponse:
    """After a form: see the result with a GET (303), so a reload never posts twice."""
    return RedirectResponse(href(request, path, **query), status_code=303, headers=PAGE_HEADERS)


def sign_in_page(request: Request, *, status_code: int = 401, message: str | None = None,
                 next_path: str | None = None) -> HTMLResponse:
    response = render(request, "sign_in.html", status_code=status_code, message=message and words(request, message),
                      next_path=next_path or request.url.path, signed_out="signed_out" in request.query_params)
    if status_code == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def error_page(request: Request, status_code: int, title: str, detail: str) -> HTMLResponse:
    """The error page, its title and detail in the page's language; where the catalogue has not their words,
    the general words of a refusal (English keeps them as they are)."""
    page_language = language.of(request)
    title = translated(page_language, title) or translated(page_language, REFUSED) or title
    detail = translated(page_language, detail) or translated(page_language, REFUSED_WORDS) or detail
    # the switch goes home: an error page never repeats the address asked for (a 404 tells nothing apart)
    return render(request, "error.html", status_code=status_code, switch_back=HOME, title=title, detail=detail)


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
            except SwitchAsked as ask:
                request.state.web_caller = ask.current
                return render(request, "switch.html", current=ask.current.person, other=ask.other.person,
                              token=ask.token, next_path=_here(request))
            except UNAVAILABLE_ERRORS:  # never the driver's message
                response = error_page(request, 503, N_("Not available right now"),
                                      N_("Engram cannot reach its database at the moment. Try again in a few seconds."))
                response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
                return response
            except Unauthenticated as exc:
                message = None if exc.code == "unauthenticated" else NOT_VALID_TOKEN
                return sign_in_page(request, message=message)
            except DomainError as exc:  # its detail never holds personal text
                if exc.status == 401:  # a revoked token: sign in again
                    return sign_in_page(request, message=NOT_VALID_TOKEN)
                return error_page(request, exc.status, exc.title, PLAIN_WORDS.get(exc.code, exc.detail))
            except RequestValidationError:
                return error_page(request, 422, N_("Not a valid request"),
                                  N_("Some of what was sent is not valid. Go back, check the form and try again."))
            except HTTPException as exc:
                return error_page(request, exc.status_code, str(exc.detail), str(exc.detail))
            except Exception as exc:  # noqa: BLE001  (as the API's handler: its type only, never its message)
                log.error("unhandled error on a page: %s", type(exc).__name__)
                return error_page(request, 500, N_("Something went wrong"),
                                  N_("The page could not be shown. Try again; if it keeps happening, tell whoever runs "
                                     "Engram."))

        return page


def asset(name: str) -> Response:
    """A file of the page's look or script, served by this service itself."""
    if name not in ASSETS:
        return Response("Not Found", status_code=404, media_type="text/plain")
    body = (resources.files("engram.web") / "static" / name).read_bytes()
    return Response(body, media_type=ASSETS[name],
                    headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"})
