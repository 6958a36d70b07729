"""Directory grants, the visibility rule and rollout modes, without any server: milliseconds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.domain.directory import MAX_PEOPLE, Directory, DirectoryTooLarge, InvalidDirectory
from engram.domain.rollout import ENABLED, OFF, SHADOW, Rollout
from engram.domain.scope import Caller, Scope
from engram.domain.visibility import may_act, may_use

DOC = {"teams": {"t-risk": {"members": ["alice", "bob"]}, "t-ops": {"members": ["bob"]}},
       "sources": {"s-jira": {"team": "t-risk", "members": ["alice", "bob"]},
                   "s-pager": {"team": "t-ops", "members": ["bob", "alice"]}},
       "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}}

ALICE = Caller("acme", "alice", "user")
ALICE_BOT = Caller("acme", "alice", "bot", bot="b-helper")
RESTRICTED = Scope("acme", "alice", "restricted", "t-risk", "s-jira")


def test_a_person_holds_only_sources_of_teams_they_belong_to() -> None:
    grants = Directory.from_document(DOC).grants(ALICE)
    assert grants.teams == {"t-risk"}
    assert grants.sources == {"s-jira"}  # s-pager's team t-ops is not hers, though she is listed on it
    assert grants.bot_registered


def test_a_bot_narrows_to_what_it_is_registered_for_and_an_unknown_bot_to_nothing() -> None:
    directory = Directory.from_document(DOC)
    bob_bot = directory.grants(Caller("acme", "bob", "bot", bot="b-helper"))
    assert (bob_bot.teams, bob_bot.sources) == ({"t-risk"}, {"s-jira"})
    rogue = directory.grants(Caller("acme", "alice", "bot", bot="b-rogue"))
    assert not rogue.bot_registered and not rogue.teams and not rogue.sources
    assert not may_act(Caller("acme", "alice", "bot", bot="b-rogue"), rogue) and may_act(ALICE_BOT, bob_bot)


def test_visibility_follows_the_directory_now() -> None:
    directory = Directory.from_document(DOC)
    assert may_use(ALICE, RESTRICTED, directory.grants(ALICE))
    assert may_use(ALICE_BOT, RESTRICTED, directory.grants(ALICE_BOT))
    assert may_use(ALICE, Scope("acme", "alice"), directory.grants(ALICE))
    # revoked, moved to another team, another person, another company, an admin: never
    assert not may_use(ALICE, RESTRICTED, directory.grants(ALICE, frozenset({"s-jira"})))
    moved = Directory.from_document({**DOC, "sources": {**DOC["sources"], "s-jira": {"team": "t-ops",
                                                                                     "members": ["alice"]}}})
    assert not may_use(ALICE, RESTRICTED, moved.grants(ALICE))
    assert not may_use(Caller("acme", "bob", "user"), RESTRICTED, directory.grants(Caller("acme", "bob", "user")))
    assert not may_use(Caller("globex", "alice", "user"), RESTRICTED, directory.grants(ALICE))
    assert not may_use(Caller("acme", "alice", "admin"), Scope("acme", "alice"), directory.grants(ALICE))


def test_a_directory_must_be_consistent_and_bounded() -> None:
    Directory.from_document(DOC).validate()
    with pytest.raises(InvalidDirectory):
        Directory.from_document({"sources": {"s-x": {"team": "t-none", "members": []}}}).validate()
    with pytest.raises(InvalidDirectory):
        Directory.from_document({"bots": {"b": {"teams": ["t-none"]}}}).validate()
    people = [f"p{i}" for i in range(MAX_PEOPLE)]
    at_limit = {"teams": {"t": {"members": people}}, "sources": {"s": {"team": "t", "members": people}}}
    Directory.from_document(at_limit).validate()  # the same people twice count once
    with pytest.raises(DirectoryTooLarge):
        Directory.from_document({"teams": {"t": {"members": [*people, "one-more"]}}}).validate()


@given(st.dictionaries(st.sampled_from(["t1", "t2", "t3"]), st.sets(st.sampled_from(["alice", "bob", "carol"]))),
       st.sampled_from(["alice", "bob", "carol"]))
def test_grants_never_include_a_team_the_person_is_not_in(teams: dict[str, set[str]], person: str) -> None:
    doc = {"teams": {t: {"members": sorted(m)} for t, m in teams.items()},
           "sources": {f"s-{t}": {"team": t, "members": ["alice", "bob", "carol"]} for t in teams}}
    grants = Directory.from_document(doc).grants(Caller("acme", person, "user"))
    assert grants.teams == {t for t, m in teams.items() if person in m}
    assert grants.sources == {f"s-{t}" for t in grants.teams}


def test_rollout_modes() -> None:
    assert Rollout().mode("acme") == ENABLED
    assert Rollout(SHADOW).mode("acme") == SHADOW
    limited = Rollout(ENABLED, frozenset({"acme"}))
    assert (limited.mode("acme"), limited.mode("globex")) == (ENABLED, OFF)
    with pytest.raises(ValueError):
        Rollout("sometimes")
