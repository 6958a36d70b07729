"""Extractors behind one port: conservative rules by default, any OpenAI-compatible model when configured."""

from __future__ import annotations

import re
from typing import Protocol

from engram.domain.extraction import Extraction, Proposal, Usage

from .chat_model import ChatModel, ModelError
from .extraction_rules import HAN, leans, memory_spans, with_referents
from .extraction_standing import proposable

_CONNECTOR = re.compile(r"^(?:(?i:and|so|but|also|plus|oh|btw|by the way)\b[, ]*|(?:另外|还有|对了|而且|所以|但是|不过)[，,]?)")

ExtractorError = ModelError  # the model call failed; whatever it cost is unknown


class Extractor(Protocol):
    name: str
    calls_a_model: bool  # only a model's calls are charged to the daily model budgets

    def estimate_tokens(self, text: str) -> int:
        """A conservative upper bound of what one call on this text may cost."""
        ...

    def extract(self, text: str) -> Extraction: ...


class RuleExtractor:
    """Preferences, plans, relations, constraints, standing instructions and durable facts, in English and
    Chinese, said in the first person, of someone the person names, or as a bare fragment (ADR 0025).

    Each proposal is a span of the message (a sentence or a clause), quoted exactly. Questions,
    hypotheticals and one-off requests are skipped.
    """

    name = "rules"
    model = "rules-v2"
    calls_a_model = False  # free: never charged, deferred or stopped by a model budget

    def estimate_tokens(self, text: str) -> int:
        return max(1, len(text.encode("utf-8")) // 4)

    def extract(self, text: str) -> Extraction:
        proposals = []
        for (start, end), (said_from, said_to) in memory_spans(text):
            quote = text[start:end]
            # the quote keeps "and", the memory need not; a memory that leans on the words before it says them
            body = _CONNECTOR.sub("", text[said_from:said_to].rstrip(".!。！；; "))
            # what leans on an earlier message is not proposed, nor what someone else says
            if body and proposable(body):
                proposals.append(Proposal(text=body, quote=quote))
        used = self.estimate_tokens(text)
        return Extraction(proposals=proposals, usage=Usage(prompt_tokens=used, completion_tokens=0), model=self.model)


SYSTEM_PROMPT = (
    "You extract durable personal memories from one chat message written by a person. "
    "Return only first-person facts, preferences and standing instructions that will still be true later. "
    "For each, give a short third-person-free restatement as 'text' and the exact words it rests on as "
    "'quote', copied character for character from the message. Each text must stand on its own: name the "
    "person a pronoun refers to, keep the people it names and its time phrase. Never include passwords, keys or tokens. "
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
    calls_a_model = True

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
        kept = [p for p in (standing(text, p) for p in proposals) if proposable(p.text)]  # the rules' own test
        return Extraction(proposals=kept, usage=answer.usage, model=self.model)


def standing(message: str, proposal: Proposal) -> Proposal:
    """A model's proposal under the rules' own: a text that leans on words it left out ("he started
    Monday") says them, as the rule extractor's would (the quote is kept as the model gave it)."""
    start = message.find(proposal.quote) if proposal.quote else -1
    if start < 0 or not leans(proposal.text):
        return proposal
    [(_quote, (said_from, said_to))] = with_referents(message, [(start, start + len(proposal.quote))])
    if said_from == start:
        return proposal  # nothing said before it to lean on
    lead = message[said_from:start].rstrip()
    han = bool(HAN.search(lead))
    joined = lead.endswith((",", "，", ".", "。", "!", "！", ";", "；", "、")) or bool(_JOINING.search(lead))
    glue = ("" if han else " ") if joined else ("，" if han else ", ")
    return Proposal(text=f"{lead}{glue}{proposal.text}", quote=proposal.quote)


_JOINING = re.compile(r"(?:\b(?:and|but|so|because|since|as)|而且|但是|所以|因为)$", re.IGNORECASE)
