"""Who a memory belongs to and who is asking."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InvalidScope
from .text import is_valid_id

GENERAL = "general"
RESTRICTED = "restricted"
ROLES = ("user", "bot", "admin", "operator")
ENTRIES = ("web", "channel", "scheduled", "api")


@dataclass(frozen=True)
class Caller:
    """The identity a request acts as, taken from a verified token and nothing else."""

    company: str
    person: str
    role: str
    bot: str | None = None
    entry: str = "api"
    # the token's `iat` in seconds (0 when it had none): a sign-out everywhere revokes what came before;
    # None for the work Engram does itself for a person (learning, sweeps), which no credential carries
    issued_at: int | None = None
    token_id: str | None = None  # a digest of the token itself: a signed-out page session names it
    expires_at: int | None = None  # the token's `exp` (seconds)
    key_id: str | None = None  # a bot key's id, when the request came with one instead of a token

    @property
    def is_administrative(self) -> bool:
        return self.role in ("admin", "operator")


@dataclass(frozen=True)
class Scope:
    company: str
    person: str
    visibility: str = GENERAL
    team: str | None = None
    source_id: str | None = None
    # The source was sealed with the memory's key and that key is gone (forgotten, expired): only
    # the memory's status and history remain, and no source rule can be asked of it (ADR 0019).
    shredded: bool = False

    def __post_init__(self) -> None:
        if self.visibility not in (GENERAL, RESTRICTED):
            raise InvalidScope("visibility must be 'general' or 'restricted'")
        if self.visibility == RESTRICTED and not (self.team and (self.source_id or self.shredded)):
            raise InvalidScope("a restricted memory needs a team and a source id")
        for value in (self.team, self.source_id):
            if value is not None and not is_valid_id(value):
                raise InvalidScope("team and source ids must be printable text")


@dataclass(frozen=True)
class Grants:
    """What the directory grants a person (and the bot acting for them) right now."""

    teams: frozenset[str] = field(default_factory=frozenset)
    sources: frozenset[str] = field(default_factory=frozenset)
    bot_registered: bool = True
    revoked_sources: frozenset[str] = field(default_factory=frozenset)
    source_teams: dict[str, str] = field(default_factory=dict)  # each source's team in the directory now
