"""A company's directory (teams, sources, bots) and what it grants a caller right now."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from .errors import DomainError
from .scope import Caller, Grants

MAX_PEOPLE = 10_000  # distinct person ids across teams and sources: each process holds the parsed directory


class InvalidDirectory(DomainError):
    code, status, title = "invalid_directory", 422, "Directory is not valid"


class DirectoryTooLarge(DomainError):
    code, status, title = "directory_too_large", 413, "Directory is too large"


@dataclass(frozen=True)
class Directory:
    teams: dict[str, frozenset[str]] = field(default_factory=dict)
    sources: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    bots: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def from_document(cls, doc: dict[str, Any] | None) -> Directory:
        doc = doc or {}
        teams = {t: frozenset(v.get("members", [])) for t, v in (doc.get("teams") or {}).items()}
        sources = {s: (v.get("team"), frozenset(v.get("members", []))) for s, v in (doc.get("sources") or {}).items()}
        bots = {b: (frozenset(v.get("teams", [])), frozenset(v.get("sources", [])))
                for b, v in (doc.get("bots") or {}).items()}
        return cls(teams, sources, bots)

    def people(self) -> frozenset[str]:
        return frozenset().union(*self.teams.values(), *(members for _team, members in self.sources.values()))

    def validate(self) -> None:
        if len(self.people()) > MAX_PEOPLE:
            raise DirectoryTooLarge(f"a directory holds at most {MAX_PEOPLE} distinct person ids across its "
                                    "teams and sources")
        for source, (team, _members) in self.sources.items():
            if team not in self.teams:
                raise InvalidDirectory(f"source {source!r} names a team that is not in the directory")
        for bot, (teams, sources) in self.bots.items():
            if not teams <= self.teams.keys() or not sources <= self.sources.keys():
                raise InvalidDirectory(f"bot {bot!r} names teams or sources that are not in the directory")

    def document(self) -> dict[str, Any]:
        return {
            "teams": {t: {"members": sorted(m)} for t, m in sorted(self.teams.items())},
            "sources": {s: {"team": team, "members": sorted(m)} for s, (team, m) in sorted(self.sources.items())},
            "bots": {b: {"teams": sorted(t), "sources": sorted(s)} for b, (t, s) in sorted(self.bots.items())},
        }

    def with_source_ids(self, rename: Callable[[str], str]) -> Directory:
        """The same directory with each source id renamed (blinded, to be compared with the blinded
        source ids the views keep: ADR 0019); every grant comes out the same, renamed."""
        return Directory(
            dict(self.teams),
            {rename(s): entry for s, entry in self.sources.items()},
            {b: (teams, frozenset(rename(s) for s in sources)) for b, (teams, sources) in self.bots.items()},
        )

    def team_of(self, source_id: str) -> str | None:
        entry = self.sources.get(source_id)
        return entry[0] if entry else None

    def grants(self, caller: Caller, revoked: frozenset[str] = frozenset()) -> Grants:
        """Teams and sources the person holds, narrowed to the bot's when a bot acts for them."""
        teams = {t for t, members in self.teams.items() if caller.person in members}
        sources = {s for s, (team, members) in self.sources.items() if caller.person in members and team in teams}
        registered = True
        if caller.role == "bot":
            bot = self.bots.get(caller.bot or "")
            registered = bot is not None
            bot_teams, bot_sources = bot if bot else (frozenset(), frozenset())
            teams &= bot_teams
            sources &= bot_sources
        return Grants(teams=frozenset(teams), sources=frozenset(sources), bot_registered=registered,
                      revoked_sources=revoked, source_teams={s: team for s, (team, _m) in self.sources.items()})


def directory_id(company: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram:directory:{company}")


class CompanyDirectory(Aggregate):
    """Per company: every directory replacement and source revocation, in order, for audit."""

    # Set by the events' apply methods; for mypy only, as eventsourcing turns class annotations into __init__ parameters.
    if TYPE_CHECKING:
        company: str
        document: dict[str, Any]
        revoked: list[dict[str, str | None]]

    class Opened(Aggregate.Created):
        company: str

        def apply(self, agg: CompanyDirectory) -> None:
            agg.company = self.company
            agg.document = Directory().document()
            agg.revoked = []

    class Replaced(Aggregate.Event):
        document: dict[str, Any]
        actor: str

        def apply(self, agg: CompanyDirectory) -> None:
            agg.document = self.document

    class SourceRevoked(Aggregate.Event):
        source_id: str
        person: str | None  # None: for everyone in the company
        actor: str

        def apply(self, agg: CompanyDirectory) -> None:
            agg.revoked = [*agg.revoked, {"source_id": self.source_id, "person": self.person}]

    @classmethod
    def open(cls, company: str, at: datetime) -> CompanyDirectory:
        return cls._create(cls.Opened, id=directory_id(company), timestamp=at, company=company)

    def replace(self, directory: Directory, *, actor: str, at: datetime) -> None:
        directory.validate()
        self.trigger_event(self.Replaced, timestamp=at, document=directory.document(), actor=actor)

    def revoke(self, source_id: str, *, person: str | None, actor: str, at: datetime) -> None:
        if {"source_id": source_id, "person": person} in self.revoked:
            return
        self.trigger_event(self.SourceRevoked, timestamp=at, source_id=source_id, person=person, actor=actor)
