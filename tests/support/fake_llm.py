"""A local OpenAI-compatible test server: answers chat completions (and embeddings) as a test scripts it.

The LLM and the embedding model are the only fakes the suite uses: they are external and not
deterministic. Everything else in the tests is real.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONSOLIDATION_FACT = re.compile(r"^\[([0-9a-f-]{36})\] (.+?)(?: \((?:occurred|mentioned)_[^)]*\))?$", re.M)
LISTED = re.compile(r"^\[([0-9a-f-]{36})\] (.*)$", re.M)  # the insight prompt's `[<memory id>] <text>` lines


def _completion(content: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-hindsight", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(content)},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


class FakeLLM:
    def __init__(self) -> None:
        self.proposals: dict[str, list[dict[str, str]]] = {}  # user text -> proposals
        self.usage: dict[str, int] | None = {"prompt_tokens": 40, "completion_tokens": 10}
        self.delay = 0.0
        self.failures: list[int] = []  # status codes to answer with, one per call, before answering normally
        self.responder: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
        self.calls: list[dict[str, Any]] = []
        # Engram's relation judge: given (the new statement, the earlier memories' texts), the judgements
        # [{"index" (1-based), "kind"}]; None: every one different
        self.relations: Callable[[str, list[str]], list[dict[str, Any]]] | None = None
        self.vectors: dict[str, list[float]] = {}
        self.embedded: list[str] = []  # text -> embedding, to make two texts "mean" the same
        # Hindsight's consolidation: given the batch's new facts [(fact id, text)], the observations
        # to create [{"text", "source_fact_ids"}]; None creates none
        self.observe: Callable[[list[tuple[str, str]]], list[dict[str, Any]]] | None = None
        # Engram's insight proposer (asked for the "insights" schema): given the prompt's memories
        # [(memory id, text)], the answer's content (a dict, or a string sent as it is); None: no insights
        self.insights: Callable[[list[tuple[str, str]]], dict[str, Any] | str] | None = None
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.calls.append(body)
            failure = self.failures.pop(0) if self.failures else None
        if self.delay:
            time.sleep(self.delay)
        if failure:
            return failure, {"error": {"message": "scripted failure"}}
        if self.responder is not None:
            scripted = self.responder(body)
            if scripted is not None:
                return 200, scripted
        user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
        response_format = body.get("response_format") or {}
        if (response_format.get("json_schema") or {}).get("name") == "judgements":  # Engram's relation judge
            olds = re.findall(r"^\[\d+\] (.*)$", user.split("\n\nNew statement: ")[0], re.M)
            new = user.rsplit("\n\nNew statement: ", 1)[-1]
            said = self.relations(new, olds) if self.relations else []
            return 200, self._answer(body, json.dumps({"judgements": said}))
        if (response_format.get("json_schema") or {}).get("name") == "insights":
            insights = self.insights(LISTED.findall(user)) if self.insights else {"insights": []}
            return 200, self._answer(body, insights if isinstance(insights, str) else json.dumps(insights))
        if response_format.get("type") == "json_object" and "Content:" in user:
            return 200, self._hindsight_facts(user)
        facts = CONSOLIDATION_FACT.findall(user)
        if facts:
            creates = self.observe(facts) if self.observe else []
            return 200, _completion({"creates": creates, "updates": [], "deletes": []})
        return 200, self._answer(body, json.dumps({"memories": self.proposals.get(user, [])}))

    def _answer(self, body: dict[str, Any], content: str) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model", "test"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
        if self.usage is not None:
            answer["usage"] = {**self.usage, "total_tokens": sum(self.usage.values())}
        return answer

    @staticmethod
    def _hindsight_facts(user: str) -> dict[str, Any]:
        """Hindsight's fact extraction: each non-empty line of the content becomes one world fact."""
        content = user.split("Content:", 1)[1]
        lines = [ln.strip() for ln in content.strip().splitlines() if ln.strip()][:1]
        facts = [{"what": ln, "when": "", "where": "", "who": "", "why": "", "fact_type": "world", "entities": []}
                 for ln in lines]
        return _completion({"facts": facts})

    def embed(self, text: str, dims: int = 64) -> list[float]:
        self.embedded.append(text)
        for start, vector in self.vectors.items():  # Hindsight may append context to a fact's text
            if text.strip() == start or text.strip().startswith(start + " ("):
                return vector
        digest = hashlib.sha256(text.encode()).digest()
        return [(digest[i % len(digest)] - 128) / 128 for i in range(dims)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if self.path.endswith("/chat/completions"):
                    status, answer = fake.chat(body)
                elif self.path.endswith("/embeddings") and not body.get("input"):
                    status, answer = 400, {"error": "no input"}  # not a crash printed to the test's output
                elif self.path.endswith("/embeddings"):
                    inputs = body.get("input")
                    inputs = [inputs] if isinstance(inputs, str) else inputs
                    status, answer = 200, {"object": "list", "model": body.get("model"), "data": [
                        {"object": "embedding", "index": i, "embedding": fake.embed(t)} for i, t in enumerate(inputs)],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                else:
                    status, answer = 404, {"error": "not found"}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
