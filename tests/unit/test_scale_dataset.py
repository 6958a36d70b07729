"""bench/scale.py's population and queries are what its figures claim: misses find nothing, hits share
a term with the memory they were made from, and every person's restricted channels are theirs and
their bot's."""

from __future__ import annotations

import random
from collections.abc import Iterator
from types import ModuleType

import pytest

from engram.adapters.blind_index import index_terms, weighted_terms
from engram.domain.directory import Directory
from engram.domain.scope import Caller


@pytest.fixture(scope="module")
def scale() -> Iterator[ModuleType]:
    from bench import scale

    yield scale


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_miss_shares_no_term_with_any_memory_and_a_hit_shares_one_with_its_own(scale: ModuleType, lang: str) -> None:
    language = scale.Language(lang, seed=3)
    r = random.Random(4)
    said_terms: set[str] = set()
    for i in range(3000):
        text, said = language.sentence(r, question=i % 20 == 0)
        terms = set(index_terms(text))
        said_terms |= terms
        hit = {t for t, _ in weighted_terms(language.hit(r, said))}
        assert hit & terms, (lang, i)
    misses = [language.miss(r) for _ in range(300)]
    assert all(not {t for t, _ in weighted_terms(q)} & said_terms for q in misses)
    assert all(weighted_terms(q) for q in misses)  # a miss still asks for something


def test_the_population_spreads_memories_over_companies_and_people_as_said(scale: ModuleType) -> None:
    pop = scale.population(100_000, per_person=100, seed=1)
    assert len(pop.people) == 1000
    share = {c: sum(w for p, w in zip(pop.people, pop.weights, strict=True) if p.company == c)
             for c, _ in scale.COMPANIES}
    assert share == pytest.approx(dict(scale.COMPANIES))
    busiest = max(pop.weights)
    assert 0.06 < busiest < 0.12  # a seventh of the largest company's 60%
    zh = sum(p.lang == "zh" for p in pop.people) / len(pop.people)
    assert 0.25 < zh < 0.35


def test_each_person_and_the_bot_acting_for_them_hold_their_team_channels(scale: ModuleType) -> None:
    pop = scale.population(10_000, per_person=100, seed=2)
    for company, _ in scale.COMPANIES:
        directory = Directory.from_document(scale.directory(pop, company))
        directory.validate()
        for p in (p for p in pop.people if p.company == company):
            grants = directory.grants(Caller(company, p.id, "bot", bot=scale.BOT))
            assert p.team in grants.teams
            assert {f"{p.team}-channel", f"{p.team}-standup"} <= grants.sources
