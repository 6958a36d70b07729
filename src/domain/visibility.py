"""The one place that decides whether a caller may use a memory."""

from __future__ import annotations

from .errors import DomainError
from .scope import GENERAL, Caller, Grants, Scope


class BotNotRegistered(DomainError):
    code, status, title = "bot_not_registered", 403, "Bot is not registered"


def may_act(caller: Caller, grants: Grants) -> bool:
    """A person acts for themself; a bot acts for them only while its company's directory registers it."""
    return caller.role != "bot" or bool(caller.bot and grants.bot_registered)


def require_may_act(caller: Caller, grants: Grants) -> None:
    if not may_act(caller, grants):
        raise BotNotRegistered("this bot is not registered in the company directory")


def may_use(caller: Caller, scope: Scope, grants: Grants) -> bool:
    """True when this caller may read or act on a memory with this scope now.

    The same person in two companies is two people; company admins and operators
    see no one's memory text; a bot acts only for the person in its token and only
    while registered in the company's directory; a revoked source stops its memories;
    a restricted memory needs its team and source held by the person (and the bot), and its source
    still in its team (a source moved to another team takes its memories out of use).
    A memory whose source was shredded with its key (ADR 0019) is nothing but a status and a history
    by then: its owner keeps seeing that while they hold its team.
    The source ids may be blinded (ADR 0019) as long as the scope's and the grants' are blinded alike.
    """
    if caller.is_administrative:
        return False
    if caller.company != scope.company or caller.person != scope.person:
        return False
    if not may_act(caller, grants):
        return False
    if scope.source_id is not None and scope.source_id in grants.revoked_sources:
        return False
    if scope.visibility == GENERAL:
        return True
    if scope.source_id is None and scope.shredded:  # what is left of it: its owner, while in its team
        return scope.team in grants.teams
    return (scope.team in grants.teams and scope.source_id in grants.sources
            and grants.source_teams.get(scope.source_id or "") == scope.team)
