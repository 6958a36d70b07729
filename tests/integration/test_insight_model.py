"""The model insight proposer: the configured model over one group's facts, within the learning budgets."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from engram.adapters.budget import BudgetLedger, Limits
from engram.adapters.chat_model import ChatModel
from engram.adapters.insight_model import ModelInsightProposer
from engram.domain.clock import FixedClock
from engram.domain.insight import Fact, Group, Proposal
from engram.domain.scope import Scope

from tests.support.fake_llm import FakeLLM

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
ALICE = Scope("acme", "alice")
ROOMY = Limits(company_tokens=1_000_000, company_calls=100)


@pytest.fixture
def budget(engram) -> BudgetLedger:
    return BudgetLedger(engram.store.datastore)


def proposer(llm: FakeLLM, budget: BudgetLedger, limits: Limits = ROOMY) -> ModelInsightProposer:
    return ModelInsightProposer(ChatModel(llm.url, "test-model"), budget, limits, FixedClock(T0))


def group(*texts: str, scope: Scope = ALICE) -> Group:
    return Group(scope, tuple(Fact(str(uuid4()), 1, t) for t in texts))


def usage(budget: BudgetLedger) -> list[dict[str, Any]]:
    with budget.datastore.get_connection() as conn:
        return conn.execute("SELECT person, extractor, model, tokens_reserved, prompt_tokens, completion_tokens, "
                            "tokens_charged, proposals, accepted, outcome FROM engram_usage_ledger ORDER BY at, entry_id"
                            ).fetchall()


def test_a_valid_insight_comes_back_with_its_memories_and_its_cost_is_charged(llm, budget, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    risks = group("Risks come first in the weekly report", "周报里风险优先", "Put the risks first\nwhen summarising")
    seen: list[list[tuple[str, str]]] = []

    def answer(lines: list[tuple[str, str]]) -> dict[str, Any]:
        seen.append(lines)
        return {"insights": [{"text": "风险优先 / puts risks first", "memory_ids": [m for m, _ in lines]}]}

    llm.insights = answer
    found = proposer(llm, budget).propose(risks)
    ids = tuple(f.memory_id for f in risks.facts)
    assert found == [Proposal("风险优先 / puts risks first", ids, "model")]
    # the prompt lists `[<memory id>] <text>`, one line each (a line break in a text cannot start a line)
    assert seen == [[(ids[0], "Risks come first in the weekly report"), (ids[1], "周报里风险优先"),
                     (ids[2], "Put the risks first when summarising")]]
    assert len(llm.calls) == 1 and llm.calls[0]["response_format"]["json_schema"]["name"] == "insights"
    # reserved before, settled after: the day is charged what the model said it used (40 + 10)
    assert budget.today("acme", T0.date()) == {"tokens": 50, "calls": 1, "failed_calls": 0}
    [row] = usage(budget)
    assert row["tokens_reserved"] > 50 and dict(row, tokens_reserved=None) == {
        "person": "alice", "extractor": "insight-model", "model": "test-model", "tokens_reserved": None,
        "prompt_tokens": 40, "completion_tokens": 10, "tokens_charged": 50, "proposals": 1, "accepted": 1,
        "outcome": "ok"}
    assert not [r for r in caplog.records if "risk" in r.getMessage().lower() or "风险" in r.getMessage()]


def test_an_insight_citing_an_unknown_memory_or_another_groups_is_dropped(llm, budget) -> None:
    mine = group("Risks come first", "Risks first again", "Short bullet points please")
    theirs = group("Risks matter", scope=Scope("acme", "alice", "restricted", "t-risk", "s-jira"))
    a, b, c = (f.memory_id for f in mine.facts)
    llm.insights = lambda lines: {"insights": [
        {"text": "Puts risks first", "memory_ids": [b, a]},  # kept, in the group's order
        {"text": "Risks everywhere", "memory_ids": [a, theirs.facts[0].memory_id]},  # another group's memory
        {"text": "Invented", "memory_ids": [a, str(uuid4())]},  # an id that exists nowhere
        {"text": "One memory is no insight", "memory_ids": [c, c]},
        {"text": "Same memories again", "memory_ids": [a, b]},  # one proposal per set of memories
        {"text": "", "memory_ids": [a, c]},
        {"text": "Ids of the wrong type", "memory_ids": [1, 2]},
        "not an object",
    ]}
    assert proposer(llm, budget).propose(mine) == [Proposal("Puts risks first", (a, b), "model")]
    [row] = usage(budget)
    assert (row["proposals"], row["accepted"], row["outcome"]) == (8, 1, "ok")


@pytest.mark.parametrize("content", ["{not json", "[]", '{"insights": "none"}', '{"memories": []}'])
def test_a_malformed_answer_proposes_nothing_and_still_counts(llm, budget, content: str) -> None:
    llm.insights = lambda lines: content
    assert proposer(llm, budget).propose(group("Risks come first", "Risks first again")) == []
    # the provider reported 50 tokens: charged those, and the call shows as failed
    assert budget.today("acme", T0.date()) == {"tokens": 50, "calls": 1, "failed_calls": 1}
    [row] = usage(budget)
    assert (row["outcome"], row["proposals"], row["accepted"]) == ("malformed", 0, 0)


def test_a_failed_call_proposes_nothing_and_is_charged_no_tokens(llm, budget) -> None:
    llm.failures = [503]
    assert proposer(llm, budget).propose(group("Risks come first", "Risks first again")) == []
    [row] = usage(budget)
    assert row["outcome"] == "error" and row["tokens_charged"] == 0 < row["tokens_reserved"]
    assert budget.today("acme", T0.date()) == {"tokens": 0, "calls": 1, "failed_calls": 1}


def test_a_spent_budget_means_no_call_at_all(llm, budget) -> None:
    llm.insights = lambda lines: {"insights": [{"text": "Puts risks first", "memory_ids": [m for m, _ in lines]}]}
    risks = group("Risks come first", "Risks first again")
    # the same budgets as learning: what extraction spent today counts here too
    budget.reserve("acme", "alice", T0.date(), 10, ROOMY, T0)
    assert proposer(llm, budget, Limits(company_tokens=1_000_000, company_calls=1)).propose(risks) == []
    assert proposer(llm, budget, Limits(1_000_000, 100, person_tokens=1_000_000, person_calls=1)).propose(risks) == []
    assert proposer(llm, budget, Limits(company_tokens=100, company_calls=100)).propose(risks) == []  # too large
    assert proposer(llm, budget, Limits(company_tokens=0, company_calls=100)).propose(risks) == []  # paused
    assert llm.calls == [] and usage(budget) == []
    assert budget.today("acme", T0.date()) == {"tokens": 10, "calls": 1, "failed_calls": 0}
    # bob's own allowance is untouched by alice's
    bob = group("Risks come first", "Risks first again", scope=Scope("acme", "bob"))
    assert len(proposer(llm, budget, Limits(1_000_000, 100, person_tokens=1_000_000, person_calls=1)).propose(bob)) == 1
    assert len(llm.calls) == 1


def test_fewer_than_two_facts_that_fit_mean_no_call(llm, budget) -> None:
    assert proposer(llm, budget).propose(group("Risks come first")) == []
    huge = ModelInsightProposer(ChatModel(llm.url, "test-model"), budget, ROOMY, FixedClock(T0), max_prompt_bytes=100)
    assert huge.propose(group("x" * 200, "Risks come first")) == []  # only one fits
    assert llm.calls == [] and budget.today("acme", T0.date()) == {"tokens": 0, "calls": 0, "failed_calls": 0}


def test_the_insight_service_runs_the_model_beside_the_local_proposer(settings, database, llm) -> None:
    from engram.api.bootstrap import Engram
    from engram.domain.scope import Caller

    alice = Caller("acme", "alice", "user")
    system = Engram.open(settings.replace(llm_base_url=llm.url, llm_model="test-model"), database=database,
                         background=False)
    try:
        ids = [system.memories.remember(alice, text=t, source={"kind": "chat", "id": "c-1", "message_id": None},
                                        occurred_at=None, visibility="general", team=None, valid_from=None,
                                        valid_to=None).id
               for t in ("Risks come first in the weekly report", "I want the risks up front when summarising",
                         "I like tea")]
        llm.insights = lambda lines: {"insights": [
            {"text": "Puts risks first", "memory_ids": [m for m, t in lines if "risks" in t.lower()]},
            {"text": "Invented", "memory_ids": [ids[2], str(uuid4())]}]}
        assert system.insights is not None
        n = system.insights.propose_due()
        assert n == 1, (llm.calls, system.insights.proposers)
        [insight] = system.insights.list_insights(alice).items
        assert (insight.proposer, insight.text, sorted(insight.evidence_memory_ids)) == (
            "model", "Puts risks first", sorted(ids[:2]))
        assert {e.memory_id for e in insight.evidence} == set(ids[:2])
        assert system.learning.budget.today("acme", datetime.now(UTC).date())["calls"] == 1
    finally:
        system.close()
