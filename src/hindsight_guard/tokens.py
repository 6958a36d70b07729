"""Service tokens: short-lived EdDSA JWTs that name the Hindsight banks a request may touch.

Engram holds the private key (derived from its master key); Hindsight holds only the public key,
so a copy of Hindsight's configuration cannot mint a token.
"""

from __future__ import annotations

import base64
import time

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ISSUER = "engram"
AUDIENCE = "hindsight"
ALGORITHM = "EdDSA"
MAX_BANKS = 64
NOT_SIGNED = "service token is not signed by Engram"


class InvalidServiceToken(Exception):
    """Missing, forged, expired, or not naming banks the way Engram does. Carries no token text."""


def public_key_text(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def load_public_key(text: str) -> Ed25519PublicKey:
    text = text.strip()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as e:
        raise ValueError("the Engram public key must be 32 bytes, base64url") from e


def load_public_keys(text: str) -> list[Ed25519PublicKey]:
    """One key, or several separated by commas: while Engram's master key is rotated, the old and the
    new public key are both accepted (ADR 0030)."""
    keys = [load_public_key(part) for part in text.split(",") if part.strip()]
    if not keys:
        raise ValueError("the Engram public key must be 32 bytes, base64url")
    return keys


def sign(key: Ed25519PrivateKey, banks: list[str], *, ttl: float = 120.0, now: float | None = None) -> str:
    issued = int(time.time() if now is None else now)
    claims = {"iss": ISSUER, "aud": AUDIENCE, "iat": issued, "exp": issued + int(ttl), "banks": sorted(set(banks))}
    return jwt.encode(claims, key, algorithm=ALGORITHM)


def presented(token: str | None) -> str:
    """The token a request carries; raises InvalidServiceToken when it carries none."""
    if not token:
        raise InvalidServiceToken("no service token")
    return token


def verify(key: Ed25519PublicKey, token: str | None, *, leeway: float = 5.0) -> frozenset[str]:
    """The banks a valid token names; raises InvalidServiceToken otherwise."""
    return verify_until(key, token, leeway=leeway)[0]


def verify_any(keys: list[Ed25519PublicKey], token: str | None) -> tuple[frozenset[str], float]:
    """`verify_until` with the first key that signed the token."""
    for key in keys[:-1]:
        try:
            return verify_until(key, token)
        except InvalidServiceToken as e:
            if str(e) != NOT_SIGNED:
                raise  # signed with this key, and wrong in another way
    return verify_until(keys[-1], token)


def verify_until(key: Ed25519PublicKey, token: str | None, *, leeway: float = 5.0) -> tuple[frozenset[str], float]:
    """The banks a valid token names, and when it stops being valid."""
    token = presented(token)
    try:
        claims = jwt.decode(token, key, algorithms=[ALGORITHM], audience=AUDIENCE, issuer=ISSUER, leeway=leeway,
                            options={"require": ["exp", "iat", "iss", "aud"]})
    except jwt.ExpiredSignatureError:
        raise InvalidServiceToken("service token expired") from None
    except jwt.PyJWTError:
        raise InvalidServiceToken(NOT_SIGNED) from None
    banks = claims.get("banks")
    if not isinstance(banks, list) or not banks or len(banks) > MAX_BANKS \
            or not all(isinstance(b, str) and b.startswith("engram-") for b in banks):
        raise InvalidServiceToken("service token names no banks")
    return frozenset(banks), float(claims["exp"]) + leeway
