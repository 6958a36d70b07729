"""The reference describes itself: /openapi.json as a bot developer reads it, and /docs.

Every operation has its own summary (not one made from the function's name), a description, a
unique operationId, an example for its request body and for each answer, and declares each problem
it can answer as application/problem+json with an example; every /v1 route names the bearer scheme.
Each example is its model's own document (it survives the model unchanged), and each request example
is accepted by the running service with a documented success.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from engram.contract import admin, examples
from engram.contract import requests as schemas
from engram.contract import responses as models

from tests.support.helpers import auth, put_directory

PROBLEM = "application/problem+json"
# What each kind of operation can answer besides its successes.
WITH_TOKEN = {"401", "503"}
WITH_BODY = {"400", "413", "415", "422"}


def _document(client: Any) -> dict[str, Any]:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in doc["paths"].items() for method, op in ops.items()]


def _component(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def _examples(doc: dict[str, Any], media: dict[str, Any]) -> list[Any]:
    """The examples a media type carries, its own or its schema's (each choice of an anyOf)."""
    found = [media["example"]] if "example" in media else []
    schema = media.get("schema", {})
    for choice in schema.get("anyOf") or [schema]:
        found += _component(doc, choice).get("examples", [])
    return found


def _function_title(operation_id: str) -> str:
    """The summary FastAPI would make up from the function's name."""
    return operation_id.replace("_", " ").title()


def test_every_operation_is_described_with_examples_and_its_problems(client: Any) -> None:
    doc = _document(client)
    operations = _operations(doc)
    assert len(operations) >= 30
    ids = [op["operationId"] for _, _, op in operations]
    assert len(ids) == len(set(ids)), "operationIds must be unique"
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
        "description": doc["components"]["securitySchemes"]["bearer"]["description"]}
    missing: list[str] = []
    for method, path, op in operations:
        where = f"{method.upper()} {path}"
        assert re.fullmatch(r"[a-z][a-z_]*", op["operationId"]), where
        if not op.get("summary") or op["summary"] == _function_title(op["operationId"]):
            missing.append(f"{where}: summary")
        if len(op.get("description", "")) < 40:
            missing.append(f"{where}: description")
        body = op.get("requestBody", {}).get("content", {})
        for media_type, media in body.items():
            if not _examples(doc, media):
                missing.append(f"{where}: request example ({media_type})")
        responses = op["responses"]
        for status, response in responses.items():
            for media_type, media in response.get("content", {}).items():
                if not _examples(doc, media):
                    missing.append(f"{where} {status}: example ({media_type})")
            if status.startswith(("4", "5")):
                assert list(response["content"]) == [PROBLEM], f"{where} {status}"
                assert response["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}
                assert response["content"][PROBLEM]["example"]["status"] == int(status)
        expected: set[str] = set()
        if path.startswith("/v1/"):
            assert op.get("security") == [{"bearer": []}], f"{where}: no bearer scheme"
            expected |= WITH_TOKEN
        if body:
            expected |= WITH_BODY
        if op.get("parameters"):
            expected.add("422")
        if "{" in path and path.startswith("/v1/") and "revoke" not in path and "/people/" not in path:
            expected.add("404")  # an id that is not there, or not the caller's
        if path.startswith("/v1/admin/"):
            expected.add("403")
        assert expected <= set(responses), f"{where}: undeclared {sorted(expected - set(responses))}"
    assert not missing, "\n".join(missing)


def _model_classes() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for module in (models, admin, schemas):
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__:
                found[name] = value
    return found


# pydantic warns when writing an optional field whose type has a plain validator (`Instant | None`),
# though what it writes is right: the comparison below is the check.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_each_example_is_its_models_own_document() -> None:
    illustrated = 0
    for name, model in _model_classes().items():
        extra = model.model_config.get("json_schema_extra")
        if not isinstance(extra, dict) or "examples" not in extra or extra["examples"] is None:
            continue
        for example in extra["examples"]:  # type: ignore[union-attr]
            written = model.model_validate(example).model_dump(mode="json", by_alias=True, exclude_unset=True)
            assert written == example, f"{name}: the example is not what the model writes"
            illustrated += 1
    assert illustrated >= 30


def _admin() -> dict[str, str]:
    return auth(user="root", role="admin")


@pytest.mark.parametrize("name", ["REMEMBER_IN", "RECALL_IN", "RECEIPT_IN", "RECEIPT_BATCH_IN", "CORRECT_IN",
                                  "CONFIRM_IN", "FORGET_MANY_IN", "DIRECTORY_IN", "SETTINGS_IN"])
def test_each_request_example_is_accepted(client: Any, name: str) -> None:
    """Sent as written (ids replaced by those of real objects), each gets a success the document lists."""
    doc = _document(client)
    example = getattr(examples, name)
    user = auth()
    put_directory(client, examples.DIRECTORY_IN)  # the example's team, source and bot exist

    def remember(text: str) -> dict[str, Any]:
        r = client.post("/v1/memories", headers=user, json={**examples.REMEMBER_IN, "text": text})
        assert r.status_code in (201, 202), r.text
        return r.json()

    method, path, headers, body = "post", "", user, example
    if name == "REMEMBER_IN":
        path = "/v1/memories"
    elif name == "RECALL_IN":
        remember(examples.TEXT)
        path = "/v1/recall"
    elif name in ("RECEIPT_IN", "RECEIPT_BATCH_IN"):
        path = "/v1/receipts"
    elif name == "CORRECT_IN":
        path = f"/v1/memories/{remember(examples.TEXT)['id']}/correct"
    elif name == "CONFIRM_IN":
        candidate = remember("My doctor says my blood pressure is high, I take pills")  # sensitive: a candidate to review
        assert candidate["status"] == "pending_review"
        path = f"/v1/candidates/{candidate['id']}/confirm"
    elif name == "FORGET_MANY_IN":
        body = {"ids": [remember("I like tea")["id"], remember("I like green tea")["id"]]}
        path = "/v1/memories/forget"
    elif name == "DIRECTORY_IN":
        method, path, headers = "put", "/v1/admin/directory", _admin()
    elif name == "SETTINGS_IN":
        method, path = "put", "/v1/settings"
    r = client.request(method, path, headers=headers, json=body)
    template = re.sub(r"/[0-9a-f-]{36}/", "/{memory_id}/", path)
    declared = doc["paths"][template][method]["responses"]
    assert 200 <= r.status_code < 300, (name, r.status_code, r.text)
    assert str(r.status_code) in declared, (name, r.status_code)


def test_docs_serve_the_reference_from_the_service_itself(client: Any) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    sources = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: ?'([^']+)'", page.text)
    assert sources, "the page loads its assets and the document"
    for source in sources:
        assert source.startswith("/"), f"{source} is not served by the service"
        assert client.get(source).status_code == 200, source
