"""Reading Hindsight's recall answer: best first, at most `most`, and nothing trusted from a
malformed one (the real server's answers are covered in tests/integration/test_hindsight*.py)."""

from __future__ import annotations

import json

import pytest

from engram.adapters.hindsight import HindsightUnavailable, _hints


def answer(*results: object, sources: object = None) -> bytes:
    return json.dumps({"results": list(results), "source_facts": sources or {}}).encode()


def fact(document_id: str, score: float) -> dict[str, object]:
    return {"id": f"f-{document_id}", "type": "world", "document_id": document_id, "text": "never read",
            "scores": {"final": score}}


def test_hints_come_best_first_and_at_most_most() -> None:
    body = answer(fact("a", 0.2), fact("b", 0.9), fact("c", 0.5), fact("d", 0.5))
    assert [h.document_id for h in _hints(200, body, None)] == ["b", "c", "d", "a"]  # ties keep Hindsight's order
    assert [(h.document_id, h.score) for h in _hints(200, body, 2)] == [("b", 0.9), ("c", 0.5)]


def test_an_observation_names_its_source_facts_documents() -> None:
    body = answer({"id": "o-1", "type": "observation", "source_fact_ids": ["f1", "f2"], "scores": {"final": 0.7}},
                  sources={"f1": {"document_id": "a"}})
    [hint] = _hints(200, body, None)
    assert hint.kind == "observation" and hint.source_document_ids == ("a", None)


@pytest.mark.parametrize(("status", "content"), [
    (200, b"not json"), (200, b"[]"), (200, b'{"results": [1]}'), (200, b'{"results": [{"scores": {"final": "x"}}]}'),
    (200, b'{"results": [{"type": "observation", "source_fact_ids": ["f"]}], "source_facts": ["f"]}'),
    (401, b"{}"), (503, b"{}"),
])
def test_a_malformed_or_refused_answer_gives_no_hint(status: int, content: bytes) -> None:
    with pytest.raises(HindsightUnavailable):
        _hints(status, content, None)


def test_no_bank_yet_is_no_hint() -> None:
    assert _hints(404, b"", None) == []
