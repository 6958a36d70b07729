"""Proposals from an extractor, and the server-side checks every proposal must pass."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .review import ContentPolicy


@dataclass(frozen=True)
class Proposal:
    text: str
    quote: str


@dataclass(frozen=True)
class Usage:
    """What a model call cost; None where the provider did not say."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def total(self) -> int | None:
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Extraction:
    proposals: list[Proposal]
    usage: Usage
    model: str


def accept_proposals(proposals: list[Proposal], user_text: str, policy: ContentPolicy,
                     max_text_bytes: int = 8192) -> list[Proposal]:
    """Keep only proposals whose quote is an exact part of the person's own words and that hold no secret.

    Scope never comes from here: the receipt decides it.
    """
    kept: list[Proposal] = []
    seen: set[tuple[str, str]] = set()
    for p in proposals:
        if not isinstance(p.text, str) or not isinstance(p.quote, str):
            continue
        text, quote = p.text.strip(), p.quote
        if not text or not quote.strip() or quote not in user_text:
            continue
        try:
            size = len(text.encode("utf-8"))
            quote.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate from a model: not text we can store
        if "\x00" in text or size > max_text_bytes:
            continue
        if policy.is_secret(text) or policy.is_secret(quote):
            continue
        if (text, quote) in seen:
            continue
        seen.add((text, quote))
        kept.append(Proposal(text, quote))
    return kept


_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+[\"'”’）)]*|\n|$)")
MAX_CONTEXT = 600  # characters


def context_of(message: str, quote: str) -> str | None:
    """The sentence or two of `message` around `quote`: the sentences it overlaps and the one before,
    so that a pronoun or a time word can be read; None when the quote is not in the message. An exact
    part of the message, at most MAX_CONTEXT characters around the quote."""
    start = message.find(quote)
    if not quote or start < 0:
        return None
    end = start + len(quote)
    spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(message) if m.group().strip()]
    inside = [i for i, (a, b) in enumerate(spans) if a < end and b > start]
    if not inside:
        return quote
    first, last = max(inside[0] - 1, 0), inside[-1]
    lo, hi = spans[first][0], spans[last][1]
    if hi - lo > MAX_CONTEXT:  # a long sentence: the quote and what fits around it
        room = max(MAX_CONTEXT - len(quote), 0) // 2
        lo, hi = max(lo, start - room), min(hi, end + room)
    return message[lo:hi].strip() or quote
