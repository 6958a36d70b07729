"""Search terms: normalisation, stemming, CJK bigrams, and per-company blinding."""

from __future__ import annotations

import os

from engram.adapters.blind_index import BlindIndex, terms
from engram.adapters.crypto import MasterKey


def test_english_terms_are_stemmed_and_stopwords_dropped() -> None:
    assert terms("I prefer Weekly REPORTS as bullet points") == ["prefer", "week", "report", "bullet", "point"]


def test_chinese_becomes_bigrams() -> None:
    assert terms("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡"]
    assert terms("茶") == ["茶"]


def test_fullwidth_is_normalised() -> None:
    assert terms("ＲＥＰＯＲＴ") == terms("report")


def test_blinding_differs_between_companies_and_is_stable() -> None:
    index = BlindIndex(MasterKey(os.urandom(32)))
    assert index.blind("acme", "tea") == index.blind("acme", "tea")
    assert index.blind("acme", "tea") != index.blind("globex", "tea")
    assert index.query_terms("acme", "tea tea coffee") == [index.blind("acme", t) for t in ("tea", terms("coffee")[0])]
