"""What a recall hands back within its byte budget: whole items while they fit, then one cut to fit.

The budget counts the personal content an item carries, in UTF-8 bytes: its text and its evidence
quotes. A memory at the text limit (text and a quote of the same words) fits the default budget whole.
"""

from __future__ import annotations

from typing import Any


def utf8_size(text: str | None) -> int:
    return len(text.encode("utf-8")) if text else 0


def content_size(text: str, evidence: list[dict[str, Any]]) -> int:
    return utf8_size(text) + sum(utf8_size(e.get("quote")) for e in evidence)


def cut_utf8(text: str, budget: int) -> str:
    """The longest prefix of `text` within `budget` bytes, never splitting a character."""
    return text.encode("utf-8")[:max(budget, 0)].decode("utf-8", errors="ignore")


def fit(text: str, evidence: list[dict[str, Any]], budget: int) -> tuple[str, list[dict[str, Any]], int, bool]:
    """(text, evidence, bytes used, truncated). The text is kept first, then each quote in order,
    each cut to what remains; a cut quote is still an exact part of the person's words."""
    size = content_size(text, evidence)
    if size <= budget:
        return text, evidence, size, False
    kept_text = cut_utf8(text, budget)
    left = budget - utf8_size(kept_text)
    kept_evidence = []
    for e in evidence:
        quote = cut_utf8(e.get("quote") or "", left)
        left -= utf8_size(quote)
        kept_evidence.append({**e, "quote": quote})
    return kept_text, kept_evidence, budget - left, True
