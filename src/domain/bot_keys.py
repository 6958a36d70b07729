"""A bot's API key: issued by an admin for a bot the company's directory registers, shown once, kept
only as a digest of its secret, and revocable. A request with it names the person it acts for."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

PREFIX = "ek_"
_KEY = re.compile(r"^ek_([A-Za-z0-9]{16})_([A-Za-z0-9_-]{43})$")


def bot_key_id(key_id: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram:bot-key:{key_id}")


def new_key() -> tuple[str, str]:
    """(key_id, key): the id names it in lists and revocations; the key is `ek_<id>_<secret>`."""
    key_id = secrets.token_hex(8)
    return key_id, f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def parse_key(text: str) -> tuple[str, str] | None:
    """(key_id, secret) of a bot key; None for anything else (a JWT, say)."""
    match = _KEY.fullmatch(text)
    return (match.group(1), match.group(2)) if match else None


def digest(secret: str) -> str:
    """What is kept of a key: the SHA-256 of its 256-bit secret (enough for a random secret; no salt)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, kept: str) -> bool:
    return hmac.compare_digest(digest(secret), kept)


class BotKey(Aggregate):
    # Set by the events' apply methods; for mypy only, as eventsourcing turns class annotations into __init__ parameters.
    if TYPE_CHECKING:
        company: str
        bot: str
        key_id: str
        digest: str
        revoked: bool

    class Issued(Aggregate.Created):
        company: str
        bot: str
        key_id: str
        digest: str
        actor: str

        def apply(self, k: BotKey) -> None:
            k.company, k.bot, k.key_id, k.digest, k.revoked = self.company, self.bot, self.key_id, self.digest, False

    class Revoked(Aggregate.Event):
        actor: str

        def apply(self, k: BotKey) -> None:
            k.revoked = True

    @classmethod
    def issue(cls, *, company: str, bot: str, key_id: str, secret: str, actor: str, at: datetime) -> BotKey:
        return cls._create(cls.Issued, id=bot_key_id(key_id), timestamp=at, company=company, bot=bot, key_id=key_id,
                           digest=digest(secret), actor=actor)

    def revoke(self, *, actor: str, at: datetime) -> None:
        if not self.revoked:
            self.trigger_event(self.Revoked, timestamp=at, actor=actor)
