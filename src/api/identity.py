"""The one token decoder: a verified JWT becomes a Caller, or the request gets 401."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import jwt

from engram.domain.errors import DomainError
from engram.domain.scope import ENTRIES, ROLES, Caller

ALGORITHM = "HS256"


class Unauthenticated(DomainError):
    code, status, title = "unauthenticated", 401, "Authentication required"


class TokenExpired(Unauthenticated):
    code, title = "token_expired", "Token expired"


class InvalidToken(Unauthenticated):
    code, title = "invalid_token", "Token is not valid"


def issue_token(
    secret: str,
    *,
    company: str,
    user: str,
    role: str = "user",
    bot: str | None = None,
    entry: str = "api",
    ttl: timedelta = timedelta(hours=12),
    now: datetime | None = None,
) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    if entry not in ENTRIES:
        raise ValueError(f"entry must be one of {', '.join(ENTRIES)}")
    if role == "bot" and not bot:
        raise ValueError("a bot token needs --bot")
    now = now or datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": user, "company": company, "role": role, "entry": entry,
        "iat": int(now.timestamp()), "exp": int((now + ttl).timestamp()),
    }
    if bot:
        claims["bot"] = bot
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


class TokenTooLong(Unauthenticated):
    code, title = "token_lifetime_too_long", "Token lives too long"


@lru_cache(maxsize=4096)
def _verified_claims(secret: str, token: str) -> dict[str, Any]:
    """The claims of a token whose signature and required claims check out; a bot sends the same token
    with every request, and verifying it cost about 0.2 ms of CPU a request. Only verified tokens are
    kept (a forged one raises, and is never cached); the time checks are made at each use, below."""
    return jwt.decode(token, secret, algorithms=[ALGORITHM],
                      options={"require": ["sub", "company", "role", "exp"], "verify_exp": False})


def caller_from_token(secret: str, token: str | None, *, max_lifetime: timedelta = timedelta(days=30),
                      now: datetime | None = None) -> Caller:
    """A leaked token must not work for centuries: one expiring further ahead than `max_lifetime` is refused."""
    if not token:
        raise Unauthenticated("a bearer token is required")
    try:
        claims = _verified_claims(secret, token)
    except jwt.PyJWTError:
        raise InvalidToken("the token could not be verified") from None
    sub, company, role = claims.get("sub"), claims.get("company"), claims.get("role")
    bot, entry = claims.get("bot"), claims.get("entry", "api")
    if not (isinstance(sub, str) and sub and isinstance(company, str) and company):
        raise InvalidToken("the token lacks a person or a company")
    if role not in ROLES or entry not in ENTRIES:
        raise InvalidToken("the token names an unknown role or entry")
    if role == "bot" and not (isinstance(bot, str) and bot):
        raise InvalidToken("a bot token must name its bot")
    exp = claims.get("exp")
    now = now or datetime.now(UTC)
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise InvalidToken("the token's expiry is not a time")
    if exp <= now.timestamp():
        raise TokenExpired("the token has expired")
    if exp > (now + max_lifetime).timestamp():
        raise TokenTooLong(f"tokens may expire at most {max_lifetime.days} days ahead")
    return Caller(company=company, person=sub, role=role, bot=bot if role == "bot" else None, entry=entry)
