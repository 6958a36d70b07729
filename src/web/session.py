"""Who is signed in to a page, and the forms they may post (ADR 0031).

A page accepts the API's bearer token in the `Authorization` header, or the session cookie that
`?token=...` (or the sign-in form) sets. The cookie holds the token itself and is checked on every
request by the API's one token decoder: an expired, forged or over-long token is not signed in, and the
cookie lives no longer than the token.

Every form post carries a CSRF token, an HMAC under the token secret of the browser's random nonce
cookie and of its session: another site can neither read it nor compute it. A request authenticated by
its `Authorization` header needs none: a browser never adds that header to a cross-site request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime
from typing import Annotated

import jwt
from fastapi import Depends, Request
from fastapi.responses import Response

from engram.api.dependencies import (
    Deployment,
    Writes,
    bearer_token,
    caller_of,
    require_admin,
    require_admitted,
    token_secret,
)
from engram.api.identity import Unauthenticated
from engram.domain.bot_keys import parse_key
from engram.domain.errors import DomainError
from engram.domain.scope import Caller
from engram.service.settings import Settings

SESSION_COOKIE = "engram_session"
NONCE_COOKIE = "engram_csrf"
CSRF_FIELD = "csrf_token"
TOKEN_PARAMETER = "token"  # GET /memory?token=...: signs in, then the address drops it


class CsrfRefused(DomainError):
    code, status, title = "csrf_refused", 403, "This form cannot be accepted"


class SwitchAsked(Exception):  # not an error: the page asks before another person's session replaces this one
    """`?token=` of another person than the browser's session: nothing changes until the person says so."""

    def __init__(self, token: str, current: Caller, other: Caller) -> None:
        super().__init__("another person's sign-in link")
        self.token, self.current, self.other = token, current, other


class SignedInByLink(Exception):  # not an error: the page answers with a redirect
    """`?token=` was valid: answer with the session cookie and a redirect to the same page without it."""

    def __init__(self, token: str) -> None:
        super().__init__("signed in by link")
        self.token = token


# -- signing in -----------------------------------------------------------------------------------


def _how(request: Request) -> tuple[str | None, str | None]:
    """The token and where it came from: the header first, then the session cookie."""
    header = bearer_token(request)
    if header:
        return header, "header"
    cookie = request.cookies.get(SESSION_COOKIE)
    return (cookie, "cookie") if cookie else (None, None)


def page_caller(request: Request, token: str, deployment: Settings, *, counted: bool = True) -> Caller:
    """A person's token checked as the API checks it; the pages are for people, so a bot key is refused."""
    if parse_key(token) is not None:
        raise Unauthenticated("the pages are for people: sign in with a person's token, not a bot key")
    return caller_of(request, token, deployment, counted=counted)


async def signed_in(request: Request, deployment: Deployment) -> Caller:
    """The caller of a page in every rollout mode; `Unauthenticated` (the sign-in page) otherwise."""
    link = request.query_params.get(TOKEN_PARAMETER) if request.method == "GET" else None
    if link is not None:
        linked = page_caller(request, link.strip(), deployment)  # an expired or forged link is not signed in
        session = request.cookies.get(SESSION_COOKIE)
        if session and session != link.strip():
            try:
                current: Caller | None = page_caller(request, session, deployment, counted=False)  # one request, one count
            except DomainError:  # no session that still works: nobody's to replace
                current = None
            if current is not None and (current.company, current.person) != (linked.company, linked.person):
                raise SwitchAsked(link.strip(), current, linked)  # a link someone else sent replaces nobody silently
        raise SignedInByLink(link.strip())
    token, how = _how(request)
    if token is None:
        raise Unauthenticated("sign in to see this page")
    caller = page_caller(request, token, deployment)
    request.state.web_caller, request.state.web_auth = caller, how
    return caller


SignedIn = Annotated[Caller, Depends(signed_in)]


async def admitted(who: SignedIn, writes: Writes) -> Caller:
    """A person's page: the caller, refused while the company's rollout mode is off (as the API does)."""
    return require_admitted(who, writes)


async def signed_in_admin(who: SignedIn) -> Caller:
    return require_admin(who)


Admitted = Annotated[Caller, Depends(admitted)]
SignedInAdmin = Annotated[Caller, Depends(signed_in_admin)]


def start_session(request: Request, response: Response, token: str) -> None:
    """Set the session cookie (HttpOnly, SameSite=Lax, Secure over https) for as long as the token lives,
    and a fresh CSRF nonce: a new session never inherits the forms of the one before."""
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]  # verified by caller_of before
    lifetime = max(1, int(expires - datetime.now(UTC).timestamp()))
    secure = request.url.scheme == "https"
    response.set_cookie(SESSION_COOKIE, token, max_age=lifetime, path="/", httponly=True, samesite="lax", secure=secure)
    response.set_cookie(NONCE_COOKIE, secrets.token_urlsafe(32), path="/", httponly=True, samesite="lax", secure=secure)


def end_session(request: Request, response: Response) -> None:
    secure = request.url.scheme == "https"
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure)
    response.delete_cookie(NONCE_COOKIE, path="/", httponly=True, samesite="lax", secure=secure)


# -- CSRF -------------------------------------------------------------------------------------------


def _nonce(request: Request) -> str:
    """The browser's nonce, or one chosen for this answer (`keep_nonce` sets its cookie)."""
    nonce = request.cookies.get(NONCE_COOKIE) or getattr(request.state, "new_nonce", None)
    if nonce is None:
        nonce = request.state.new_nonce = secrets.token_urlsafe(32)
    return nonce


def _expected(request: Request, nonce: str) -> str:
    session = request.cookies.get(SESSION_COOKIE) or ""
    key = hmac.new(token_secret(request).encode(), b"engram web csrf", hashlib.sha256).digest()
    binding = nonce + "|" + hashlib.sha256(session.encode()).hexdigest()
    return hmac.new(key, binding.encode(), hashlib.sha256).hexdigest()


def csrf_token(request: Request) -> str:
    """The hidden field every form of this page carries."""
    return _expected(request, _nonce(request))


def keep_nonce(request: Request, response: Response) -> None:
    """Set the nonce cookie when this answer chose a new one (a first visit)."""
    new = getattr(request.state, "new_nonce", None)
    if new is not None and request.cookies.get(NONCE_COOKIE) is None:
        response.set_cookie(NONCE_COOKIE, new, path="/", httponly=True, samesite="lax",
                            secure=request.url.scheme == "https")


async def require_csrf(request: Request) -> None:
    """Before any state-changing page request runs: the form's token must be this session's."""
    if bearer_token(request):
        return  # authenticated by its header, which no other site can make a browser send
    nonce = request.cookies.get(NONCE_COOKIE)
    form = await request.form()
    sent = form.get(CSRF_FIELD)
    if not nonce or not isinstance(sent, str) or not hmac.compare_digest(sent, _expected(request, nonce)):
        raise CsrfRefused("the form was not sent from this page, or the page is too old: reload it and try again")
