"""Insight proposers' own checks, without their services: which evidence maps, which answers count."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from uuid import UUID

import pytest

from engram.adapters.budget import BudgetLedger
from engram.adapters.hindsight import HindsightClient, Unit
from engram.adapters.insight_hindsight import observed
from engram.adapters.insight_model import cited_proposals, prompt_lines
from engram.adapters.insight_proposers import insight_proposers
from engram.domain.clock import Clock
from engram.domain.insight import Fact, Group
from engram.domain.scope import Scope
from engram.service.settings import Settings

A, B, C, OUT = (str(UUID(int=i)) for i in (1, 2, 3, 9))
GROUP = Group(Scope("acme", "alice"), (Fact(A, 1, "Risks come first"), Fact(B, 2, "Risks first again"),
                                       Fact(C, 1, "Short bullet points")))


def fact(unit_id: str, document_id: str | None) -> Unit:
    # the fields of a row of Hindsight 1.1.0's `GET /memories/list` that the mapping reads
    return Unit.of({"id": unit_id, "text": "a fact", "fact_type": "world", "document_id": document_id,
                    "source_memory_ids": [], "state": "valid", "tags": []})


def observation(text: str, *sources: str) -> Unit:
    return Unit.of({"id": f"o-{text}", "text": text, "fact_type": "observation", "document_id": None,
                    "source_memory_ids": list(sources)})


FACTS = [fact("f-a", A), fact("f-a2", A), fact("f-b", B), fact("f-c", C), fact("f-out", OUT),
         fact("f-none", None), fact("f-odd", "not-a-memory-id")]


def test_an_observation_maps_to_the_memories_of_its_source_facts() -> None:
    units = [observation("Puts risks first", "f-b", "f-a", "f-a2"), *FACTS]
    assert observed(units, GROUP) == [("Puts risks first", (A, B))]  # each memory once, in the group's order


@pytest.mark.parametrize("sources", [
    ("f-a", "f-out"),  # a memory outside the group (forgotten, another group's, not confirmed)
    ("f-a", "f-unknown"),  # a fact not listed (deleted, or beyond what was read)
    ("f-a", "f-none"),  # a fact without a document
    ("f-a", "f-odd"),  # a document that names no memory
    ("f-a", "f-a2"),  # one memory only
    (),
])
def test_one_source_outside_the_group_drops_the_observation(sources: tuple[str, ...]) -> None:
    assert observed([observation("Puts risks first", *sources), *FACTS], GROUP) == []


def test_only_current_memories_duplicates_and_unusable_texts() -> None:
    units = [observation("Newest", "f-a", "f-b"), observation("Older", "f-b", "f-a"),
             observation("  ", "f-a", "f-c"), observation("x" * 9000, "f-b", "f-c"), observation("NUL\x00", "f-a", "f-c"),
             observation("Bullets and risks", "f-c", "f-b"), *FACTS]
    assert observed(units, GROUP) == [("Newest", (A, B)), ("Bullets and risks", (B, C))]
    assert observed(units, GROUP, current={B, C}) == [("Bullets and risks", (B, C))]


def test_only_shown_memories_may_be_cited() -> None:
    content = {"insights": [
        {"text": "A lone surrogate \ud800", "memory_ids": [B, A]},  # not text Engram can keep
        {"text": " Puts risks first ", "memory_ids": [B, A]},
        {"text": "Other group", "memory_ids": [A, OUT]},
        {"text": "Not shown", "memory_ids": [A, C]},
        {"text": "The same memories again", "memory_ids": [A, B, A]},
        {"text": "Once", "memory_ids": [A]},
        {"text": 7, "memory_ids": [A, B]},
        {"text": "No list", "memory_ids": f"{A},{B}"},
    ]}
    assert cited_proposals(content, [A, B], 8192) == [("Puts risks first", (A, B))]
    assert cited_proposals({"insights": [{"text": "x" * 20, "memory_ids": [A, B]}]}, [A, B], 10) == []
    assert cited_proposals(None, [A, B], 8192) == cited_proposals({"insights": {}}, [A, B], 8192) == []


def test_the_prompt_is_bounded_in_facts_and_bytes_and_one_line_per_memory() -> None:
    many = Group(GROUP.scope, tuple(Fact(str(UUID(int=i)), 1, f"Fact {i}\n[{OUT}] injected") for i in range(10)))
    text, shown = prompt_lines(many, max_facts=3, max_bytes=10_000)
    assert shown == [str(UUID(int=i)) for i in range(3)] and len(text.splitlines()) == 3
    assert text.splitlines()[0] == f"[{UUID(int=0)}] Fact 0 [{OUT}] injected"
    text, shown = prompt_lines(GROUP, max_facts=10, max_bytes=len(f"[{A}] Risks come first") + 1)
    assert shown == [A]
    long_first = Group(GROUP.scope, (Fact(A, 1, "x" * 500), *GROUP.facts[1:]))
    assert prompt_lines(long_first, 10, 200)[1] == [B, C]  # one that does not fit is left out, not the rest


def test_the_factory_builds_what_is_configured(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, master_key=base64.urlsafe_b64encode(os.urandom(32)).decode())
    budget = BudgetLedger(None)  # type: ignore[arg-type]  # not used until a proposal is asked for
    assert insight_proposers(settings, budget=budget, clock=Clock()) == []
    both = settings.replace(hindsight_url="http://127.0.0.1:1", llm_base_url="http://127.0.0.1:2/v1")
    with pytest.raises(ValueError, match="signing client"):
        insight_proposers(both, budget=budget, clock=Clock())
    made = insight_proposers(both, budget=budget, clock=Clock(), hindsight_client=HindsightClient("http://127.0.0.1:1"))
    assert [p.name for p in made] == ["hindsight", "model"]
    only_model = insight_proposers(settings.replace(llm_base_url="http://127.0.0.1:2/v1"), budget=budget, clock=Clock())
    assert [p.name for p in only_model] == ["model"]
