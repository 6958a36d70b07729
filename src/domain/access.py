"""The access policy: what one caller may do right now, decided in one place.

Built once per request from the caller's standing (the company's rollout mode, its directory and
revocations, the person's pauses); every command and read asks it instead of checking roles, modes
and pauses on its own. Which memory a caller may use is `visibility.may_use`, asked through here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .directory import Directory
from .errors import Forbidden, InvalidScope, PersonOnly
from .rollout import ENABLED, OFF, EngramOff
from .scope import Caller, Grants, Scope
from .visibility import may_act, may_use, require_may_act


@dataclass(frozen=True)
class Access:
    caller: Caller
    mode: str = ENABLED
    directory: Directory = field(default_factory=Directory)
    revoked_sources: frozenset[str] = frozenset()
    learning_paused: bool = False
    use_paused: bool = False

    @cached_property
    def grants(self) -> Grants:
        """The directory as it is right now decides; nothing is cached across requests."""
        return self.directory.grants(self.caller, self.revoked_sources)

    # -- refusals (each raises a domain error the edge maps to a problem) ----------------

    def admit(self) -> None:
        """Every call of a company whose rollout mode is off is refused (recall answers empty instead)."""
        if self.mode == OFF:
            raise EngramOff("Engram is off for this company")

    def require_holder(self) -> None:
        """Memories are held and changed by people and their bots, never by administrative tokens."""
        if self.caller.is_administrative:
            raise Forbidden("administrative tokens cannot hold or change memories")

    def require_admin(self, what: str = "do this") -> None:
        if not self.caller.is_administrative:
            raise Forbidden(f"only company admins and operators may {what}")

    def require_may_act(self) -> None:
        """Every write and control: a bot only while its company's directory registers it (403)."""
        if self.caller.role == "bot":
            require_may_act(self.caller, self.grants)

    def require_person(self, what: str) -> None:
        """Controls only the person changes: their bot (registered or not) is refused."""
        if self.caller.role == "bot":
            self.require_may_act()
            raise Forbidden(f"a bot cannot {what}")

    def require_reviewer(self) -> None:
        """Candidates and insights are reviewed by their person: a bot token (registered or not) is refused,
        whatever it asks, and administrative tokens hold no memories."""
        if self.caller.role == "bot":
            raise PersonOnly("the person reviews candidates and insights; a bot cannot confirm, reject or edit them")
        self.require_holder()

    def require_restricted_scope(self, team: str | None, source_id: str) -> None:
        """A restricted memory names a directory source and that source's team, and the caller holds both."""
        owner = self.directory.team_of(source_id)
        if owner is None or owner != team:
            raise InvalidScope("a restricted memory needs a source of the directory and that source's team")
        if team not in self.grants.teams or source_id not in self.grants.sources:
            raise InvalidScope("the caller does not hold that team and source")

    # -- questions --------------------------------------------------------------------

    @property
    def use_blocked(self) -> bool:
        """A bot gets nothing while the company is in shadow (or off) or the person paused use."""
        return self.caller.role == "bot" and (self.mode != ENABLED or self.use_paused)

    @property
    def may_read(self) -> bool:
        """The caller's own records (settings, receipts, forgets): a removed bot finds nothing."""
        return self.caller.role != "bot" or may_act(self.caller, self.grants)

    @property
    def sees_memories(self) -> bool:
        """Lists and candidates: nothing for administrative tokens or a blocked bot."""
        return not self.caller.is_administrative and not self.use_blocked

    def may_use(self, scope: Scope) -> bool:
        """This memory, now: the visibility rule, and nothing while use is blocked."""
        return not self.use_blocked and may_use(self.caller, scope, self.grants)

    def semantic_scopes(self) -> list[Scope]:
        """The scopes whose semantic index may hint for this caller: their own general memories and
        each restricted source they hold with its team."""
        scopes = [Scope(self.caller.company, self.caller.person)]
        for source in sorted(self.grants.sources):
            team = self.directory.team_of(source)
            if team in self.grants.teams:
                scopes.append(Scope(self.caller.company, self.caller.person, "restricted", team, source))
        return scopes
