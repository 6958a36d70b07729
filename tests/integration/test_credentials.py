"""Credentials through HTTP: signing out everywhere revokes every earlier token of the person (bots'
included), an admin can do it for a person and suspend and resume them, and every operation refuses a
revoked token (401 `token_revoked`, reason `revoked`) and a suspended person (403 `person_suspended`)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.helpers import auth, next_second, put_directory, remember_body, token

DIRECTORY = {"teams": {}, "sources": {}, "bots": {"b-helper": {"teams": [], "sources": []}}}
ROOT = auth(user="root", role="admin")


def later_token(**claims: Any) -> dict[str, str]:
    """A token issued in a later second than a sign-out."""
    next_second()
    return auth(**claims)


def test_signing_out_everywhere_revokes_every_earlier_token_and_only_those(client) -> None:
    put_directory(client, DIRECTORY)
    web, bot, bob = auth(entry="web"), auth(role="bot", bot="b-helper"), auth(user="bob")
    made = client.post("/v1/memories", json=remember_body("I prefer window seats"), headers=web)
    assert made.status_code == 201
    r = client.post("/v1/me/sign-out-everywhere", headers=web)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["person"] == "alice" and answer["suspended"] is False
    assert answer["signed_out_before"] >= int(datetime.now(UTC).timestamp()) - 5
    for headers in (web, bot):  # the token that asked, and the bot's token for the same person
        for method, path, body in (("GET", "/v1/memories", None), ("POST", "/v1/recall", {"query": "seats"}),
                                   ("POST", "/v1/memories", remember_body("I fly on Fridays"))):
            refused = client.request(method, path, json=body, headers=headers)
            assert refused.status_code == 401, (path, refused.text)
            problem = refused.json()
            assert (problem["code"], problem["reason"]) == ("token_revoked", "revoked")
            assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/v1/memories", headers=bob).status_code == 200  # another person is untouched
    fresh = later_token(entry="web")
    page = client.get("/v1/memories", headers=fresh)
    assert page.status_code == 200 and [m["id"] for m in page.json()["items"]] == [made.json()["id"]]  # memories stay


def test_a_bot_cannot_sign_its_person_out(client) -> None:
    put_directory(client, DIRECTORY)
    r = client.post("/v1/me/sign-out-everywhere", headers=auth(role="bot", bot="b-helper"))
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    assert client.get("/v1/settings", headers=auth()).status_code == 200


def test_an_admin_signs_a_person_out_and_suspends_and_resumes_them(client) -> None:
    put_directory(client, DIRECTORY)
    alice, bot, bob = auth(), auth(role="bot", bot="b-helper"), auth(user="bob")
    assert client.post("/v1/memories", json=remember_body("I take the train to work"), headers=alice).status_code == 201
    r = client.post("/v1/admin/people/alice/suspend", headers=ROOT)
    assert r.status_code == 200 and r.json()["suspended"] is True
    for headers in (alice, bot, later_token()):  # a token issued after the suspension too
        refused = client.post("/v1/recall", json={"query": "train"}, headers=headers)
        assert refused.status_code == 403 and refused.json()["code"] == "person_suspended", refused.text
    assert client.get("/v1/memories", headers=bob).status_code == 200  # bob is not alice
    assert client.post("/v1/admin/people/alice/suspend", headers=ROOT).json()["suspended"] is True  # idempotent
    assert client.post("/v1/admin/people/alice/resume", headers=ROOT).json()["suspended"] is False
    recalled = client.post("/v1/recall", json={"query": "train"}, headers=alice)
    assert recalled.status_code == 200 and recalled.json()["items"]  # the memories stayed
    assert client.post("/v1/admin/people/alice/sign-out-everywhere", headers=ROOT).status_code == 200
    assert client.get("/v1/settings", headers=alice).json()["code"] == "token_revoked"
    assert client.get("/v1/settings", headers=later_token()).status_code == 200


def test_only_an_admin_of_the_company_acts_on_its_people(client) -> None:
    put_directory(client, DIRECTORY)
    for path in ("suspend", "resume", "sign-out-everywhere"):
        assert client.post(f"/v1/admin/people/bob/{path}", headers=auth()).json()["code"] == "forbidden"
    refused = client.post("/v1/admin/people/root/suspend", headers=ROOT)  # never themself
    assert refused.status_code == 403 and client.get("/v1/admin/status", headers=ROOT).status_code == 200
    # another company's admin suspends their own "alice", not acme's
    assert client.post("/v1/admin/people/alice/suspend", headers=auth(company="beta", user="root", role="admin")) \
        .status_code == 200
    assert client.get("/v1/settings", headers=auth()).status_code == 200
    assert client.get("/v1/settings", headers=auth(company="beta")).json()["code"] == "person_suspended"
    for person in ("..", "a" * 300, "al ice\n", "%2e%2e"):
        r = client.post(f"/v1/admin/people/{quote(person, safe='%')}/suspend", headers=ROOT)
        assert r.status_code in (404, 422) and "code" in r.json(), (person, r.text)


def test_a_suspended_admin_is_refused_too(client) -> None:
    other = auth(user="root2", role="admin")
    assert client.post("/v1/admin/people/root/suspend", headers=other).status_code == 200
    for path in ("/v1/admin/status", "/v1/admin/directory"):
        assert client.get(path, headers=ROOT).json()["code"] == "person_suspended"
    assert client.post("/v1/admin/people/root2/suspend", headers=ROOT).json()["code"] == "person_suspended"


# -- every operation ---------------------------------------------------------------------------------

NOT_AUTHENTICATED = {"/healthz", "/livez", "/readyz", "/metrics"}


def _example(doc: dict[str, Any], op: dict[str, Any]) -> Any:
    body = op.get("requestBody")
    if body is None:
        return None
    schema = body["content"]["application/json"]["schema"]
    refs = [schema.get("$ref")] + [choice.get("$ref") for choice in schema.get("anyOf", [])]
    ref = [r for r in refs if r][-1].rsplit("/", 1)[-1]  # of several bodies (a receipt or a batch), the last
    component = doc["components"]["schemas"][ref]
    return component.get("example") or component["examples"][0]


@pytest.mark.parametrize("refusal", ["revoked", "suspended"])
def test_every_operation_refuses_a_revoked_token_and_a_suspended_person(client, refusal: str,
                                                                         tmp_path: Path) -> None:
    """Walked from /openapi.json, so a new route cannot forget the check."""
    put_directory(client, DIRECTORY)
    alice, root = auth(), auth(user="root", role="admin")
    memory = client.post("/v1/memories", json=remember_body("I like green tea"), headers=alice).json()["id"]
    ids = {"memory_id": memory, "forget_id": "fg-0", "insight_id": "in-0", "receipt_id": "r-0",
           "source_id": "chat-42", "person": "bob", "bot": "b-helper", "key_id": "0000000000000000"}
    if refusal == "revoked":
        client.post("/v1/me/sign-out-everywhere", headers=alice)
        client.post("/v1/me/sign-out-everywhere", headers=root)
        expected = (401, "token_revoked")
    else:
        other = auth(user="root2", role="admin")
        for person in ("alice", "root"):
            assert client.post(f"/v1/admin/people/{person}/suspend", headers=other).status_code == 200
        expected = (403, "person_suspended")
    doc = client.get("/openapi.json").json()
    walked = 0
    for path, operations in doc["paths"].items():
        if path in NOT_AUTHENTICATED:
            continue
        for method, op in operations.items():
            headers = root if path.startswith("/v1/admin/") else alice
            r = client.request(method.upper(), path.format(**ids), headers=headers,
                               content=None if _example(doc, op) is None else json.dumps(_example(doc, op)),
                               params={"format": "json"} if path == "/v1/export" else None)
            assert (r.status_code, r.json().get("code")) == expected, (method, path, r.status_code, r.text)
            walked += 1
    assert walked >= 30


def test_signing_out_of_the_pages_ends_that_session_on_the_server(client) -> None:
    """A copied session cookie, or the same token in a bot, stops working; the person's other tokens go on."""
    session, other = token(), auth()
    client.get("/memory", params={"token": session})  # signed in: the session cookie holds the token
    page = client.get("/memory")
    assert page.status_code == 200
    csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    assert csrf is not None
    assert client.post("/sign-out", data={"csrf_token": csrf.group(1)}, follow_redirects=False).status_code == 303
    copied = client.get("/v1/memories", headers={"Authorization": f"Bearer {session}"})
    assert copied.status_code == 401 and copied.json()["code"] == "token_revoked"
    client.cookies.set("engram_session", session)  # the cookie kept and sent again
    assert client.get("/memory").status_code == 401
    assert client.get("/v1/memories", headers=other).status_code == 200


def test_a_sign_in_link_of_another_person_asks_before_it_replaces_the_session(client) -> None:
    alice, bob = token(), token(user="bob")
    assert client.get("/memory", params={"token": alice}, follow_redirects=False).status_code == 303
    asked = client.get("/memory", params={"token": bob}, follow_redirects=False)
    assert asked.status_code == 200 and "Switch person?" in asked.text
    assert "alice" in asked.text and "bob" in asked.text
    page = client.get("/memory")
    assert page.status_code == 200 and "alice" in page.text and "bob" not in page.text  # still alice's page
    assert client.cookies.get("engram_session") == alice  # nothing replaced until the person says so
    csrf = re.search(r'name="csrf_token" value="([0-9a-f]+)"', asked.text)
    assert csrf is not None
    switched = client.post("/sign-in", data={"token": bob, "next": "/memory", "csrf_token": csrf.group(1)},
                           follow_redirects=False)
    assert switched.status_code == 303 and client.cookies.get("engram_session") == bob
    zh = client.get("/memory", params={"token": alice}, headers={"Accept-Language": "zh-CN"}, follow_redirects=False)
    assert zh.status_code == 200 and "要切换用户吗" in zh.text
    again = token(user="bob")  # the same person's new link replaces the session without asking
    assert client.get("/memory", params={"token": again}, follow_redirects=False).status_code == 303
    assert client.cookies.get("engram_session") == again
