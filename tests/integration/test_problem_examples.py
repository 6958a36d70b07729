"""A 422 names the field and shows a valid example of it, taken from the reference's own examples and
never from the request (API.md, Errors)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.helpers import auth, is_problem, remember_body


def invalid(r: Any) -> dict[str, Any]:
    is_problem(r, 422, "validation_error")
    return {e["field"]: e for e in r.json()["errors"]}


def test_a_missing_source_shows_what_one_looks_like(client) -> None:
    r = client.post("/v1/memories", headers=auth(), json={"text": "I keep the spare key under the blue pot"})
    found = invalid(r)
    assert found["source"]["example"] == {"kind": "chat", "id": "chat-42", "message_id": "m-8"}
    assert 'source: Field required (for example {"kind": "chat", "id": "chat-42", "message_id": "m-8"})' in r.json()["detail"]
    assert "blue pot" not in r.text  # the submitted text is never echoed


def test_recall_without_a_query_is_refused_naming_it(client) -> None:
    r = client.post("/v1/recall", headers=auth(), json={})
    found = invalid(r)
    assert list(found) == ["query"] and found["query"]["example"] == "how should reports look"
    assert client.post("/v1/recall", headers=auth(), json={"query": "reports"}).status_code == 200


def test_a_field_of_the_wrong_shape_shows_a_valid_one_and_not_what_was_sent(client) -> None:
    r = client.post("/v1/recall", headers=auth(), json={"query": "reports", "limit": "seventy-three"})
    assert invalid(r)["limit"]["example"] == 5 and "seventy-three" not in r.text
    nested = client.post("/v1/memories", headers=auth(), json=remember_body("I like tea", source={"kind": "chat"}))
    found = invalid(nested)
    assert found["source.id"]["example"] == "chat-42"  # the field inside, with its own example


def test_a_batch_names_the_message_and_its_field(client) -> None:
    good = {"receipt_id": "r-1", "author": "user", "text": "I like tea",
            "source": {"kind": "chat", "id": "chat-1", "message_id": "m-1"}}
    bad = {**good, "receipt_id": "r-2"}
    del bad["source"]
    r = client.post("/v1/receipts", headers=auth(), json={"messages": [good, bad]})
    assert r.status_code == 422, r.text
    fields = {e["field"]: e for e in r.json()["errors"]}
    source = next(v for k, v in fields.items() if k.endswith("source"))
    assert source["example"] == {"kind": "chat", "id": "chat-42", "message_id": "m-8"}, json.dumps(fields)
