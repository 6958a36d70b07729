"""The one token decoder: a verified JWT becomes a Caller, or the request gets 401."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization

from engram.domain.errors import DomainError
from engram.domain.scope import ENTRIES, ROLES, Caller

ALGORITHM = "HS256"


class Unauthenticated(DomainError):
    """A 401; `reason` says which check failed, so a developer knows what to fix (never a secret)."""

    code, status, title, reason = "unauthenticated", 401, "Authentication required", "missing"

    def __init__(self, detail: str | None = None, reason: str | None = None) -> None:
        super().__init__(detail)
        if reason is not None:
            self.reason = reason


class TokenExpired(Unauthenticated):
    code, title, reason = "token_expired", "Token expired", "expired"


class InvalidToken(Unauthenticated):
    code, title, reason = "invalid_token", "Token is not valid", "signature"


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
        "jti": secrets.token_urlsafe(12),  # two tokens issued alike are still two: one can be signed out alone
    }
    if bot:
        claims["bot"] = bot
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


class TokenTooLong(Unauthenticated):
    code, title, reason = "token_lifetime_too_long", "Token lives too long", "lifetime"


ISSUER_ALGORITHMS = ("EdDSA", "RS256")  # an issuer's key pair; never HS256 with its public key as the secret
REQUIRED = ["sub", "company", "role", "exp"]


@lru_cache(maxsize=4096)
def _verified_claims(secret: str, token: str) -> dict[str, Any]:
    """The claims of a token whose signature and required claims check out; a bot sends the same token
    with every request, and verifying it cost about 0.2 ms of CPU a request. Only verified tokens are
    kept (a forged one raises, and is never cached); the time checks are made at each use, below."""
    return jwt.decode(token, secret, algorithms=[ALGORITHM], options={"require": REQUIRED, "verify_exp": False})


@lru_cache(maxsize=64)
def _public_key(pem: str) -> Any:
    return serialization.load_pem_public_key(pem.encode())  # checked at start-up (settings.TokenIssuer)


@lru_cache(maxsize=4096)
def _issued_claims(pem: str, issuer: str, token: str) -> dict[str, Any]:
    """As `_verified_claims`, for a token a configured issuer signed with its own key pair."""
    return jwt.decode(token, _public_key(pem), algorithms=list(ISSUER_ALGORITHMS), issuer=issuer,
                      options={"require": [*REQUIRED, "iss"], "verify_exp": False})


@lru_cache(maxsize=4096)
def _named_issuer(token: str) -> object:
    """The `iss` a token names, unverified (it only chooses the key that verifies it): read once per
    token, as the verification is, not at every request."""
    try:
        return jwt.decode(token, options={"verify_signature": False}).get("iss")
    except jwt.PyJWTError:
        raise InvalidToken("the token could not be read as a signed JWT") from None


def _claims(secret: str, token: str, issuers: Mapping[str, Any]) -> dict[str, Any]:
    """The verified claims: by the issuer the token names (ENGRAM_TOKEN_ISSUERS), else by the secret."""
    named = _named_issuer(token)
    if named is None:
        try:
            return _verified_claims(secret, token)
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not match: sign it with this server's "
                               "ENGRAM_TOKEN_SECRET (HS256), or name a configured issuer in `iss`") from None
    issuer = issuers.get(named) if isinstance(named, str) else None
    if issuer is None:  # never the name itself: it is the caller's text
        raise InvalidToken("the token's issuer (`iss`) is not one ENGRAM_TOKEN_ISSUERS configures", reason="issuer")
    try:
        claims = _issued_claims(issuer.public_key, named, token)
    except jwt.InvalidSignatureError:
        raise InvalidToken("the token's signature does not match its issuer's public key") from None
    except jwt.InvalidAlgorithmError:
        raise InvalidToken(f"an issuer's token is signed with {' or '.join(ISSUER_ALGORITHMS)}") from None
    if claims.get("role") not in issuer.roles:
        raise InvalidToken("the token's issuer may not sign this role (ENGRAM_TOKEN_ISSUERS)", reason="issuer")
    return claims


def caller_from_token(secret: str, token: str | None, *, max_lifetime: timedelta = timedelta(days=30),
                      now: datetime | None = None, issuers: Mapping[str, Any] | None = None) -> Caller:
    """A leaked token must not work for centuries: one expiring further ahead than `max_lifetime` is refused.
    `issuers`: ENGRAM_TOKEN_ISSUERS, each with `public_key` and `roles`."""
    if not token:
        raise Unauthenticated("send `Authorization: Bearer <token>`; `engram token` prints one for local use")
    try:
        claims = _claims(secret, token, issuers or {})
    except jwt.MissingRequiredClaimError as e:
        raise InvalidToken(f"the token lacks the `{e.claim}` claim", reason="issuer") from None
    except jwt.PyJWTError:
        raise InvalidToken("the token could not be read as a signed JWT (HS256)") from None
    sub, company, role = claims.get("sub"), claims.get("company"), claims.get("role")
    bot, entry = claims.get("bot"), claims.get("entry", "api")
    if not (isinstance(sub, str) and sub and isinstance(company, str) and company):
        raise InvalidToken("the token lacks a person (`sub`) or a `company`", reason="issuer")
    if role not in ROLES or entry not in ENTRIES:
        raise InvalidToken(f"the token's role must be one of {', '.join(ROLES)} and its entry one of "
                           f"{', '.join(ENTRIES)}", reason="issuer")
    if role == "bot" and not (isinstance(bot, str) and bot):
        raise InvalidToken("a bot token must name its bot (the `bot` claim)", reason="issuer")
    exp, iat = claims.get("exp"), claims.get("iat")
    now = now or datetime.now(UTC)
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise InvalidToken("the token's expiry (`exp`) is not a time in seconds", reason="issuer")
    if exp <= now.timestamp():
        raise TokenExpired("the token has expired: ask for a new one")
    if exp > (now + max_lifetime).timestamp():
        days = max_lifetime.total_seconds() / 86400
        raise TokenTooLong(f"tokens may expire at most {days:g} days ahead (ENGRAM_MAX_TOKEN_DAYS): issue one "
                           "that lives less long")
    return Caller(company=company, person=sub, role=role, bot=bot if role == "bot" else None, entry=entry,
                  # no `iat`: nothing shows it came after a sign-out everywhere, which then revokes it
                  issued_at=int(iat) if isinstance(iat, (int, float)) and not isinstance(iat, bool) else 0,
                  token_id=token_digest(token), expires_at=int(exp))


def token_digest(token: str) -> str:
    """What names one token at rest (a signed-out session): its SHA-256, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()
