"""The sensitive probe (ADR 0043) with the packaged model: what it lets through of the rules' holds, what it
keeps, and that the rules decide alone when it cannot answer. How well it does on chat it never saw is
measured by bench/sensitive_probe.py and reported in docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engram.adapters.content_rules import ContentRules
from engram.adapters.embedders import LocalEmbedder
from engram.adapters.sensitive_probe import SensitiveProbe
from engram.adapters.sensitive_rules import sensitive_kind
from engram.contract.responses import CandidateOut, MemoryOut
from engram.domain.memory_rules import CONFIRMED, PENDING
from engram.domain.review import NORMAL_CONTENT, SECRET_CONTENT, SENSITIVE_CONTENT
from engram.domain.scope import Caller

from tests.support.fakes import build

# held by the rules (a condition named), about no one: a show
A_SHOW = "The new hospital drama has a surgeon with insomnia and it's so dramatic"
# a person's own health facts
OWN = ("I was diagnosed with type 2 diabetes last month", "My dad has been on warfarin since his heart attack")


@pytest.fixture(scope="module")
def probe() -> SensitiveProbe:
    return SensitiveProbe(LocalEmbedder())


def test_what_the_rules_hold_about_no_one_is_let_through_and_a_persons_fact_is_kept(probe: SensitiveProbe) -> None:
    rules, both = ContentRules(), ContentRules(probe.ordinary)
    assert sensitive_kind(A_SHOW) == "health" and rules.classify(A_SHOW) == SENSITIVE_CONTENT
    assert both.classify(A_SHOW) == NORMAL_CONTENT
    for text in OWN:
        assert both.classify(text) == SENSITIVE_CONTENT, text
        assert probe.probability(text) > 0.9


def test_the_probe_never_holds_what_the_rules_let_through_nor_sees_a_secret() -> None:
    seen: list[str] = []

    def ordinary(text: str) -> bool:
        seen.append(text)
        return False  # "sensitive", whatever it is

    both = ContentRules(ordinary)
    assert both.classify("I prefer green tea") == NORMAL_CONTENT
    assert both.classify("my password is hunter22!") == SECRET_CONTENT
    assert seen == []  # asked only about what the rules hold


def test_when_the_model_cannot_answer_the_rules_hold() -> None:
    def broken(text: str) -> bool:
        raise RuntimeError("the model is not there")

    assert ContentRules(broken).classify(OWN[0]) == SENSITIVE_CONTENT
    assert ContentRules(broken).classify(A_SHOW) == SENSITIVE_CONTENT


def test_weights_of_another_model_are_refused() -> None:
    class Other:
        model = "text-embedding-3-small"
        max_chars = 1200

        def query(self, text: str) -> Any:
            return np.zeros(384, dtype=np.float32)

    with pytest.raises(ValueError, match="trained on"):
        SensitiveProbe(Other())  # type: ignore[arg-type]


def test_a_remember_of_a_show_is_stored_and_of_a_diagnosis_waits_for_review(probe: SensitiveProbe) -> None:
    world = build(policy=ContentRules(probe.ordinary))
    alice = Caller("acme", "alice", "user")
    chat = {"kind": "chat", "id": "chat-42", "message_id": "m-1"}

    def remember(text: str) -> MemoryOut | CandidateOut:
        return world.memories.remember(alice, text=text, source=chat, occurred_at=None, visibility="general",
                                       team=None, valid_from=None, valid_to=None)

    assert remember(A_SHOW).status == CONFIRMED
    assert remember(OWN[0]).status == PENDING
