"""Identity and bad input: clear 4xx problems with codes, and nothing partial written."""

from __future__ import annotations

from datetime import timedelta

import jwt
import pytest

from tests.support.helpers import SECRET, auth, is_problem, remember_body, stored_events, token


@pytest.fixture
def memory_id(client) -> str:
    return client.post("/v1/memories", json=remember_body("I keep my notes in Obsidian"), headers=auth()).json()["id"]


def test_missing_forged_and_expired_tokens_get_401(client, memory_id) -> None:
    forged = token(secret="not-the-secret-" + "y" * 32)
    expired = token(ttl=timedelta(seconds=-10))
    none_alg = jwt.encode({"sub": "alice", "company": "acme", "role": "user", "exp": 9999999999}, None, algorithm="none")
    for headers, code in [
        ({}, "unauthenticated"),
        ({"Authorization": "Basic abc"}, "unauthenticated"),
        ({"Authorization": f"Bearer {forged}"}, "invalid_token"),
        ({"Authorization": f"Bearer {none_alg}"}, "invalid_token"),
        ({"Authorization": "Bearer not.a.jwt"}, "invalid_token"),
        ({"Authorization": f"Bearer {expired}"}, "token_expired"),
    ]:
        is_problem(client.post("/v1/recall", json={"query": "notes"}, headers=headers), 401, code)
        is_problem(client.get(f"/v1/memories/{memory_id}", headers=headers), 401, code)


def test_token_missing_claims_is_refused(client) -> None:
    bad = jwt.encode({"sub": "alice", "role": "user", "exp": 9999999999}, SECRET, algorithm="HS256")
    is_problem(client.get("/v1/memories", headers={"Authorization": f"Bearer {bad}"}), 401, "invalid_token")
    bot_without_bot = jwt.encode({"sub": "alice", "company": "acme", "role": "bot", "exp": 9999999999},
                                 SECRET, algorithm="HS256")
    is_problem(client.get("/v1/memories", headers={"Authorization": f"Bearer {bot_without_bot}"}), 401, "invalid_token")


def token_of(headers: dict[str, str]) -> dict:
    return jwt.decode(headers["Authorization"].split()[1], options={"verify_signature": False})


def test_other_company_and_other_person_see_nothing(client, memory_id) -> None:
    for other in (auth(company="globex"), auth(user="bob"), auth(company="globex", role="bot", bot="b-helper")):
        is_problem(client.get(f"/v1/memories/{memory_id}", headers=other), 404, "not_found")
        is_problem(client.get(f"/v1/memories/{memory_id}/history", headers=other), 404, "not_found")
        # a bot of a company whose directory does not register it may not write at all (403), whatever the id
        status, code = (403, "bot_not_registered") if "bot" in token_of(other) else (404, "not_found")
        is_problem(client.post(f"/v1/memories/{memory_id}/forget", headers=other), status, code)
        is_problem(client.post(f"/v1/memories/{memory_id}/correct", json={"text": "x"}, headers=other), status, code)
        assert client.post("/v1/recall", json={"query": "notes Obsidian"}, headers=other).json()["items"] == []
        assert client.get("/v1/memories", headers=other).json()["items"] == []
        assert client.get("/v1/export", headers=other).json()["memories"] == []
    # an admin of the same company sees no one's memory text
    admin = auth(role="admin")
    assert client.post("/v1/recall", json={"query": "notes"}, headers=admin).json()["items"] == []
    is_problem(client.get(f"/v1/memories/{memory_id}", headers=admin), 404, "not_found")
    is_problem(client.post("/v1/memories", json=remember_body("x"), headers=admin), 403, "forbidden")
    # the owner still does
    assert client.get(f"/v1/memories/{memory_id}", headers=auth()).json()["text"] == "I keep my notes in Obsidian"


def test_forget_ids_are_private(client, memory_id) -> None:
    forget_id = client.post(f"/v1/memories/{memory_id}/forget", headers=auth()).json()["forget_id"]
    is_problem(client.get(f"/v1/forgets/{forget_id}", headers=auth(company="globex")), 404, "not_found")
    is_problem(client.get("/v1/forgets/fg-unknown", headers=auth()), 404, "not_found")


def test_bad_input_is_a_problem_and_writes_nothing(engram, client) -> None:
    h = {**auth(), "content-type": "application/json"}
    before = stored_events(engram)
    cases = [
        (client.post("/v1/memories", content=b'{"text": "abc",', headers=h), 400, "malformed_json"),
        (client.post("/v1/memories", content=b'{"text": "\xff\xfe bad utf8", "source": {"kind": "c", "id": "x"}}',
                     headers=h), 400, "malformed_json"),
        (client.post("/v1/memories", json={"source": {"kind": "chat", "id": "c"}}, headers=h), 422, "validation_error"),
        (client.post("/v1/memories", json={"text": "no source"}, headers=h), 422, "validation_error"),
        (client.post("/v1/memories", json=remember_body(123), headers=h), 422, "validation_error"),
        (client.post("/v1/memories", json=remember_body("x" * 8193), headers=h), 413, "text_too_large"),
        (client.post("/v1/memories", json=remember_body("nul \u0000 inside"), headers=h), 422, "invalid_text"),
        (client.post("/v1/memories", content=b'{"text": "lone \\ud800", "source": {"kind": "c", "id": "x"}}',
                     headers=h), 422, "invalid_text"),
        (client.post("/v1/memories", json=remember_body("ok", visibility="secret"), headers=h), 422, "validation_error"),
        (client.post("/v1/memories", json=remember_body("ok", visibility="restricted"), headers=h), 422, "invalid_scope"),
        (client.post("/v1/memories", json=remember_body("ok", valid_from="2026-02-01T00:00:00Z",
                                                        valid_to="2026-01-01T00:00:00Z"), headers=h),
         422, "invalid_valid_time"),
        (client.post("/v1/memories", json=remember_body("ok", occurred_at="2026-01-01T00:00:00"), headers=h),
         422, "invalid_time"),
        (client.post("/v1/memories", content=b"x" * 1_100_000, headers=h), 413, "body_too_large"),
        (client.post("/v1/recall", json={"query": "x", "as_of": "yesterday"}, headers=h), 422, "invalid_time"),
        (client.post("/v1/recall", json={"query": "x", "limit": "ten"}, headers=h), 422, "validation_error"),
        (client.post("/v1/recall", json={"query": "x", "max_bytes": -1}, headers=h), 422, "validation_error"),
        (client.post("/v1/recall", json={"query": "x\u0000"}, headers=h), 422, "invalid_text"),
        (client.get("/v1/memories/not-a-uuid", headers=h), 404, "not_found"),
        (client.get("/v1/memories/00000000-0000-0000-0000-000000000000", headers=h), 404, "not_found"),
        (client.post("/v1/memories/00000000-0000-0000-0000-000000000000/correct", json={"text": "y"}, headers=h),
         404, "not_found"),
        (client.post("/v1/candidates/00000000-0000-0000-0000-000000000000/confirm", json={}, headers=h),
         404, "not_found"),
        (client.get("/v1/memories", params={"cursor": "garbage"}, headers=h), 400, "invalid_cursor"),
        (client.get("/v1/nowhere", headers=h), 404, "not_found"),
    ]
    for r, status, code in cases:
        is_problem(r, status, code)
        assert "inside" not in r.text and "utf8" not in r.text  # no personal text echoed back
    assert stored_events(engram) == before


def test_text_limit_is_configurable(settings, database) -> None:

    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    system = Engram.open(settings.replace(max_text_bytes=64), database=database, background=False)
    try:
        with TestClient(create_app(system, SECRET)) as c:
            is_problem(c.post("/v1/memories", json=remember_body("y" * 65), headers=auth()), 413, "text_too_large")
            assert c.post("/v1/memories", json=remember_body("y" * 64), headers=auth()).status_code == 201
    finally:
        system.close()


def test_healthz_needs_no_token(client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_control_characters_in_ids_are_refused_and_block_nothing(engram, client) -> None:
    h = auth()
    before = stored_events(engram)
    for source in ({"kind": "chat", "id": "a\u0000b"}, {"kind": "c\u0001", "id": "x"},
                   {"kind": "chat", "id": "x", "message_id": "m\u0000"}):
        r = client.post("/v1/memories", json=remember_body("fine text", source=source), headers=h)
        is_problem(r, 422, "validation_error")
    r = client.post("/v1/receipts", json={"receipt_id": "r\u0000", "author": "user", "text": "I like tea.",
                                          "source": {"kind": "chat", "id": "c"}}, headers=h)
    is_problem(r, 422, "validation_error")
    is_problem(client.post("/v1/sources/a%00b/revoke", headers=h), 422, "validation_error")
    is_problem(client.get("/v1/forgets/a%00b", headers=h), 422, "validation_error")
    assert stored_events(engram) == before
    assert client.post("/v1/memories", json=remember_body("still works"), headers=h).status_code == 201


def test_non_admins_get_403_before_their_body_is_read(client) -> None:
    r = client.put("/v1/admin/directory", json={"teams": "nonsense"}, headers=auth())
    is_problem(r, 403, "forbidden")
