"""The one place that decides whether a caller may use a memory."""

from __future__ import annotations

from .scope import GENERAL, Caller, Grants, Scope


def may_use(caller: Caller, scope: Scope, grants: Grants) -> bool:
    """True when this caller may read or act on a memory with this scope now.

    The same person in two companies is two people; company admins and operators
    see no one's memory text; a bot acts only for the person in its token and only
    while registered in the company's directory; a revoked source stops its memories;
    a restricted memory needs its team and source held by the person (and the bot), and its source
    still in its team (a source moved to another team takes its memories out of use).
    """
    if caller.is_administrative:
        return False
    if caller.company != scope.company or caller.person != scope.person:
        return False
    if caller.role == "bot" and not (caller.bot and grants.bot_registered):
        return False
    if scope.source_id is not None and scope.source_id in grants.revoked_sources:
        return False
    if scope.visibility == GENERAL:
        return True
    return (scope.team in grants.teams and scope.source_id in grants.sources
            and grants.source_teams.get(scope.source_id or "") == scope.team)
