"""Insights from the configured model, asked over one group's facts, within the learning budgets.

The prompt lists the group's facts as `[<memory id>] <text>` lines (at most `max_facts` of them
and `max_prompt_bytes` of text, in the group's order; a fact that does not fit is left out of this
call) and asks for `{"insights": [{"text", "memory_ids"}]}`. Every call first reserves its
conservative estimate in the same daily budgets as learning (company and person, tokens and
calls) and settles what it really used afterwards; a refused reservation means no call. A
proposal is kept only when every memory it cites was in the prompt and it cites two or more.
Prompts and answers are never logged. Whatever goes wrong (the budget, the model, its answer), the
answer is [] and the service tries the group again later.
"""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any

from engram.domain.clock import Clock
from engram.domain.insight import Group, Proposal
from engram.domain.text import is_acceptable_text

from .budget import BudgetLedger, Limits, Refusal
from .chat_model import ChatModel, ModelError

log = logging.getLogger("engram.insights")

SYSTEM_PROMPT = (
    "You find insights in one person's memories. Each line of the message is one memory: its id in square "
    "brackets, then its text. An insight is a durable judgment about the person (a habit, a preference, a "
    "standing instruction) that two or more of the memories support together. For each insight give a short "
    "'text' and the ids of every memory it rests on as 'memory_ids', copied exactly from the lines. Never cite "
    "an id that is not in the message, never include passwords, keys or tokens, and return {\"insights\": []} "
    "when the memories support no insight."
)
SCHEMA = {
    "name": "insights",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["insights"],
        "properties": {
            "insights": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["text", "memory_ids"],
                    "properties": {"text": {"type": "string"},
                                   "memory_ids": {"type": "array", "items": {"type": "string"}}},
                },
            }
        },
    },
}


def prompt_lines(group: Group, max_facts: int, max_bytes: int) -> tuple[str, list[str]]:
    """The user message and the ids it shows. Each text is one line (its line breaks are spaces, so
    no memory can write a line that looks like another memory's)."""
    lines: list[str] = []
    shown: list[str] = []
    size = 0
    for fact in group.facts:
        if len(shown) >= max_facts:
            break
        line = f"[{fact.memory_id}] {' '.join(fact.text.split())}"
        cost = len(line.encode("utf-8")) + 1
        if fact.memory_id in shown or size + cost > max_bytes:
            continue
        lines.append(line)
        shown.append(fact.memory_id)
        size += cost
    return "\n".join(lines), shown


def cited_proposals(content: dict[str, Any] | None, shown: list[str], max_text_bytes: int) -> list[tuple[str, tuple[str, ...]]]:
    """(text, memory ids in the prompt's order) of each well-formed insight citing two or more of the
    memories shown and nothing else; one per set of memories."""
    items = (content or {}).get("insights")
    if not isinstance(items, list):
        return []
    order = {m: i for i, m in enumerate(shown)}
    seen: set[frozenset[str]] = set()
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) \
                or not isinstance(item.get("memory_ids"), list):
            continue
        ids = item["memory_ids"]
        if not all(isinstance(m, str) and m in order for m in ids):
            continue  # an unknown id, or a memory of another group: the whole insight is dropped
        cited = frozenset(ids)
        text = item["text"].strip()
        if len(cited) < 2 or cited in seen or not is_acceptable_text(text, max_text_bytes):
            continue
        seen.add(cited)
        out.append((text, tuple(sorted(cited, key=order.__getitem__))))
    return out


class ModelInsightProposer:
    name = "model"

    def __init__(self, chat: ChatModel, budget: BudgetLedger, limits: Limits, clock: Clock, *,
                 max_facts: int = 60, max_prompt_bytes: int = 16_000, max_text_bytes: int = 8192) -> None:
        self.chat = chat
        self.budget = budget
        self.limits = limits
        self.clock = clock
        self.max_facts = max_facts
        self.max_prompt_bytes = max_prompt_bytes
        self.max_text_bytes = max_text_bytes

    def propose(self, group: Group) -> list[Proposal]:
        user, shown = prompt_lines(group, self.max_facts, self.max_prompt_bytes)
        if len(shown) < 2:
            return []
        company, person = group.scope.company, group.scope.person
        now = self.clock.now()
        day = now.astimezone(UTC).date()
        reservation = self.budget.reserve(company, person, day, self.chat.estimate_tokens(SYSTEM_PROMPT, user),
                                          self.limits, now)
        if isinstance(reservation, Refusal):
            log.info("insight model not asked: %s", reservation.reason)
            return []
        try:
            answer = self.chat.ask(SYSTEM_PROMPT, user, SCHEMA)
        except ModelError as e:  # our own message: a status or an exception class, never text
            # the provider reported no usage for a failed call: nothing is charged beyond that (the call counts)
            self.budget.settle(reservation.reservation_id, 0, self.clock.now())
            self._record(company, person, day, reservation.tokens, None, None, 0, 0, 0, "error")
            log.warning("insight model call failed (%s); the group is tried again later", e)
            return []
        charged = self.budget.settle(reservation.reservation_id, answer.usage.total, self.clock.now())
        items = (answer.content or {}).get("insights")
        found = cited_proposals(answer.content, shown, self.max_text_bytes)
        self._record(company, person, day, reservation.tokens, answer.usage.prompt_tokens,
                     answer.usage.completion_tokens, charged or reservation.tokens,
                     len(items) if isinstance(items, list) else 0, len(found),
                     "ok" if isinstance(items, list) else "malformed")
        return [Proposal(text, memory_ids, self.name) for text, memory_ids in found]

    def _record(self, company: str, person: str, day: Any, reserved: int, prompt: int | None,
                completion: int | None, charged: int, proposals: int, accepted: int, outcome: str) -> None:
        self.budget.record_usage(
            company=company, person=person, day=day, extractor=f"insight-{self.name}", model=self.chat.model,
            attempts=1, tokens_reserved=reserved, prompt_tokens=prompt, completion_tokens=completion,
            tokens_charged=charged, proposals=proposals, accepted=accepted, outcome=outcome, at=self.clock.now(),
        )
