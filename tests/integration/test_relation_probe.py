"""The relation probe (ADR 0043) with the packaged model: a change it offers as an update, two facts that
are both true it leaves alone, and weights of another model it refuses. How well it does on pairs it
never saw is measured by bench/relation_probe.py and reported in docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engram.adapters.embedders import LocalEmbedder
from engram.adapters.relation_probe import RelationProbe


@pytest.fixture(scope="module")
def probe() -> RelationProbe:
    return RelationProbe(LocalEmbedder())


def test_a_changed_fact_is_an_update_and_two_true_facts_are_nothing(probe: RelationProbe) -> None:
    said = probe.judge("acme", "alice", "I go to the climbing hall in Neukölln now",
                       ["My gym is the Fitness First on Main Street", "I play tennis on Sundays"])
    assert said == ["update", None]
    assert probe.judge("acme", "alice", "I live in Lisbon", ["My sister lives in Porto"]) == [None]
    assert probe.judge("acme", "alice", "anything", []) == []


def test_probabilities_are_one_row_an_old_memory_summing_to_one(probe: RelationProbe) -> None:
    rows = probe.probabilities("I drive a blue Honda Civic", ["My car is the blue Civic", "我女儿叫朵朵"])
    assert rows.shape == (2, 3)
    assert np.allclose(rows.sum(axis=1), 1.0, atol=1e-5)


def test_weights_of_another_model_are_refused() -> None:
    class Other:
        model = "text-embedding-3-small"
        max_chars = 1200

        def passages(self, texts: Any) -> Any:
            return np.zeros((len(texts), 384), dtype=np.float32)

    with pytest.raises(ValueError, match="trained on"):
        RelationProbe(Other())  # type: ignore[arg-type]
