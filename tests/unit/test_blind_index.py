"""Search terms: normalisation, stemming, CJK bigrams, and per-company blinding."""

from __future__ import annotations

from datetime import date

from engram.adapters.blind_index import WEIGHT_DAY, WEIGHT_PREFIX, BlindIndex, index_terms, terms, weighted_terms
from engram.adapters.crypto import DerivationRoot


def test_english_terms_are_stemmed_and_stopwords_dropped() -> None:
    assert terms("I prefer Weekly REPORTS as bullet points") == ["prefer", "week", "report", "bullet", "point"]


def test_chinese_becomes_bigrams_and_loose_single_characters() -> None:
    assert terms("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡"]
    assert terms("茶") == ["茶"]
    assert index_terms("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡", "喜", "欢", "咖", "啡"]
    # digits never glue to Chinese, and question words are not terms
    assert terms("我2025年9月21日晚饭做了什么？") == ["我", "2025", "年", "9", "月", "21", "日晚", "晚饭", "饭做", "做了"]


def test_question_words_are_not_terms_and_near_forms_are_loose_terms() -> None:
    assert terms("Where did you draw it? How does she do that?") == ["draw"]
    assert weighted_terms("What am I allergic to? I drew it") == [
        ("allerg", 1.0), ("drew", 1.0), ("~aller", WEIGHT_PREFIX), ("draw", 1.0)]
    assert "~aller" in index_terms("my allergies")


def test_fullwidth_is_normalised() -> None:
    assert terms("ＲＥＰＯＲＴ") == terms("report")


def test_blinding_differs_between_companies_and_is_stable() -> None:
    index = BlindIndex(DerivationRoot.new())
    assert index.blind("acme", "tea") == index.blind("acme", "tea")
    assert index.blind("acme", "tea") != index.blind("globex", "tea")
    assert index.query_terms("acme", "tea tea coffee") == [index.blind("acme", t) for t in ("tea", terms("coffee")[0])]


def test_a_memory_carries_the_day_it_was_said_and_a_question_asks_for_it() -> None:
    index = BlindIndex(DerivationRoot.new())
    day = index.blind("acme", "@2025-12-09")
    assert index.term_counts("acme", "Went to the zoo", date(2025, 12, 9))[day] == 1
    terms_, weights = index.recall_terms("acme", "What did I do?", [date(2025, 12, 9)])
    assert dict(zip(terms_, weights, strict=True))[day] == WEIGHT_DAY
