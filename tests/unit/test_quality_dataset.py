"""The recall-quality benchmark's data (bench/data/quality) is whole and labelled as its kinds say."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
DATA = BENCH / "data" / "quality"
LANGS = ("en", "zh")
KINDS = ("fact", "paraphrase", "reply", "date_absolute", "date_relative", "multi_hop", "update")
MIN_PER_KIND_AND_LANG = 15


def _load(lang: str) -> dict[str, Any]:
    return json.loads((DATA / f"{lang}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def data() -> dict[str, dict[str, Any]]:
    return {lang: _load(lang) for lang in LANGS}


def _messages(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every message by id, with its conversation, its person and its place in the conversation."""
    out = {}
    for conv in d["conversations"]:
        for i, msg in enumerate(conv["messages"]):
            assert msg["id"] not in out, f"duplicate message id {msg['id']}"
            out[msg["id"]] = {**msg, "conversation": conv["id"], "person": conv["person"], "index": i,
                              "previous": conv["messages"][i - 1] if i else None}
    return out


def test_sizes_languages_and_kinds_meet_the_minimums(data: dict[str, dict[str, Any]]) -> None:
    questions = {lang: d["questions"] for lang, d in data.items()}
    total = sum(len(q) for q in questions.values())
    assert total >= 300
    for lang in LANGS:
        assert 0.4 * total <= len(questions[lang]) <= 0.6 * total, "about half the questions in each language"
        kinds = Counter(q["kind"] for q in questions[lang])
        assert set(kinds) == set(KINDS)
        assert min(kinds.values()) >= MIN_PER_KIND_AND_LANG, kinds
        assert len(data[lang]["people"]) >= 5
    turns = sum(len(c["messages"]) for d in data.values() for c in d["conversations"])
    assert turns >= 3000
    ids = [q["id"] for qs in questions.values() for q in qs]
    assert len(ids) == len(set(ids))


def test_every_evidence_id_exists_and_belongs_to_the_asking_person(data: dict[str, dict[str, Any]]) -> None:
    for d in data.values():
        messages = _messages(d)
        people = {p["id"] for p in d["people"]}
        for q in d["questions"]:
            assert q["person"] in people
            assert q["evidence"], q["id"]
            for evidence in q["evidence"]:
                assert evidence in messages, f"{q['id']}: no message {evidence}"
                assert messages[evidence]["person"] == q["person"], f"{q['id']}: {evidence} is another person's"
            datetime.fromisoformat(q["asked_at"])


def test_conversations_are_ordered_and_spoken_by_the_person_and_the_assistant(data: dict[str, dict[str, Any]]) -> None:
    for d in data.values():
        for conv in d["conversations"]:
            times = [datetime.fromisoformat(m["occurred_at"]) for m in conv["messages"]]
            assert times == sorted(times), conv["id"]
            assert {m["speaker"] for m in conv["messages"]} == {"user", "assistant"}
            assert all(m["text"].strip() for m in conv["messages"])


def test_replies_cite_the_persons_answer_never_the_assistants_question(data: dict[str, dict[str, Any]]) -> None:
    for d in data.values():
        messages = _messages(d)
        for q in d["questions"]:
            cited = [messages[e] for e in q["evidence"]]
            assert all(m["speaker"] == "user" for m in cited), f"{q['id']} cites an assistant turn"
            if q["kind"] != "reply":
                continue
            (answer,) = cited
            asked = answer["previous"]
            assert asked is not None and asked["speaker"] == "assistant", q["id"]
            assert "?" in asked["text"] or "？" in asked["text"], f"{q['id']}: the answer follows no question"
            assert asked["id"] not in q["evidence"]


def test_multi_hop_spans_two_sessions_and_updates_cite_only_the_latest_turn(data: dict[str, dict[str, Any]]) -> None:
    for d in data.values():
        messages = _messages(d)
        for q in d["questions"]:
            convs = {messages[e]["conversation"] for e in q["evidence"]}
            if q["kind"] == "multi_hop":
                assert len(q["evidence"]) == 2 and len(convs) == 2, q["id"]
            elif q["kind"] == "update":
                (latest,) = q["evidence"]
                first_session = min(c["id"] for c in d["conversations"] if c["person"] == q["person"])
                assert messages[latest]["conversation"] > first_session, q["id"]
            else:
                assert len(q["evidence"]) == 1, q["id"]


def test_dated_questions_name_the_day_of_their_evidence(data: dict[str, dict[str, Any]]) -> None:
    from bench import quality_text_en, quality_text_zh

    texts = {"en": quality_text_en, "zh": quality_text_zh}
    for lang, d in data.items():
        messages = _messages(d)
        for q in d["questions"]:
            if not q["kind"].startswith("date_"):
                continue
            day = datetime.fromisoformat(messages[q["evidence"][0]]["occurred_at"]).date()
            asked = datetime.fromisoformat(q["asked_at"]).date()
            if q["kind"] == "date_absolute":
                assert texts[lang].absolute(day) in q["question"], q["id"]
            else:
                assert texts[lang].relative(day, asked) in q["question"], q["id"]


def test_the_files_are_what_the_generator_writes() -> None:
    from bench import quality_data

    for t in (quality_data.quality_text_en, quality_data.quality_text_zh):
        assert quality_data.build(t) == _load(t.LANG), f"{t.LANG}.json differs from bench/quality_data.py's output"
