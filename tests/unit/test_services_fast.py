"""MemoryService and GovernanceService through their public methods, on in-memory fakes of the ports.

The event store is the real one (sealing mapper, per-memory keys) on eventsourcing's in-memory
persistence, so these run in milliseconds with no server; tests/integration repeats the paths that
need PostgreSQL (views, lists, recall).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.contract.responses import CandidateOut, MemoryOut
from engram.domain.directory import directory_id
from engram.domain.errors import (
    Conflict,
    Forbidden,
    InvalidScope,
    MemoryForgotten,
    NotACandidate,
    NotFound,
    SensitiveAckRequired,
    SourceRevoked,
)
from engram.domain.memory import Memory
from engram.domain.memory_rules import CONFIRMED, FORGOTTEN, PENDING, REJECTED, SENSITIVE
from engram.domain.review import SecretRefused
from engram.domain.rollout import SHADOW, Rollout
from engram.domain.scope import Caller
from engram.domain.text import validate_text
from engram.domain.visibility import BotNotRegistered
from engram.service.pending_writes import collecting

from tests.support.fakes import START, AcceptEverything, World, build
from tests.support.helpers import examples

ALICE = Caller("acme", "alice", "user")
HELPER = Caller("acme", "alice", "bot", bot="b-helper")  # registered in DIRECTORY
ROGUE = Caller("acme", "alice", "bot", bot="b-rogue")  # not registered
BOB = Caller("acme", "bob", "user")
ALICE_ELSEWHERE = Caller("globex", "alice", "user")
ADMIN = Caller("acme", "root", "admin")
OPERATOR = Caller("acme", "ops", "operator")
CHAT = {"kind": "chat", "id": "chat-42", "message_id": "m-1"}
JIRA = {"kind": "jira", "id": "s-jira", "message_id": "RISK-7"}
DIRECTORY: dict[str, Any] = {
    "teams": {"t-risk": {"members": ["alice"]}, "t-ops": {"members": ["bob"]}},
    "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}, "s-pager": {"team": "t-ops", "members": ["bob"]}},
    "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}},
}
SENSITIVE_TEXT = "I take insulin every morning"
SECRET_TEXT = "my password is hunter22!"


@pytest.fixture
def world() -> World:
    w = build()
    w.standings.set_directory("acme", DIRECTORY)
    return w


def remember(w: World, caller: Caller = ALICE, text: str = "I prefer green tea", *, source: dict[str, Any] = CHAT,
             visibility: str = "general", team: str | None = None) -> MemoryOut | CandidateOut:
    return w.memories.remember(caller, text=text, source=source, occurred_at=None, visibility=visibility, team=team,
                               valid_from=None, valid_to=None)


def load(w: World, memory_id: str) -> Memory:
    memory = w.ledger.get(UUID(memory_id), Memory)
    assert memory is not None
    return memory


def nothing_stored(w: World) -> bool:
    return not w.stored_events() and not w.keys.keys and not w.tombstones.recorded


# -- remember and read -------------------------------------------------------------------------


def test_a_remembered_text_reads_back_with_evidence_quoting_it(world: World) -> None:
    made = remember(world)
    got = world.memories.get(ALICE, made.id)
    assert (got.text, got.status, got.revision) == ("I prefer green tea", CONFIRMED, 1)
    assert [e.quote for e in got.evidence] == ["I prefer green tea"]
    assert got.evidence[0].source.model_dump() == CHAT
    assert got.evidence[0].occurred_at == START  # no occurred_at given: the clock's now
    assert world.keys.get(made.id) is not None
    assert world.settler.settled == 1


@pytest.mark.parametrize("caller", [ADMIN, OPERATOR], ids=["admin", "operator"])
def test_an_administrative_token_cannot_remember_and_nothing_is_stored(world: World, caller: Caller) -> None:
    with pytest.raises(Forbidden):
        remember(world, caller)
    assert nothing_stored(world)


def test_a_bot_outside_the_directory_is_refused_and_nothing_is_stored(world: World) -> None:
    with pytest.raises(BotNotRegistered):
        remember(world, ROGUE)
    assert nothing_stored(world)


def test_a_registered_bot_remembers_for_its_person(world: World) -> None:
    made = remember(world, HELPER)
    assert world.memories.get(ALICE, made.id).text == "I prefer green tea"
    assert world.memories.history(ALICE, made.id).events[0].actor == "b-helper"


def test_a_bot_removed_from_the_directory_can_no_longer_read_or_act(world: World) -> None:
    made = remember(world, HELPER)
    world.standings.set_directory("acme", {**DIRECTORY, "bots": {}})
    with pytest.raises(NotFound):
        world.memories.get(HELPER, made.id)
    with pytest.raises(BotNotRegistered):
        world.memories.forget(HELPER, made.id)
    assert world.keys.get(made.id) is not None


def test_a_secret_is_refused_and_nothing_is_stored(world: World) -> None:
    with pytest.raises(SecretRefused):
        remember(world, text=SECRET_TEXT)
    assert nothing_stored(world)


# -- candidates ---------------------------------------------------------------------------------


def test_sensitive_text_becomes_a_candidate_confirmed_only_with_acknowledgement(world: World) -> None:
    candidate = remember(world, text=SENSITIVE_TEXT)
    assert (candidate.status, candidate.review) == (PENDING, SENSITIVE)
    assert candidate.expires_at == START + timedelta(days=30)
    with pytest.raises(SensitiveAckRequired):
        world.memories.confirm(ALICE, candidate.id, text=None, acknowledge_sensitive=False)
    assert world.memories.get(ALICE, candidate.id).status == PENDING
    confirmed = world.memories.confirm(ALICE, candidate.id, text=None, acknowledge_sensitive=True)
    assert (confirmed.status, confirmed.text) == (CONFIRMED, SENSITIVE_TEXT)
    with pytest.raises(NotACandidate):
        world.memories.confirm(ALICE, candidate.id, text=None, acknowledge_sensitive=True)


def test_a_candidate_confirmed_with_edited_text_keeps_the_edit(world: World) -> None:
    candidate = world.memories.propose(ALICE, text="likes tea", quote="tea, always", source=CHAT, occurred_at=None)
    confirmed = world.memories.confirm(ALICE, candidate.id, text="likes green tea", acknowledge_sensitive=False)
    assert confirmed.text == "likes green tea"
    events = world.memories.history(ALICE, candidate.id).events
    assert [(e.type, e.text) for e in events] == [("Proposed", "likes tea"), ("Confirmed", "likes green tea")]


def test_a_candidate_cannot_be_confirmed_after_it_expires(world: World) -> None:
    candidate = world.memories.propose(ALICE, text="likes tea", quote="tea", source=CHAT, occurred_at=None)
    world.clock.advance(days=30)
    with pytest.raises(NotACandidate):
        world.memories.confirm(ALICE, candidate.id, text=None, acknowledge_sensitive=False)


def test_reject_records_its_tombstone_and_destroys_the_candidates_key(world: World) -> None:
    candidate = remember(world, text=SENSITIVE_TEXT)
    assert world.memories.reject(ALICE, candidate.id).model_dump(exclude_unset=True) == {
        "id": candidate.id, "status": REJECTED, "purge_id": f"rj-{candidate.id}"}
    assert world.keys.get(candidate.id) is None
    assert world.log == [("tombstone", "reject", candidate.id), ("key_destroyed", candidate.id)]
    assert world.memories.get(ALICE, candidate.id).text is None


def test_expiry_waits_for_the_ttl_then_destroys_the_candidates_key(world: World) -> None:
    candidate = remember(world, text=SENSITIVE_TEXT)
    world.queries.due = [candidate.id]  # the view would list it only once due; the aggregate decides
    world.clock.advance(days=29)
    assert world.memories.expire_due_candidates() == 0
    assert world.keys.get(candidate.id) is not None
    world.clock.advance(days=1)
    assert world.memories.expire_due_candidates() == 1
    assert world.keys.get(candidate.id) is None
    assert world.log == [("tombstone", "expire", candidate.id), ("key_destroyed", candidate.id)]
    assert world.memories.get(ALICE, candidate.id).status == "expired"


def test_a_closed_candidate_whose_key_survived_a_crash_is_shredded_by_the_sweep(world: World) -> None:
    candidate = remember(world, text=SENSITIVE_TEXT)
    memory = load(world, candidate.id)
    memory.reject(actor="alice", at=world.clock.now())
    world.ledger.save(memory)  # the Rejected event is recorded; the crash came before the key went
    world.queries.closed = [{"memory_id": memory.id}]
    world.memories.expire_due_candidates()
    assert world.keys.get(candidate.id) is None
    assert world.log == [("tombstone", "reject", candidate.id), ("key_destroyed", candidate.id)]


# -- correct and forget ---------------------------------------------------------------------------


def test_a_correction_keeps_the_earlier_revision_in_history(world: World) -> None:
    made = remember(world)
    world.clock.advance(hours=1)
    corrected = world.memories.correct(ALICE, made.id, text="I prefer oolong", valid_from=None, valid_to=None,
                                       reason="changed my mind")
    assert (corrected.text, corrected.revision) == ("I prefer oolong", 2)
    events = world.memories.history(ALICE, made.id).events
    assert [(e.type, e.revision, e.text) for e in events] == [
        ("Remembered", 1, "I prefer green tea"), ("Corrected", 2, "I prefer oolong")]
    assert events[1].reason == "changed my mind"
    assert events[1].at == START + timedelta(hours=1)


def test_forget_records_its_tombstone_and_destroys_the_key_with_its_event(world: World) -> None:
    made = remember(world)
    answer = world.memories.forget(ALICE, made.id)
    assert answer.status == "stopped_using" and answer.forget_id.startswith("fg-")
    assert world.log == [("tombstone", "forget", made.id), ("key_destroyed", made.id)]
    assert world.tombstones.recorded[0]["forget_id"] == answer.forget_id
    assert world.keys.get(made.id) is None
    assert world.keys.vacuums == 1


def test_after_forget_the_text_is_gone_from_every_read(world: World) -> None:
    made = remember(world)
    world.memories.correct(ALICE, made.id, text="I prefer oolong", valid_from=None, valid_to=None, reason=None)
    world.memories.forget(ALICE, made.id)
    got = world.memories.get(ALICE, made.id)
    assert (got.status, got.text, got.evidence) == (FORGOTTEN, None, [])
    memory = load(world, made.id)  # replayed from the stored events without the key
    assert [r["text"] for r in memory.revisions] == [None, None] and memory.evidence is None
    assert all(e.text is None for e in world.memories.history(ALICE, made.id).events)
    with pytest.raises(MemoryForgotten):
        world.memories.correct(ALICE, made.id, text="again", valid_from=None, valid_to=None, reason=None)


def test_a_second_forget_answers_the_first_forget_id_and_destroys_nothing_more(world: World) -> None:
    made = remember(world)
    first = world.memories.forget(ALICE, made.id)
    log = list(world.log)
    again = world.memories.forget(ALICE, made.id)
    assert again.model_dump(exclude_unset=True) == {"forget_id": first.forget_id, "status": "stopped_using"}
    assert world.log == log
    world.purge.purged(first.forget_id)
    assert world.memories.forget(ALICE, made.id).status == "purge_complete"


def test_a_forget_is_purge_complete_only_when_every_copy_reported(world: World) -> None:
    made = remember(world)
    forget_id = world.memories.forget(ALICE, made.id).forget_id
    world.purge.purged(forget_id, "event_store", "recall_view")
    report = world.memories.forget_status(ALICE, forget_id)
    assert report["status"] == "stopped_using" and report["memory_id"] == made.id
    assert {c["copy"]: c["state"] for c in report["copies"]}["review_queue"] == "pending"
    world.purge.purged(forget_id, "review_queue")
    assert world.memories.forget_status(ALICE, forget_id)["status"] == "stopped_using"  # the inbox is pending
    world.purge.purged(forget_id, "inbox")
    assert world.memories.forget_status(ALICE, forget_id)["status"] == "purge_complete"
    for other in (BOB, ALICE_ELSEWHERE, ADMIN):
        with pytest.raises(NotFound):
            world.memories.forget_status(other, forget_id)
    with pytest.raises(NotFound):
        world.memories.forget_status(ALICE, "fg-unknown")


def test_a_write_that_lost_the_race_is_a_conflict(world: World) -> None:
    made = remember(world)
    first, second = load(world, made.id), load(world, made.id)
    for copy, text in ((first, "one"), (second, "two")):
        copy.correct(text=text, valid_from=None, valid_to=None, reason=None, actor="alice", at=world.clock.now())
    world.ledger.save(first)
    with pytest.raises(Conflict):
        world.ledger.save(second)
    assert world.memories.get(ALICE, made.id).text == "one"


# -- sources, scopes and isolation --------------------------------------------------------------


def test_a_source_revoked_for_the_company_refuses_remember_and_hides_its_memories(world: World) -> None:
    made = remember(world)
    world.standings.revoke("acme", "chat-42")
    with pytest.raises(SourceRevoked):
        remember(world, text="another note")
    with pytest.raises(NotFound):
        world.memories.get(ALICE, made.id)
    assert remember(world, source={"kind": "chat", "id": "chat-7"}).status == CONFIRMED


def test_a_person_who_revokes_a_source_revokes_it_for_themself_only(world: World) -> None:
    assert world.governance.revoke_source(ALICE, "chat-42").scope == "person"
    assert world.tombstones.recorded[-1]["kind"] == "revoke"
    with pytest.raises(SourceRevoked):
        remember(world, ALICE)
    assert remember(world, BOB).status == CONFIRMED


def test_a_restricted_memory_needs_the_directory_team_and_source(world: World) -> None:
    made = remember(world, source=JIRA, visibility="restricted", team="t-risk")
    assert world.memories.get(HELPER, made.id).team == "t-risk"
    world.standings.set_directory("acme", {**DIRECTORY, "teams": {**DIRECTORY["teams"], "t-risk": {"members": []}}})
    with pytest.raises(NotFound):  # the directory as it stands now decides, on every read
        world.memories.get(ALICE, made.id)


@pytest.mark.parametrize(("caller", "source", "team"), [
    (ALICE, JIRA, "t-ops"),  # not the source's team
    (ALICE, JIRA, None),
    (ALICE, CHAT, "t-risk"),  # a source outside the directory
    (BOB, JIRA, "t-risk"),  # a team and source bob does not hold
    (ALICE, {"kind": "pager", "id": "s-pager"}, "t-ops"),  # the directory's, but not alice's
], ids=["wrong-team", "no-team", "unknown-source", "not-a-member", "someone-elses"])
def test_a_restricted_scope_the_caller_does_not_hold_is_refused(world: World, caller: Caller,
                                                                 source: dict[str, Any], team: str | None) -> None:
    with pytest.raises(InvalidScope):
        remember(world, caller, source=source, visibility="restricted", team=team)
    assert nothing_stored(world)


@pytest.mark.parametrize("other", [BOB, ALICE_ELSEWHERE, ADMIN, OPERATOR, Caller("acme", "bob", "bot", bot="b-helper")],
                         ids=["other-person", "other-company", "admin", "operator", "other-persons-bot"])
def test_another_persons_memory_does_not_exist_for_them(world: World, other: Caller) -> None:
    made = remember(world)
    with pytest.raises(NotFound):
        world.memories.get(other, made.id)
    with pytest.raises(NotFound):
        world.memories.history(other, made.id)
    if not other.is_administrative:
        with pytest.raises(NotFound):
            world.memories.forget(other, made.id)
        with pytest.raises(NotFound):
            world.memories.correct(other, made.id, text="mine now", valid_from=None, valid_to=None, reason=None)
    assert world.keys.get(made.id) is not None
    assert world.memories.get(ALICE, made.id).text == "I prefer green tea"


@pytest.mark.parametrize("memory_id", ["", "not-a-uuid", "123", str(uuid4()), str(directory_id("acme"))],
                         ids=["empty", "malformed", "short", "unknown", "not-a-memory"])
def test_an_unknown_or_malformed_id_is_not_found(world: World, memory_id: str) -> None:
    world.governance.put_directory(ADMIN, DIRECTORY)  # so the directory aggregate exists
    with pytest.raises(NotFound):
        world.memories.get(ALICE, memory_id)
    with pytest.raises(NotFound):
        world.memories.forget(ALICE, memory_id)


# -- pauses and rollout ----------------------------------------------------------------------------


def test_a_bot_sees_nothing_while_its_person_paused_use(world: World) -> None:
    made = remember(world)
    world.governance.put_settings(ALICE, learning_paused=False, use_paused=True)
    with pytest.raises(NotFound):
        world.memories.get(HELPER, made.id)
    assert world.memories.list_memories(HELPER, q=None, limit=10, cursor=None).items == []
    assert world.memories.candidates(HELPER).items == []
    assert world.memories.get(ALICE, made.id).text == "I prefer green tea"
    world.governance.put_settings(ALICE, learning_paused=False, use_paused=False)
    assert world.memories.get(HELPER, made.id).text == "I prefer green tea"


def test_only_the_person_changes_their_pauses(world: World) -> None:
    with pytest.raises(Forbidden):
        world.governance.put_settings(HELPER, learning_paused=True, use_paused=True)
    assert world.governance.get_settings(ALICE).model_dump(exclude_unset=True) == {"learning_paused": False,
                                                                                "use_paused": False}


def test_in_shadow_mode_a_bot_may_remember_but_sees_nothing() -> None:
    world = build(mode=Rollout(default=SHADOW))
    world.standings.set_directory("acme", DIRECTORY)
    made = remember(world, HELPER)
    with pytest.raises(NotFound):
        world.memories.get(HELPER, made.id)
    assert world.memories.list_memories(HELPER, q=None, limit=10, cursor=None).items == []
    assert world.memories.get(ALICE, made.id).text == "I prefer green tea"


# -- governance ---------------------------------------------------------------------------------


def test_only_an_administrative_token_replaces_the_directory(world: World) -> None:
    with pytest.raises(Forbidden):
        world.governance.put_directory(ALICE, DIRECTORY)
    fresh = build()  # an empty directory: no restricted scope is possible yet
    with pytest.raises(InvalidScope):
        remember(fresh, source=JIRA, visibility="restricted", team="t-risk")
    assert fresh.governance.put_directory(ADMIN, DIRECTORY).model_dump()["bots"] == {
        "b-helper": {"sources": ["s-jira"], "teams": ["t-risk"]}}
    assert remember(fresh, source=JIRA, visibility="restricted", team="t-risk").status == CONFIRMED


# -- at rest and visibility -----------------------------------------------------------------------


def test_the_stored_events_hold_no_plaintext(world: World) -> None:
    marker = "Zebra-7731 lives in Ürümqi, 我喜欢茶"
    made = remember(world, text=marker)
    world.memories.correct(ALICE, made.id, text=marker + " (corrected)", valid_from=None, valid_to=None,
                           reason="reason " + marker)
    states = [e.state for e in world.stored_events()]
    assert len(states) == 2
    assert all(b'"alice"' in s and b"_sealed" in s for s in states)  # the bytes looked at are the events'
    for form in (marker, json.dumps(marker)[1:-1], "Zebra-7731", "Ürümqi", "我喜欢茶"):
        assert not any(form.encode() in s for s in states), form


def test_every_write_settles_once_or_is_handed_to_the_request_to_wait_for(world: World) -> None:
    made = remember(world)
    world.memories.correct(ALICE, made.id, text="oolong", valid_from=None, valid_to=None, reason=None)
    assert world.settler.settled == 2
    world.settler.defers = True
    with collecting() as pending:
        world.memories.forget(ALICE, made.id)
    assert world.settler.settled == 2 and len(pending.recordings) == 1


# -- properties ----------------------------------------------------------------------------------

valid_texts = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1,
                      max_size=300).filter(lambda t: bool(t.strip()))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=valid_texts)
def test_any_valid_text_remembered_reads_back_identical(text: str) -> None:
    world = build(policy=AcceptEverything())
    made = remember(world, text=text)
    got = world.memories.get(ALICE, made.id)  # replayed from the sealed events
    assert got.text == text and got.evidence[0].quote == text
    assert world.memories.history(ALICE, made.id).events[0].text == text


@settings(max_examples=examples(60), deadline=None)
@given(text=valid_texts | st.sampled_from([SECRET_TEXT, SENSITIVE_TEXT, "call me at +44 20 7946 0958"]))
def test_with_the_content_rules_a_text_is_refused_whole_or_kept_exactly(text: str) -> None:
    validate_text(text)
    world = build()
    try:
        made = remember(world, text=text)
    except SecretRefused:
        assert nothing_stored(world)
        return
    assert made.status in (CONFIRMED, PENDING)
    assert world.memories.get(ALICE, made.id).text == text
