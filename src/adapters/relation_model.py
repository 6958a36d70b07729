"""The configured model as a judge of how a new statement stands to a person's confirmed memories
(ADR 0042), within the learning budgets.

Asked only by learning, only where the rules and the vectors said nothing, about at most a few of the
person's own memories in the same scope: the prompt numbers them `[1] <text>` and gives the new statement
apart; the answer is `{"judgements": [{"index", "kind": "duplicate"|"update"|"different"}]}`. Every call
first reserves its estimate in the daily budgets (company and person) and settles what it used; a
refused reservation, a failed call or a malformed answer means no relation, never a retry loop.
Prompts and answers are never logged.
"""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any

from engram.domain.clock import Clock
from engram.domain.relation import DUPLICATE, UPDATE

from .budget import BudgetLedger, Limits, Refusal
from .chat_model import ChatModel, ModelError

log = logging.getLogger("engram.relations")

SYSTEM_PROMPT = (
    "You compare one new statement a person made with a few of their own earlier memories, numbered in "
    "square brackets. For each memory say whether the new statement says the same thing ('duplicate', in "
    "any words), changes what it says ('update': the same fact with a new value, such as a new city, a new "
    "manager, a meeting moved to another time), or is about something else ('different'). When unsure, "
    "say 'different'."
)
SCHEMA = {
    "name": "judgements",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["judgements"],
        "properties": {
            "judgements": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["index", "kind"],
                    "properties": {"index": {"type": "integer"},
                                   "kind": {"type": "string", "enum": [DUPLICATE, UPDATE, "different"]}},
                },
            }
        },
    },
}


def prompt(new: str, olds: list[str]) -> str:
    """Each text on one line (its line breaks are spaces, so no text can write a line of its own)."""
    lines = [f"[{i}] {' '.join(old.split())}" for i, old in enumerate(olds, 1)]
    return "Earlier memories:\n" + "\n".join(lines) + f"\n\nNew statement: {' '.join(new.split())}"


def judgements(content: dict[str, Any] | None, count: int) -> list[str | None]:
    """The kind said for each memory (None for different, unsaid or malformed)."""
    out: list[str | None] = [None] * count
    items = (content or {}).get("judgements")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("index"), int) and 1 <= item["index"] <= count \
                and item.get("kind") in (DUPLICATE, UPDATE):
            out[item["index"] - 1] = item["kind"]
    return out


class ModelRelationJudge:
    def __init__(self, chat: ChatModel, budget: BudgetLedger, limits: Limits, clock: Clock) -> None:
        self.chat = chat
        self.budget = budget
        self.limits = limits
        self.clock = clock

    def judge(self, company: str, person: str, new: str, olds: list[str]) -> list[str | None]:
        if not olds:
            return []
        user = prompt(new, olds)
        now = self.clock.now()
        day = now.astimezone(UTC).date()
        reservation = self.budget.reserve(company, person, day, self.chat.estimate_tokens(SYSTEM_PROMPT, user),
                                          self.limits, now)
        if isinstance(reservation, Refusal):
            return [None] * len(olds)  # the budget is spent: the rules' and the vectors' word stands
        try:
            answer = self.chat.ask(SYSTEM_PROMPT, user, SCHEMA)
        except ModelError as e:  # our own message: a status or an exception class, never text
            self.budget.settle(reservation.reservation_id, 0, self.clock.now())
            self._record(company, person, day, reservation.tokens, None, None, 0, 0, "error")
            log.warning("relation model call failed (%s); no relation", e)
            return [None] * len(olds)
        charged = self.budget.settle(reservation.reservation_id, answer.usage.total, self.clock.now())
        found = judgements(answer.content, len(olds))
        self._record(company, person, day, reservation.tokens, answer.usage.prompt_tokens,
                     answer.usage.completion_tokens, charged or reservation.tokens, sum(1 for k in found if k),
                     "ok" if isinstance((answer.content or {}).get("judgements"), list) else "malformed")
        return found

    def _record(self, company: str, person: str, day: Any, reserved: int, prompt_tokens: int | None,
                completion: int | None, charged: int, said: int, outcome: str) -> None:
        self.budget.record_usage(
            company=company, person=person, day=day, extractor="relation-model", model=self.chat.model,
            attempts=1, tokens_reserved=reserved, prompt_tokens=prompt_tokens, completion_tokens=completion,
            tokens_charged=charged, proposals=said, accepted=said, outcome=outcome, at=self.clock.now(),
        )
