"""A bot acts for a person only while its company's directory registers it: 403 `bot_not_registered`
on every write and control, nothing on reads. And nothing is remembered into a revoked source."""

from __future__ import annotations

from uuid import uuid4

import pytest

from tests.support.helpers import auth, put_directory, remember_body, stored_events

DIRECTORY = {"teams": {"t-risk": {"members": ["alice"]}},
             "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
             "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}}


def _refused(r) -> None:
    assert r.status_code == 403, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "bot_not_registered"


def _receipt(receipt_id: str) -> dict:
    return {"receipt_id": receipt_id, "author": "user", "text": "I prefer tea in the afternoon.",
            "source": {"kind": "chat", "id": "chat-42", "message_id": "m-" + uuid4().hex[:6]}}


@pytest.fixture
def world(client) -> dict:
    put_directory(client, DIRECTORY)
    me = auth()
    memory = client.post("/v1/memories", json=remember_body("I keep my notes in Obsidian"), headers=me).json()
    candidate = client.post("/v1/memories", json=remember_body("My blood pressure medication is at 8am"),
                            headers=me).json()
    assert candidate["status"] == "pending_review"
    forget = client.post(f"/v1/memories/{memory['id']}/forget", headers=me).json()
    kept = client.post("/v1/memories", json=remember_body("Weekly reports as bullet points"), headers=me).json()
    assert client.post("/v1/receipts", json=_receipt("r-1"), headers=me).status_code == 202
    return {"kept": kept["id"], "candidate": candidate["id"], "forget_id": forget["forget_id"]}


def _assert_bot_can_do_nothing(engram, client, world, bot: dict[str, str]) -> None:
    before = stored_events(engram)
    kept, candidate = world["kept"], world["candidate"]
    _refused(client.post("/v1/memories", json=remember_body("I like green tea"), headers=bot))
    _refused(client.post("/v1/receipts", json=_receipt("r-bot"), headers=bot))
    for review in (client.post(f"/v1/candidates/{candidate}/confirm", json={"acknowledge_sensitive": True}, headers=bot),
                   client.post(f"/v1/candidates/{candidate}/reject", headers=bot)):
        assert review.status_code == 403 and review.json()["code"] == "person_only"  # registered or not
    _refused(client.post(f"/v1/memories/{kept}/correct", json={"text": "Bullet points, monthly"}, headers=bot))
    _refused(client.post(f"/v1/memories/{kept}/forget", headers=bot))
    _refused(client.post("/v1/sources/chat-42/revoke", headers=bot))
    _refused(client.put("/v1/settings", json={"learning_paused": True, "use_paused": True}, headers=bot))
    assert stored_events(engram) == before
    # reads find nothing
    assert client.get(f"/v1/memories/{kept}", headers=bot).status_code == 404
    assert client.get(f"/v1/memories/{kept}/history", headers=bot).status_code == 404
    assert client.get("/v1/memories", headers=bot).json()["items"] == []
    assert client.get("/v1/candidates", headers=bot).json()["items"] == []
    assert client.post("/v1/recall", json={"query": "reports"}, headers=bot).json()["items"] == []
    assert client.get(f"/v1/forgets/{world['forget_id']}", headers=bot).status_code == 404
    assert client.get("/v1/receipts/r-1", headers=bot).status_code == 404
    assert client.get("/v1/settings", headers=bot).status_code == 404
    assert client.get("/v1/export", headers=bot).json()["memories"] == []
    # and the person's own memory is untouched
    me = auth()
    assert client.get(f"/v1/memories/{kept}", headers=me).json()["text"] == "Weekly reports as bullet points"
    assert client.get("/v1/settings", headers=me).json() == {"learning_paused": False, "use_paused": False}


def test_an_unregistered_bot_can_do_nothing_for_the_person(engram, client, world) -> None:
    _assert_bot_can_do_nothing(engram, client, world, auth(role="bot", bot="b-rogue"))


def test_a_removed_bot_stops_at_once(engram, client, world) -> None:
    bot = auth(role="bot", bot="b-helper")
    r = client.post("/v1/memories", json=remember_body("I like green tea"), headers=bot)
    assert r.status_code == 201, r.text
    assert client.get("/v1/receipts/r-1", headers=bot).status_code == 200
    put_directory(client, {**DIRECTORY, "bots": {}})
    _assert_bot_can_do_nothing(engram, client, world, bot)
    put_directory(client, DIRECTORY)  # registered again: acts again
    assert client.post(f"/v1/memories/{world['kept']}/correct", json={"text": "Bullets, weekly"},
                       headers=bot).status_code == 200


def test_a_registered_bot_still_may_not_change_the_persons_controls(client, world) -> None:
    r = client.put("/v1/settings", json={"learning_paused": True, "use_paused": False},
                   headers=auth(role="bot", bot="b-helper"))
    assert r.status_code == 403 and r.json()["code"] == "forbidden"


def test_remembering_into_a_revoked_source_is_refused_and_stores_nothing(engram, client) -> None:
    me = auth()
    source = {"kind": "chat", "id": "chat-9", "message_id": "m-1"}
    assert client.post("/v1/memories", json=remember_body("First thought", source=source), headers=me).status_code == 201
    assert client.post("/v1/sources/chat-9/revoke", headers=me).status_code == 202
    before = stored_events(engram)
    r = client.post("/v1/memories", json=remember_body("Second thought", source={**source, "message_id": "m-2"}),
                    headers=me)
    assert r.status_code == 409 and r.json()["code"] == "source_revoked", r.text
    assert "thought" not in r.text
    assert stored_events(engram) == before
    # another source and another person are unaffected
    assert client.post("/v1/memories", json=remember_body("Elsewhere"), headers=me).status_code == 201
    assert client.post("/v1/memories", json=remember_body("Bob's", source=source),
                       headers=auth(user="bob")).status_code == 201
