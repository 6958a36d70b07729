"""Signing in with a pasted token, signing out, and choosing the pages' language (API.md "Web pages";
ADR 0031)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from engram.api.dependencies import Credentials, Deployment
from engram.api.identity import Unauthenticated
from engram.domain.errors import DomainError

from .language import COOKIE_LIFETIME, LANGUAGE_COOKIE
from .pages import HOME, NOT_VALID_TOKEN, PageRoute, redirect, sign_in_page
from .session import SESSION_COOKIE, end_session, page_caller, start_session

router = APIRouter(route_class=PageRoute, include_in_schema=False)


def local_path(path: str | None) -> str:
    """Where to go after signing in: a path of this service only, never another host."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return HOME
    return path


@router.get("/sign-in")
def sign_in_form(request: Request, next: str | None = None) -> Response:
    return sign_in_page(request, status_code=200, next_path=local_path(next))


@router.post("/sign-in")
def sign_in(request: Request, deployment: Deployment, token: Annotated[str, Form(max_length=8192)] = "",
            next: Annotated[str, Form(max_length=2048)] = HOME) -> Response:
    try:
        page_caller(request, token.strip(), deployment)
    except Unauthenticated:
        return sign_in_page(request, message=NOT_VALID_TOKEN, next_path=local_path(next))
    response = redirect(request, local_path(next))
    start_session(request, response, token.strip())
    return response


@router.post("/sign-out")
def sign_out(request: Request, deployment: Deployment, credentials: Credentials) -> Response:
    """The session's token stops working on the server too, not only in this browser: a copied cookie
    (or the same token in a bot) is refused from now on (401 `token_revoked`)."""
    session = request.cookies.get(SESSION_COOKIE)
    if session:
        try:
            credentials.end_session(page_caller(request, session, deployment))
        except DomainError:  # not a working token already (expired, revoked, suspended): nothing to end
            pass
    response = redirect(request, "/sign-in", signed_out=1)
    end_session(request, response)
    return response


@router.post("/language")
def choose_language(request: Request, lang: Annotated[Literal["en", "zh"], Form()],
                    next: Annotated[str, Form(max_length=8192)] = HOME) -> Response:
    """The person's language for every page, kept in a cookie of its own (any other value: the 422 page,
    which repeats nothing sent); back to the page the switch was on."""
    response = redirect(request, local_path(next))
    response.set_cookie(LANGUAGE_COOKIE, lang, max_age=COOKIE_LIFETIME, path="/", httponly=True, samesite="lax",
                        secure=request.url.scheme == "https")
    return response
