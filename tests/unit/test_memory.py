"""The Memory aggregate's lifecycle and rules, without any I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.domain.errors import (
    InvalidScope,
    InvalidText,
    InvalidValidTime,
    MemoryForgotten,
    NotACandidate,
    NotAConfirmedMemory,
    SensitiveAckRequired,
    TextTooLarge,
)
from engram.domain.memory import Memory
from engram.domain.memory_rules import CONFIRMED, EXPIRED, FORGOTTEN, PENDING, REJECTED
from engram.domain.revisions import answer_periods
from engram.domain.scope import Caller, Grants, Scope
from engram.domain.text import validate_text
from engram.domain.visibility import may_use

T0 = datetime(2026, 11, 1, tzinfo=UTC)
SRC = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}


def remembered(**kw) -> Memory:
    args = dict(scope=Scope("acme", "alice"), source=SRC, text="I prefer tea", evidence=[],
                valid_from=None, valid_to=None, actor="alice", at=T0)
    args.update(kw)
    return Memory.remember(**args)


def proposed(review: str = "normal") -> Memory:
    return Memory.propose(scope=Scope("acme", "alice"), source=SRC, text="likes tea", evidence=[],
                          review=review, expires_at=T0 + timedelta(days=30), actor="engram", at=T0)


def test_remember_confirms_exactly_the_stated_text() -> None:
    m = remembered()
    assert m.status == CONFIRMED
    assert m.current["text"] == "I prefer tea"
    assert m.revision == 1
    assert m.current["time_uncertain"] is True
    assert [type(e).__name__ for e in m.collect_events()] == ["Remembered"]


def test_candidate_confirm_with_edit_and_reject() -> None:
    m = proposed()
    assert m.status == PENDING
    m.confirm(text="prefers green tea", acknowledge_sensitive=False, actor="alice", at=T0)
    assert m.status == CONFIRMED and m.current["text"] == "prefers green tea"
    with pytest.raises(NotACandidate):
        m.reject(actor="alice", at=T0)
    r = proposed()
    r.reject(actor="alice", at=T0)
    assert r.status == REJECTED
    with pytest.raises(NotACandidate):
        r.confirm(text=None, acknowledge_sensitive=False, actor="alice", at=T0)


def test_sensitive_candidate_needs_acknowledgement() -> None:
    m = proposed(review="sensitive")
    with pytest.raises(SensitiveAckRequired):
        m.confirm(text=None, acknowledge_sensitive=False, actor="alice", at=T0)
    m.confirm(text=None, acknowledge_sensitive=True, actor="alice", at=T0)
    assert m.status == CONFIRMED and m.current["text"] == "likes tea"


def test_expiry_only_for_pending() -> None:
    m = proposed()
    m.expire(at=T0)
    assert m.status == EXPIRED
    with pytest.raises(NotACandidate):
        remembered().expire(at=T0)


def test_correct_replaces_or_supersedes() -> None:
    m = remembered(valid_from=T0)
    m.correct(text="I prefer coffee", valid_from=None, valid_to=None, reason="wrong", actor="alice", at=T0)
    assert m.revision == 2 and m.revisions[-1]["mode"] == "replace"
    m.correct(text="I prefer water", valid_from=T0 + timedelta(days=5), valid_to=None, reason=None,
              actor="alice", at=T0)
    assert m.revisions[-1]["mode"] == "supersede"
    periods = answer_periods(m.revisions)
    assert periods == [
        {"revision": 2, "valid_from": None, "valid_to": T0 + timedelta(days=5)},
        {"revision": 3, "valid_from": T0 + timedelta(days=5), "valid_to": None},
    ]
    with pytest.raises(NotAConfirmedMemory):
        proposed().correct(text="x", valid_from=None, valid_to=None, reason=None, actor="a", at=T0)


def test_supersede_drops_periods_that_start_later() -> None:
    revs = [
        {"revision": 1, "valid_from": T0, "valid_to": None, "mode": None},
        {"revision": 2, "valid_from": T0 + timedelta(days=10), "valid_to": None, "mode": "supersede"},
        {"revision": 3, "valid_from": T0 + timedelta(days=20), "valid_to": T0 + timedelta(days=30),
         "mode": "supersede"},
    ]
    assert [p["revision"] for p in answer_periods(revs)] == [1, 2, 3]
    assert answer_periods(revs)[1]["valid_to"] == T0 + timedelta(days=20)


def test_forgotten_is_terminal() -> None:
    m = remembered()
    m.forget(forget_id="fg-1", key_destroyed_at=T0, actor="alice", at=T0)
    assert m.status == FORGOTTEN
    for command in (
        lambda: m.correct(text="x", valid_from=None, valid_to=None, reason=None, actor="a", at=T0),
        lambda: m.forget(forget_id="fg-2", key_destroyed_at=T0, actor="a", at=T0),
        lambda: m.confirm(text=None, acknowledge_sensitive=True, actor="a", at=T0),
        lambda: m.reject(actor="a", at=T0),
        lambda: m.expire(at=T0),
    ):
        with pytest.raises(MemoryForgotten):
            command()


def test_valid_time_must_be_ordered() -> None:
    with pytest.raises(InvalidValidTime):
        remembered(valid_from=T0, valid_to=T0 - timedelta(days=1))


def test_text_rules() -> None:
    assert validate_text("fine") == "fine"
    with pytest.raises(InvalidText):
        validate_text("a\x00b")
    with pytest.raises(InvalidText):
        validate_text("bad \ud800 surrogate")
    with pytest.raises(TextTooLarge):
        validate_text("é" * 4097)  # 8194 bytes
    with pytest.raises(InvalidText):
        validate_text("   ")


def test_scope_rules() -> None:
    with pytest.raises(InvalidScope):
        Scope("acme", "alice", "restricted", None, None)
    with pytest.raises(InvalidScope):
        Scope("acme", "alice", "secret")


def test_visibility_is_decided_in_one_place() -> None:
    general = Scope("acme", "alice")
    restricted = Scope("acme", "alice", "restricted", "t-risk", "s-jira")
    alice = Caller("acme", "alice", "user")
    assert may_use(alice, general, Grants())
    assert not may_use(Caller("other", "alice", "user"), general, Grants())
    assert not may_use(Caller("acme", "bob", "user"), general, Grants())
    assert not may_use(Caller("acme", "alice", "admin"), general, Grants())
    assert may_use(Caller("acme", "alice", "bot", bot="b-1"), general, Grants())
    assert not may_use(Caller("acme", "alice", "bot"), general, Grants())
    assert not may_use(alice, restricted, Grants())
    assert may_use(alice, restricted, Grants(frozenset({"t-risk"}), frozenset({"s-jira"}),
                                             source_teams={"s-jira": "t-risk"}))
    # the source has moved to another team: its memories in the old team are out of use
    assert not may_use(alice, restricted, Grants(frozenset({"t-risk", "t-ops"}), frozenset({"s-jira"}),
                                                 source_teams={"s-jira": "t-ops"}))


def test_evidence_quotes_exactly() -> None:
    from engram.domain.evidence import Evidence, Source

    src = Source("chat", "chat-1", "m-1")
    ev = Evidence.quoted("prefer tea", "I prefer tea in the morning", src, T0)
    assert ev.as_dict() == {"quote": "prefer tea", "source": {"kind": "chat", "id": "chat-1", "message_id": "m-1"},
                            "occurred_at": T0}
    with pytest.raises(InvalidText):
        Evidence.quoted("prefers tea", "I prefer tea in the morning", src, T0)
    with pytest.raises(InvalidScope):
        Source("", "chat-1")
