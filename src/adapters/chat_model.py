"""One OpenAI-compatible chat-completions endpoint, asked for JSON-schema output.

The extractor and the insight proposer both call the configured model through this: one set of
HTTP conventions (bearer key, temperature 0, an output cap, a timeout), one conservative token
estimate for the budgets, one way of reading the answer. Prompts and answers are never logged, and
no error message quotes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from engram.domain.extraction import Usage


class ModelError(Exception):
    """The model call failed; whatever it cost is unknown."""


@dataclass(frozen=True)
class Answer:
    """The model's JSON object (None when it answered something else) and what the call cost."""

    content: dict[str, Any] | None
    usage: Usage


class ChatModel:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 30.0,
                 max_output_tokens: int = 512) -> None:
        self.model = model
        self.max_output_tokens = max_output_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)

    def estimate_tokens(self, system: str, user: str) -> int:
        """A conservative upper bound of one call: bytes/2 over-counts tokens for every language we
        serve; plus the system prompt and the output cap."""
        return (len(user.encode("utf-8")) + len(system)) // 2 + self.max_output_tokens

    def ask(self, system: str, user: str, schema: dict[str, Any]) -> Answer:
        try:
            r = self.client.post("/chat/completions", json={
                "model": self.model,
                "temperature": 0,
                "max_tokens": self.max_output_tokens,
                "response_format": {"type": "json_schema", "json_schema": schema},
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            })
        except httpx.HTTPError as e:
            raise ModelError(type(e).__name__) from None
        if r.status_code != 200:
            raise ModelError(f"model answered {r.status_code}")
        try:
            body = r.json()
        except ValueError:
            raise ModelError("model answered something other than JSON") from None
        raw = body.get("usage") if isinstance(body, dict) else None
        raw = raw if isinstance(raw, dict) else {}
        usage = Usage(
            prompt_tokens=raw["prompt_tokens"] if isinstance(raw.get("prompt_tokens"), int) else None,
            completion_tokens=raw["completion_tokens"] if isinstance(raw.get("completion_tokens"), int) else None,
        )
        try:
            content = json.loads(body["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError, ValueError):
            content = None  # a malformed answer still cost what it cost
        return Answer(content if isinstance(content, dict) else None, usage)
