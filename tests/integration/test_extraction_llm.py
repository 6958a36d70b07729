"""The model extractor on the labelled EN+ZH set, through the real path: HTTP receipts, the learning worker,
OpenAIExtractor over HTTP to the fake model, the server's checks, candidates.

The fake answers each message with its labelled memories, and every fifth message also with a quote that
is not in it. `bench/extraction.py --extractor llm` runs the whole set through OpenAIExtractor and the
server's checks; this test runs every eighth message through the whole learning path. It checks the
plumbing (exact quotes kept and matched, invented quotes dropped, nothing lost on the way), not a real
model's quality (ADR 0025).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.api.bootstrap import Engram
from engram.api.http import create_app
from engram.domain.clock import FixedClock

from bench import extraction as labelled  # bench/extraction.py: the set, the matching rule, the tally
from tests.support.helpers import SECRET, auth

MESSAGES = labelled.load()[::8]  # every eighth message: both languages, every kind; the bench runs all of them


@pytest.fixture
def system(settings, database, llm) -> Iterator[tuple[Engram, TestClient]]:
    engram = Engram.open(settings.replace(llm_base_url=llm.url, llm_model="test-model", daily_calls=100_000,
                                          daily_tokens=10**9),
                         database=database, clock=FixedClock(datetime(2026, 11, 2, 9, 0, tzinfo=UTC)),
                         background=False)
    yield engram, TestClient(create_app(engram, SECRET))
    engram.close()


def test_labelled_set_through_the_model_extractor_and_learning(system, llm) -> None:
    engram, client = system
    answers = labelled.scripted_answers(MESSAGES)
    llm.proposals.update(answers)
    invented = {p["quote"] for items in answers.values() for p in items if p["text"] == "Invented"}
    assert invented and not any(q in text for text in answers for q in invented)

    for m in MESSAGES:
        r = client.post("/v1/receipts", headers=auth(), json={
            "receipt_id": m.id, "author": "user", "text": m.text, "occurred_at": "2026-11-02T09:00:00+00:00",
            "source": {"kind": "chat", "id": "chat-labelled", "message_id": m.id}, "visibility": "general",
            "team": None})
        assert r.status_code == 202 and r.json()["state"] == "queued", (m.id, r.json())
    while engram.learning.work(limit=200):
        pass
    assert len(llm.calls) == len(MESSAGES)  # one model call per message, none repeated

    by_message: dict[str, list[str]] = defaultdict(list)
    for c in client.get("/v1/candidates", headers=auth()).json()["items"]:
        [evidence] = c["evidence"]
        by_message[evidence["source"]["message_id"]].append(evidence["quote"])
    for m in MESSAGES:
        state = client.get(f"/v1/receipts/{m.id}", headers=auth()).json()
        assert state["state"] == "done", (m.id, state)
        assert len(state.get("candidate_ids", [])) == len(m.memories), m.id
        assert all(q in m.text for q in by_message[m.id]) and not invented & set(by_message[m.id]), m.id

    outcomes = [labelled.judge(m, by_message[m.id]) for m in MESSAGES]
    t = labelled.tally(outcomes)
    assert (t.expected, t.found, t.proposals, t.correct) == (t.expected, t.expected, t.expected, t.expected)
    for lang in ("en", "zh"):
        per = labelled.tally(o for o in outcomes if o.message.lang == lang)
        assert per.recall == 1.0 and per.precision == 1.0

    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT sum(proposals) AS answered, sum(accepted) AS kept FROM engram_usage_ledger")
        row: dict[str, Any] = curs.fetchone()
    assert (row["answered"], row["kept"]) == (sum(len(answers[m.text]) for m in MESSAGES), t.expected)
