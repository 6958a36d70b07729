"""The recall budget rule, for any text: never over budget, never a broken character, cut only the end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engram.domain.bundle import content_size, cut_utf8, fit

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


@given(texts, st.lists(texts, max_size=3), st.integers(min_value=0, max_value=2000))
def test_fit_stays_within_budget_and_only_cuts_the_end(text: str, quotes: list[str], budget: int) -> None:
    evidence = [{"quote": q, "source": {"kind": "chat", "id": "c"}} for q in quotes]
    kept, kept_evidence, used, truncated = fit(text, evidence, budget)
    assert used == content_size(kept, kept_evidence) <= budget
    assert truncated == (content_size(text, evidence) > budget)
    assert text.startswith(kept)
    assert [e["source"] for e in kept_evidence] == [e["source"] for e in evidence]
    for original, cut in zip(quotes, kept_evidence, strict=True):
        assert original.startswith(cut["quote"])
    if not truncated:
        assert (kept, kept_evidence) == (text, evidence)
    else:
        assert budget - used < 4  # filled up to a character's edge


@given(texts, st.integers(min_value=0, max_value=1200))
def test_cut_never_splits_a_character(text: str, budget: int) -> None:
    cut = cut_utf8(text, budget)
    assert len(cut.encode()) <= budget and text.startswith(cut)
    assert len(cut.encode()) > budget - 4 or cut == text
