"""Every JSON answer has a response model, and the model changes nothing of what the service returns.

The OpenAPI document must give each JSON operation's 2xx answer a model with fields (a route added
without `response_model` declares an empty schema and fails here). And a walk through every JSON
route, variants included (a sensitive memory, a superseding and a replacing correction, a truncated,
a paused and an off-mode recall, an ignored receipt, a purge status), checks each answer against the
fields the service set, and each response model a service built against the document it built it from
(pydantic's JSON of the plain document): no key added, none dropped, no null turned into an absent key or
back, every value and time written as it was.
"""

from __future__ import annotations

import json
from typing import Any

import fastapi.routing
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel
from pydantic_core import to_json

from tests.support.helpers import SECRET, auth, put_directory, remember_body

JSON = "application/json"


def _component(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def test_every_json_operation_declares_a_response_model(client) -> None:
    doc = client.get("/openapi.json").json()
    operations = [(f"{method.upper()} {path}", op) for path, ops in doc["paths"].items() for method, op in ops.items()]
    assert len(operations) >= 20
    for where, op in operations:
        successes = {code: r for code, r in op["responses"].items() if code.startswith("2")}
        assert successes, where
        for code, response in successes.items():
            content = response.get("content", {})
            assert content, f"{where} {code} declares no body"
            if JSON not in content:  # not a JSON route (metrics: Prometheus text)
                continue
            schema = content[JSON].get("schema", {})
            for choice in schema.get("anyOf") or [schema]:  # one model, or one of several (a receipt or a batch)
                model = _component(doc, choice)
                assert model.get("properties"), f"{where} {code}: no response model (declare response_model=)"
            assert model.get("required"), f"{where} {code}: a model whose every field may be absent"


# -- the same bytes as before response models -----------------------------------------------------


@pytest.fixture
def settings(settings: Any) -> Any:
    return settings.replace(company_allowlist=frozenset({"acme"}))  # every other company is off


def _same(before: Any, after: Any, where: str = "") -> None:
    """Equal JSON, types included (1 is not 1.0); the order of an object's keys aside."""
    assert type(after) is type(before), f"{where}: {before!r} became {after!r}"
    if isinstance(before, dict):
        assert after.keys() == before.keys(), f"{where}: keys {list(before)} became {list(after)}"
        for key in before:
            _same(before[key], after[key], f"{where}.{key}")
    elif isinstance(before, list):
        assert len(after) == len(before), f"{where}: {len(before)} items became {len(after)}"
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            _same(b, a, f"{where}[{i}]")
    else:
        assert after == before, f"{where}: {before!r} became {after!r}"


class Answers:
    """Every answer as written, beside the fields its model was given: FastAPI's JSON of a route's model
    and `middleware.written`'s (remember's statuses, receipts) against the fields the service set; and
    every response model a service built against the document it was built from (`built`), so a key the
    service adds that no model declares, or a value the model would change, fails here."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.written: list[tuple[bytes, bytes]] = []
        self.built: list[tuple[bytes, bytes]] = []
        serialize = fastapi.routing.serialize_response

        async def serialize_response(**kwargs: Any) -> Any:
            out = await serialize(**kwargs)
            if kwargs.get("field") is not None:
                assert isinstance(out, bytes)  # FastAPI wrote the model's JSON itself
                content = kwargs["response_content"]
                if isinstance(content, BaseModel):  # a typed result: the keys the service set, as it set them
                    content = content.model_dump(by_alias=True, exclude_unset=True)
                self.written.append((to_json(content), out))
            return out

        monkeypatch.setattr(fastapi.routing, "serialize_response", serialize_response)

        from engram.api.routes import memories, receipts

        for module in (memories, receipts):
            monkeypatch.setattr(module, "written", self._recorded(module.written))

        validate = BaseModel.model_validate.__func__  # type: ignore[attr-defined]

        def model_validate(cls: type[BaseModel], obj: Any, *args: Any, **kwargs: Any) -> BaseModel:
            model = validate(cls, obj, *args, **kwargs)
            if cls.__module__.startswith("engram.contract") and isinstance(obj, dict):
                document = _plain({k: v for k, v in obj.items() if k != "existing"})  # never written
                self.built.append((to_json(document), model.model_dump_json(by_alias=True, exclude_unset=True)
                                   .encode()))
            return model

        monkeypatch.setattr(BaseModel, "model_validate", classmethod(model_validate))

    def _recorded(self, written: Any) -> Any:
        def written_and_recorded(answer: BaseModel, status_code: int = 200) -> Any:
            response = written(answer, status_code)
            self.written.append((to_json(answer.model_dump(by_alias=True, exclude_unset=True)), bytes(response.body)))
            return response

        return written_and_recorded


def _plain(value: Any) -> Any:
    """A document with the models in it as the fields they were given."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_unset=True)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def test_answers_are_the_service_documents(engram: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.api.http import create_app

    answers = Answers(monkeypatch)
    visited: set[str] = set()
    json_answers = 0
    alice, admin = auth(), auth(user="root", role="admin")

    with TestClient(create_app(engram, SECRET), raise_server_exceptions=True) as client:

        def call(method: str, template: str, status: int, headers: dict[str, str] | None = None,
                 **ids_and_body: Any) -> Any:
            body = ids_and_body.pop("json", None)
            params = ids_and_body.pop("params", None)
            r = client.request(method, template.format(**ids_and_body), json=body, params=params,
                               headers=alice if headers is None else headers)
            assert r.status_code == status, (method, template, r.status_code, r.text)
            visited.add(f"{method} {template}")
            if not r.headers["content-type"].startswith(JSON):
                return r.text
            nonlocal json_answers
            json_answers += 1
            return r.json()

        for probe in ("/healthz", "/livez", "/readyz"):
            call("GET", probe, 200, headers={})
        call("GET", "/metrics", 200, headers={})
        put_directory(client, {"teams": {"t-risk": {"members": ["alice"]}},
                               "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
                               "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}})
        call("PUT", "/v1/admin/directory", 200, admin, json={
            "teams": {"t-risk": {"members": ["alice", "bob"]}},
            "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
            "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}})
        call("GET", "/v1/admin/directory", 200, admin)

        first = call("POST", "/v1/memories", 201, json=remember_body("I prefer tea over coffee in the morning"))
        call("POST", "/v1/memories", 201, json=remember_body(
            "The risk report goes out on Fridays", visibility="restricted", team="t-risk",
            source={"kind": "jira", "id": "s-jira", "message_id": None}, valid_from="2026-01-01T00:00:00+00:00"))
        sensitive = call("POST", "/v1/memories", 202, json=remember_body("My blood pressure medication is lisinopril"))
        second = call("POST", "/v1/memories", 202,
                      json=remember_body("My salary is paid into the credit union"))
        assert sensitive["status"] == second["status"] == "pending_review"

        page = call("GET", "/v1/memories", 200, params={"limit": 1})
        assert page["next_cursor"]
        call("GET", "/v1/memories", 200, params={"cursor": page["next_cursor"], "status": "all"})
        linked = call("POST", "/v1/memories", 201, json=remember_body("I prefer green tea after lunch",
                                                                       source=first["source"]))
        assert call("GET", "/v1/memories/{memory_id}", 200, memory_id=first["id"])["links"][0]["memory_id"] \
            == linked["id"]
        call("GET", "/v1/memories/{memory_id}/links", 200, memory_id=first["id"])
        call("POST", "/v1/memories/{memory_id}/correct", 200, memory_id=first["id"],
             json={"text": "I prefer green tea in the morning", "valid_from": "2026-12-01T00:00:00+01:00",
                   "reason": "changed my mind"})
        call("POST", "/v1/memories/{memory_id}/correct", 200, memory_id=first["id"],
             json={"text": "I prefer green tea, no sugar, in the morning"})
        events = call("GET", "/v1/memories/{memory_id}/history", 200, memory_id=first["id"])["events"]
        assert {"reason", "mode"} <= events[-1].keys() and "mode" not in events[0]

        call("GET", "/v1/candidates", 200)
        call("POST", "/v1/candidates/{memory_id}/confirm", 200, memory_id=sensitive["id"],
             json={"acknowledge_sensitive": True})
        call("POST", "/v1/candidates/{memory_id}/reject", 200, memory_id=second["id"])

        whole = call("POST", "/v1/recall", 200, json={"query": "tea morning report"})
        assert whole["items"] and "truncated" not in whole["items"][0] and whole["omitted"] == 0
        cut = call("POST", "/v1/recall", 200, json={"query": "tea morning report Fridays", "max_bytes": 12})
        assert cut["items"][0]["truncated"] is True
        call("POST", "/v1/recall", 200, headers=auth(role="bot", bot="b-helper"), json={"query": "tea"})
        assert call("POST", "/v1/recall", 200, headers=auth(company="beta"), json={"query": "tea"})["mode"] == "off"

        call("GET", "/v1/settings", 200)
        call("PUT", "/v1/settings", 200, json={"learning_paused": False, "use_paused": True})
        assert call("POST", "/v1/recall", 200, json={"query": "tea"})["paused"] is True
        call("PUT", "/v1/settings", 200, json={"learning_paused": False, "use_paused": False})

        receipt = {"author": "user", "text": "I prefer meetings after ten in the morning.",
                   "source": {"kind": "chat", "id": "chat-7", "message_id": "m-1"}}
        call("POST", "/v1/receipts", 202, json={"receipt_id": "r-1", **receipt})
        ignored = call("POST", "/v1/receipts", 202, json={"receipt_id": "r-2", **receipt, "author": "assistant"})
        assert ignored["reason"] == "not_user_text"
        engram.learning.work()
        call("GET", "/v1/receipts/{receipt_id}", 200, receipt_id="r-1")

        for text in ("Risks come first in reports", "Please put the risks first", "Keep reports short, always",
                     "Reports should be kept short"):
            call("POST", "/v1/memories", 201, json=remember_body(text))
        assert engram.insights.propose_due() == 2
        proposed = call("GET", "/v1/insights", 200, params={"status": "proposed"})["items"]
        call("POST", "/v1/insights/{insight_id}/confirm", 200, insight_id=proposed[0]["id"])
        call("POST", "/v1/insights/{insight_id}/reject", 200, insight_id=proposed[1]["id"])
        assert any(i["kind"] == "insight" for i in call("POST", "/v1/recall", 200, json={"query": "risks first"})["items"]
                   + call("POST", "/v1/recall", 200, json={"query": "reports short"})["items"])

        forgotten = call("POST", "/v1/memories/{memory_id}/forget", 202, memory_id=first["id"])
        call("GET", "/v1/forgets/{forget_id}", 200, forget_id=forgotten["forget_id"])
        many = call("POST", "/v1/memories", 201, json=remember_body("I keep my notes in Obsidian"))
        call("POST", "/v1/memories/forget", 202, json={"ids": [many["id"]]})
        assert "more" in call("POST", "/v1/memories/forget", 202, json={"source_id": "chat-42"})
        call("GET", "/v1/forgets", 200, params={"limit": 1})
        account = call("POST", "/v1/admin/people/{person}/forget", 202, admin, person="bob")
        assert call("GET", "/v1/forgets/{forget_id}", 200, admin, forget_id=account["forget_id"])["kind"] == "account"
        call("POST", "/v1/sources/{source_id}/revoke", 202, source_id="chat-7")
        call("GET", "/v1/export", 200)
        call("GET", "/v1/export", 200, params={"format": "markdown"})
        call("GET", "/v1/admin/status", 200, admin)
        key = call("POST", "/v1/admin/bots/{bot}/keys", 201, admin, bot="b-helper")
        call("GET", "/v1/admin/bots/{bot}/keys", 200, admin, bot="b-helper")
        bot_key = {"Authorization": f"Bearer {key['key']}", "X-Engram-Person": "alice"}
        call("POST", "/v1/recall", 200, headers=bot_key, json={"query": "tea"})  # as her bot, with its key
        call("DELETE", "/v1/admin/bots/{bot}/keys/{key_id}", 200, admin, bot="b-helper", key_id=key["key_id"])
        call("POST", "/v1/admin/people/{person}/suspend", 200, admin, person="carol")
        call("POST", "/v1/admin/people/{person}/resume", 200, admin, person="carol")
        call("POST", "/v1/admin/people/{person}/sign-out-everywhere", 200, admin, person="carol")
        call("POST", "/v1/me/forget", 202)  # last: everything alice holds goes
        call("GET", "/v1/forgets", 200)
        call("POST", "/v1/me/sign-out-everywhere", 200)  # and her tokens until now

        doc = client.get("/openapi.json").json()

    operations = {f"{method.upper()} {path}" for path, ops in doc["paths"].items() for method in ops}
    assert operations - visited == set(), "add the new operations to this walk"
    assert len(answers.written) == json_answers + 1  # and put_directory's
    for before, after in answers.written:
        _same(json.loads(before), json.loads(after))
    assert len(answers.built) > json_answers  # memories, candidates, recalls, lists, exports, ... each built once
    for before, after in answers.built:
        _same(json.loads(before), json.loads(after))
