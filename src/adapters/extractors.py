"""Extractors behind one port: conservative rules by default, any OpenAI-compatible model when configured."""

from __future__ import annotations

import re
from typing import Protocol

from engram.domain.extraction import Extraction, Proposal, Usage

from .chat_model import ChatModel, ModelError

ExtractorError = ModelError  # the model call failed; whatever it cost is unknown


class Extractor(Protocol):
    name: str

    def estimate_tokens(self, text: str) -> int:
        """A conservative upper bound of what one call on this text may cost."""
        ...

    def extract(self, text: str) -> Extraction: ...


_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
_EN = re.compile(
    r"^(?:(?:also|and|oh|btw|by the way|so|but)[, ]+)?(?:"
    r"i\s+(?:really\s+|usually\s+|generally\s+)?(?:prefer|like|love|enjoy|hate|dislike|don't like|do not like|"
    r"always|never|want|need|am allergic|work)\b"
    r"|i'm\s+(?:allergic|vegetarian|vegan|based|left-handed)\b"
    r"|my\s+[\w' -]{1,40}?\s+(?:is|are|was)\b"
    r"|from now on\b|going forward\b|in (?:the )?future\b"
    r"|(?:please\s+)?remember(?:\s+that)?\b"
    r"|(?:please\s+)?(?:always|never)\s+\w+"
    r"|call me\b)",
    re.IGNORECASE,
)
_ZH = re.compile(r"^(?:另外|还有|对了|而且)?[，,]?(?:我(?:很|也|更|比较|一直|总是|从不|不)?(?:喜欢|偏好|讨厌|习惯|爱|想要|需要)"
                 r"|我的.{1,20}?是|以后|今后|从现在起|从今以后|请记住|记住|请(?:一直|总是|不要)|我(?:总是|从不|一般))")


class RuleExtractor:
    """First-person statements, preferences and standing instructions, English and Chinese.

    Each proposal is one sentence of the message, quoted exactly. Questions are skipped.
    """

    name = "rules"
    model = "rules-v1"

    def estimate_tokens(self, text: str) -> int:
        return max(1, len(text.encode("utf-8")) // 4)

    def extract(self, text: str) -> Extraction:
        proposals = []
        for m in _SENTENCE.finditer(text):
            raw = m.group()
            start = m.start() + (len(raw) - len(raw.lstrip()))
            quote = text[start:m.end()].rstrip()
            if not quote or quote.endswith(("?", "？")):
                continue
            body = quote.rstrip(".!。！")
            if _EN.search(body) or _ZH.search(body):
                proposals.append(Proposal(text=body, quote=quote))
        used = self.estimate_tokens(text)
        return Extraction(proposals=proposals, usage=Usage(prompt_tokens=used, completion_tokens=0), model=self.model)


SYSTEM_PROMPT = (
    "You extract durable personal memories from one chat message written by a person. "
    "Return only first-person facts, preferences and standing instructions that will still be true later. "
    "For each, give a short third-person-free restatement as 'text' and the exact words it rests on as "
    "'quote', copied character for character from the message. Never include passwords, keys or tokens. "
    "Return {\"memories\": []} when there is nothing to remember."
)
SCHEMA = {
    "name": "memories",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["memories"],
        "properties": {
            "memories": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["text", "quote"],
                    "properties": {"text": {"type": "string"}, "quote": {"type": "string"}},
                },
            }
        },
    },
}


class OpenAIExtractor:
    """Any OpenAI-compatible chat-completions endpoint, asked for JSON-schema output."""

    name = "llm"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 30.0,
                 max_output_tokens: int = 512) -> None:
        self.chat = ChatModel(base_url, model, api_key, timeout=timeout, max_output_tokens=max_output_tokens)
        self.model = model

    def estimate_tokens(self, text: str) -> int:
        return self.chat.estimate_tokens(SYSTEM_PROMPT, text)

    def extract(self, text: str) -> Extraction:
        answer = self.chat.ask(SYSTEM_PROMPT, text, SCHEMA)
        items = (answer.content or {}).get("memories")
        proposals = [Proposal(text=i["text"], quote=i["quote"]) for i in items if isinstance(i, dict)
                     and isinstance(i.get("text"), str) and isinstance(i.get("quote"), str)] \
            if isinstance(items, list) else []  # a malformed answer proposes nothing; its usage still counts
        return Extraction(proposals=proposals, usage=answer.usage, model=self.model)
