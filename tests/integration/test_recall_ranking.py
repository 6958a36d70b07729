"""Recall ranking through the HTTP API: answers found through their question, days named in a
question, question words that rank nothing, Chinese with digits, near word forms (ADR 0023)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.support.helpers import auth

CHAT = {"kind": "chat", "id": "chat-holiday"}


def remember(client: Any, text: str, message: str, at: str, chat: dict[str, str] = CHAT) -> str:
    r = client.post("/v1/memories", headers=auth(), json={
        "text": text, "source": {**chat, "message_id": message}, "occurred_at": at})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def ids(client: Any, query: str, **extra: Any) -> list[str]:
    r = client.post("/v1/recall", headers=auth(), json={"query": query, "limit": 3, **extra})
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["items"]]


def test_the_answer_to_a_question_is_found_through_the_question(client) -> None:
    question = remember(client, "Where did you go on holiday this year?", "m-1", "2025-08-01T10:00:00+00:00")
    answer = remember(client, "Kyoto, with my sister, for ten days.", "m-2", "2025-08-01T10:01:00+00:00")
    later = remember(client, "Booked the dentist for Friday.", "m-3", "2025-08-01T10:05:00+00:00")
    other = remember(client, "Lisbon was lovely.", "o-1", "2025-08-01T10:01:30+00:00", {"kind": "chat", "id": "c-2"})
    found = ids(client, "Where did I go on holiday?")
    assert found[:2] == [question, answer]  # the answer shares no word with the question
    assert later not in found and other not in found
    # question words alone are not terms: no word ranks, and meaning (none of these is embedded yet) finds
    # nothing, so nothing unrelated is returned; an empty query still lists the newest
    assert ids(client, "Where were you, and how?") == []
    assert len(ids(client, "")) == 3


def test_without_meaning_question_words_alone_are_an_empty_query(engram, client) -> None:
    remember(client, "Where did you go on holiday this year?", "m-1", "2025-08-01T10:00:00+00:00")
    remember(client, "Kyoto, with my sister, for ten days.", "m-2", "2025-08-01T10:01:00+00:00")
    engram.recall.meaning = None  # ENGRAM_EMBEDDINGS=off: words alone, as before meaning
    assert ids(client, "Where were you, and how?") == ids(client, "") and len(ids(client, "")) == 2


def test_a_day_named_in_a_question_finds_what_was_said_that_day(client) -> None:
    days = {d: remember(client, text, f"d-{d}", f"2025-12-{d:02d}T19:00:00+00:00")
            for d, text in ((8, "Dinner was fish tacos."), (9, "Made a mushroom risotto for dinner."),
                            (10, "Dinner at my parents' place."))}
    asked = datetime(2025, 12, 11, 9, 0, tzinfo=UTC).isoformat()
    assert ids(client, "What did I cook for dinner on 9 December 2025?", as_of=asked)[0] == days[9]
    assert ids(client, "What did I cook for dinner yesterday?", as_of=asked)[0] == days[10]
    assert ids(client, "我前天晚饭做了什么？dinner", as_of=asked)[0] == days[9]


def test_chinese_with_digits_and_single_characters(client) -> None:
    memory = remember(client, "2025年9月21日晚饭吃的清蒸鲈鱼", "z-1", "2025-09-21T12:00:00+00:00")
    remember(client, "午饭随便吃了点", "z-2", "2025-09-21T05:00:00+00:00")
    assert ids(client, "晚饭吃了什么鱼？")[0] == memory
    assert ids(client, "鲈鱼")[0] == memory


def test_near_word_forms_find_each_other(client) -> None:
    photos = remember(client, "Photography is how I unwind at weekends.", "w-1", "2025-04-01T12:00:00+00:00")
    drawing = remember(client, "I drew the garden shed last weekend.", "w-2", "2025-04-02T12:00:00+00:00")
    remember(client, "The shed needs a new roof.", "w-3", "2025-04-03T12:00:00+00:00")
    assert ids(client, "Do I take photographs?")[0] == photos  # photographi / photograph: prefix "photo"
    assert ids(client, "Did I draw anything?")[0] == drawing
