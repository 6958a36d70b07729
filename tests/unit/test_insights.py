"""The Insight aggregate's rules, the evidence judgment and the local proposer, in milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.insight_local import LocalProposer, is_negated, is_preference
from engram.domain.insight import (
    CORRECTED,
    FORGOTTEN,
    OUT_OF_SCOPE,
    REVOKED,
    Fact,
    Group,
    Insight,
    InsightNotOpen,
    InvalidInsight,
    broken_by,
    insight_id,
)
from engram.domain.scope import Scope

from tests.support.helpers import examples

AT = datetime(2026, 11, 2, tzinfo=UTC)
SCOPE = Scope("acme", "alice")


def facts(*texts: str) -> tuple[Fact, ...]:
    return tuple(Fact(f"m-{i}", 1, t) for i, t in enumerate(texts))


def test_an_insight_rests_on_two_memories_and_is_decided_once() -> None:
    with pytest.raises(InvalidInsight):
        Insight.propose(scope=SCOPE, text="x", evidence=facts("a"), proposer="local", actor="local", at=AT)
    with pytest.raises(InvalidInsight):  # the same memory twice is still one
        Insight.propose(scope=SCOPE, text="x", evidence=(Fact("m", 1, "a"), Fact("m", 1, "a")), proposer="local",
                        actor="local", at=AT)
    insight = Insight.propose(scope=SCOPE, text="Puts risks first", evidence=facts("a", "b"), proposer="local",
                              actor="local", at=AT)
    assert insight.id == insight_id("acme", "alice", "local", ["m-1", "m-0"])  # order does not matter
    assert insight.id != insight_id("acme", "bob", "local", ["m-0", "m-1"])
    assert insight.id != insight_id("acme", "alice", "model", ["m-0", "m-1"])
    insight.confirm(actor="alice", at=AT)
    with pytest.raises(InsightNotOpen):
        insight.reject(actor="alice", at=AT)
    insight.invalidate(reason=FORGOTTEN, memory_id="m-0", at=AT, key_destroyed_at=AT)
    insight.invalidate(reason=CORRECTED, memory_id="m-1", at=AT)  # already: nothing new
    assert insight.status == "invalidated" and insight.reason == FORGOTTEN
    assert [type(e).__name__ for e in insight.collect_events()] == ["Proposed", "Confirmed", "Invalidated"]


def test_evidence_breaks_for_the_first_reason_found() -> None:
    evidence = [{"memory_id": "a", "revision": 1}, {"memory_id": "b", "revision": 2}]
    ok = {"status": "confirmed", "usable": True}
    assert broken_by(evidence, {"a": {**ok, "revision": 1}, "b": {**ok, "revision": 2}}) is None
    assert broken_by(evidence, {"a": {**ok, "revision": 1}}) == (FORGOTTEN, "b")
    assert broken_by(evidence, {"a": {**ok, "revision": 1, "status": "forgotten"}, "b": {**ok, "revision": 2}}) \
        == (FORGOTTEN, "a")
    assert broken_by(evidence, {"a": {**ok, "revision": 2}, "b": {**ok, "revision": 2}}) == (CORRECTED, "a")
    assert broken_by(evidence, {"a": {**ok, "revision": 1}, "b": {**ok, "revision": 2, "usable": False}}) \
        == (OUT_OF_SCOPE, "b")
    assert broken_by(evidence, {"a": {**ok, "revision": 1, "usable": False, "revoked": True},
                                "b": {**ok, "revision": 2}}) == (REVOKED, "a")


def test_the_local_proposer_finds_repeated_instructions_in_english_and_chinese() -> None:
    group = Group(SCOPE, facts(
        "Remember that the weekly meeting is on Friday",
        "Please remember that weekly reports should be short bullet points",
        "From now on, risks come first in every report",
        "Remember: risks first, always",
        "Never put risks first",
        "记住，周报要简短要点",
        "从现在起，汇报时风险优先",
        "记住：风险优先",
        "不要风险优先",
    ))
    found = {p.memory_ids: p.text for p in LocalProposer().propose(group)}
    assert found == {("m-2", "m-3"): "Said 2 times: Remember: risks first, always",
                     ("m-6", "m-7"): "多次提到（2 次）：记住：风险优先"}
    assert not is_preference("The weekly meeting is on Friday") and is_preference("周报要简短要点")
    assert is_negated("Never put risks first") and is_negated("不要风险优先") and not is_negated("风险优先")


def test_the_same_frame_around_another_value_is_another_preference() -> None:
    """Swapped values (another item, another number, another brand) say something else; a wording that
    only adds words to the other says it again."""
    group = Group(SCOPE, facts(
        "In status emails, list blockers first.",
        "In status emails, list wins first.",
        "Keep your replies to me under 100 words.",
        "Keep your replies to me under 300 words.",
        "给我推荐手机的时候优先考虑华为。",
        "给我推荐手机的时候优先考虑苹果。",
        "Please keep your replies to me under 300 words, always.",
    ))
    found = {p.memory_ids for p in LocalProposer().propose(group)}
    assert found == {("m-3", "m-6")}


def test_a_character_of_negation_inside_another_word_negates_nothing() -> None:
    # 别人 is "other people": the first two are a preference and its negation, not two negations
    assert not is_negated("我喜欢别人叫我英文名。") and is_negated("我不喜欢别人叫我英文名。")
    assert not is_negated("这家店的咖啡不错，以后要常来") and is_negated("别再给我推荐这家店了")
    group = Group(SCOPE, facts("我喜欢别人叫我英文名。", "我不喜欢别人叫我英文名。"))
    assert LocalProposer().propose(group) == []


WORDS = st.sampled_from(["risks", "first", "reports", "short", "bullet", "always", "never", "please", "tea",
                         "风险", "优先", "周报", "要", "简短", "不要", "the", "in", "记住"])
TEXTS = st.lists(st.lists(WORDS, min_size=1, max_size=6).map(" ".join), min_size=0, max_size=12)


@settings(max_examples=examples(200), deadline=None)
@given(TEXTS, st.randoms(use_true_random=False))
def test_local_proposals_cite_only_their_group_and_ignore_order(texts: list[str], rnd) -> None:
    group = Group(SCOPE, facts(*texts))
    proposals = LocalProposer().propose(group)
    ids = {f.memory_id for f in group.facts}
    for p in proposals:
        assert len(set(p.memory_ids)) >= 2 and set(p.memory_ids) <= ids and p.proposer == "local"
        cited = [f for f in group.facts if f.memory_id in p.memory_ids]
        assert len({is_negated(f.text) for f in cited}) == 1  # never "do X" with "never do X"
        assert all(is_preference(f.text) for f in cited)
    cited_twice = [m for p in proposals for m in p.memory_ids]
    assert len(cited_twice) == len(set(cited_twice))  # each memory in one proposal at most
    shuffled = list(group.facts)
    rnd.shuffle(shuffled)
    again = LocalProposer().propose(Group(SCOPE, tuple(shuffled)))
    assert sorted((p.memory_ids, p.text) for p in again) == sorted((p.memory_ids, p.text) for p in proposals)
