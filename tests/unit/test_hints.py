"""Semantic hints: the index ranks, Engram decides; observations count only when all sources are usable."""

from engram.domain.hints import SemanticHints


def test_facts_rank_only_usable_memories() -> None:
    hints = SemanticHints()
    hints.add_fact("a", 0.8)
    hints.add_fact("a", 0.4)
    hints.add_fact("b", 0.2)
    assert hints.scores({"a", "b"}) == {"a": 1.0, "b": 0.25}
    assert hints.scores({"b"}) == {"b": 1.0}
    assert hints.scores(set()) == {}


def test_an_observation_counts_only_when_every_source_is_usable() -> None:
    hints = SemanticHints()
    hints.add_fact("a", 0.1)
    hints.add_observation(0.9, frozenset({"a", "b"}))
    assert hints.memory_ids() == {"a", "b"}
    assert hints.scores({"a", "b"}) == {"a": 1.0, "b": 1.0}
    # b was forgotten (or is out of the caller's scope): the observation is dropped whole
    assert hints.scores({"a"}) == {"a": 1.0}
    only_a = SemanticHints(facts={"a": 0.1, "c": 0.2}, observations=[(0.9, frozenset({"a", "b"}))])
    assert only_a.scores({"a", "c"}) == {"a": 0.5, "c": 1.0}  # a keeps only its own fact's score


def test_an_observation_with_an_unknown_source_is_dropped() -> None:
    hints = SemanticHints(observations=[(0.9, frozenset({"a", None}))])
    assert hints.memory_ids() == {"a"}
    assert hints.scores({"a"}) == {}
    assert not SemanticHints() and hints
