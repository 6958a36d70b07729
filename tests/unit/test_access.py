"""The access policy (domain.access): who may do what right now, without any server."""

from __future__ import annotations

import pytest

from engram.domain.access import Access
from engram.domain.directory import Directory
from engram.domain.errors import Forbidden, InvalidScope
from engram.domain.rollout import ENABLED, OFF, SHADOW, EngramOff
from engram.domain.scope import Caller, Scope
from engram.domain.visibility import BotNotRegistered

DIRECTORY = Directory.from_document({
    "teams": {"t-risk": {"members": ["alice"]}, "t-ops": {"members": ["bob"]}},
    "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}, "s-pager": {"team": "t-ops", "members": ["bob"]}},
    "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}},
})
ALICE = Caller("acme", "alice", "user")
HELPER = Caller("acme", "alice", "bot", bot="b-helper")
ROGUE = Caller("acme", "alice", "bot", bot="b-rogue")
ADMIN = Caller("acme", "root", "admin")
GENERAL = Scope("acme", "alice")
RESTRICTED = Scope("acme", "alice", "restricted", "t-risk", "s-jira")


def access(caller: Caller, mode: str = ENABLED, **kw: object) -> Access:
    return Access(caller, mode, DIRECTORY, **kw)  # type: ignore[arg-type]


def test_a_company_that_is_off_is_refused_and_shadow_or_enabled_admitted() -> None:
    with pytest.raises(EngramOff):
        access(ALICE, OFF).admit()
    access(ALICE, SHADOW).admit()
    access(ALICE, ENABLED).admit()


def test_administrative_tokens_hold_no_memories_and_only_they_administer() -> None:
    with pytest.raises(Forbidden):
        access(ADMIN).require_holder()
    access(ALICE).require_holder()
    access(ADMIN).require_admin()
    with pytest.raises(Forbidden, match="may see the status"):
        access(ALICE).require_admin("see the status")
    assert not access(ADMIN).may_use(GENERAL) and not access(ADMIN).sees_memories


def test_a_bot_acts_only_while_registered() -> None:
    access(HELPER).require_may_act()
    access(ALICE).require_may_act()
    with pytest.raises(BotNotRegistered):
        access(ROGUE).require_may_act()
    assert access(HELPER).may_read and not access(ROGUE).may_read and access(ALICE).may_read
    assert not access(ROGUE).may_use(GENERAL)


def test_a_bot_gets_nothing_in_shadow_or_while_use_is_paused_but_the_person_still_does() -> None:
    for blocked in (access(HELPER, SHADOW), access(HELPER, use_paused=True)):
        assert blocked.use_blocked and not blocked.may_use(GENERAL) and not blocked.sees_memories
    for person in (access(ALICE, SHADOW), access(ALICE, use_paused=True)):
        assert not person.use_blocked and person.may_use(GENERAL)
    assert access(HELPER).may_use(RESTRICTED) and access(ALICE).may_use(RESTRICTED)


def test_a_restricted_scope_needs_a_directory_source_its_team_and_both_held() -> None:
    access(ALICE).require_restricted_scope("t-risk", "s-jira")
    for team, source in (("t-ops", "s-jira"), ("t-risk", "s-unknown"), ("t-ops", "s-pager")):
        with pytest.raises(InvalidScope):
            access(ALICE).require_restricted_scope(team, source)


def test_a_revoked_source_stops_its_memories() -> None:
    assert not access(ALICE, revoked_sources=frozenset({"s-jira"})).may_use(RESTRICTED)
    assert access(ALICE, revoked_sources=frozenset({"s-jira"})).may_use(GENERAL)


def test_the_person_alone_changes_their_controls() -> None:
    access(ALICE).require_person("change the person's controls")
    with pytest.raises(Forbidden):
        access(HELPER).require_person("change the person's controls")
    with pytest.raises(BotNotRegistered):
        access(ROGUE).require_person("change the person's controls")


def test_semantic_scopes_are_the_general_bank_and_each_held_restricted_source() -> None:
    assert access(ALICE).semantic_scopes() == [GENERAL, RESTRICTED]
    assert access(Caller("acme", "carol", "user")).semantic_scopes() == [Scope("acme", "carol")]


def test_blinded_source_ids_in_give_the_same_decision_out() -> None:
    """ADR 0019: the views keep source ids blinded; compared with a directory and revocations blinded
    alike, the one visibility rule decides exactly as with the clear ids."""
    import hashlib

    from engram.domain.visibility import may_use

    def blind(source_id: str) -> str:
        return "s" + hashlib.sha256(b"k\x00" + source_id.encode()).hexdigest()[:32]

    moved = Directory.from_document({**DIRECTORY.document(),
                                     "sources": {"s-jira": {"team": "t-ops", "members": ["alice"]}}})
    scopes = [GENERAL, RESTRICTED, Scope("acme", "alice", "general", None, "chat-9"),
              Scope("acme", "alice", "restricted", "t-ops", "s-pager"), Scope("acme", "bob", "restricted", "t-ops", "s-pager"),
              Scope("acme", "alice", "restricted", "t-risk", "s-unknown")]
    decisions = []
    for directory in (DIRECTORY, moved):
        for caller in (ALICE, HELPER, ROGUE, ADMIN, Caller("acme", "bob", "user")):
            for revoked in (frozenset(), frozenset({"chat-9"}), frozenset({"s-jira", "s-pager"})):
                clear = directory.grants(caller, revoked)
                blinded = directory.with_source_ids(blind).grants(caller, frozenset(blind(s) for s in revoked))
                for scope in scopes:
                    hidden = Scope(scope.company, scope.person, scope.visibility, scope.team,
                                   blind(scope.source_id) if scope.source_id else None)
                    decisions.append(may_use(caller, scope, clear))
                    assert may_use(caller, hidden, blinded) == decisions[-1], (caller, scope, revoked)
    assert True in decisions and False in decisions


def test_a_shredded_source_leaves_its_owner_the_memory_while_they_hold_its_team() -> None:
    """Once its key is gone a memory has no source (ADR 0019): only its status and history remain."""
    shredded = Scope("acme", "alice", "restricted", "t-risk", None, shredded=True)
    assert access(ALICE).may_use(shredded)
    assert not access(Caller("acme", "bob", "user")).may_use(shredded)
    assert not Access(ALICE, ENABLED, Directory()).may_use(shredded)  # no longer in its team
    with pytest.raises(InvalidScope):
        Scope("acme", "alice", "restricted", "t-risk", None)  # only a shredded one may lack its source
