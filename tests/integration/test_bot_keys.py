"""Bot keys through HTTP: an admin issues a key for a registered bot (shown once, kept as a digest), the
bot acts with it for the person it names exactly as a bot token would, and revoking the key or removing
the bot stops it on the next request."""

from __future__ import annotations

from typing import Any

from tests.support.helpers import auth, put_directory, remember_body

ROOT = auth(user="root", role="admin")
DIRECTORY = {"teams": {}, "sources": {}, "bots": {"b-helper": {"teams": [], "sources": []}}}


def as_bot(key: str, person: str | None = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **({"X-Engram-Person": person} if person is not None else {})}


def issued(client: Any, bot: str = "b-helper") -> dict[str, Any]:
    r = client.post(f"/v1/admin/bots/{bot}/keys", headers=ROOT)
    assert r.status_code == 201, r.text
    return r.json()


def test_a_bot_key_acts_for_the_person_it_names_as_a_bot_token_would(client, engram) -> None:
    put_directory(client, DIRECTORY)
    key = issued(client)
    assert key["bot"] == "b-helper" and key["key"].startswith("ek_") and key["key_id"] in key["key"]
    made = client.post("/v1/memories", json=remember_body("I prefer green tea"), headers=as_bot(key["key"]))
    assert made.status_code == 201, made.text
    history = client.get(f"/v1/memories/{made.json()['id']}/history", headers=auth()).json()["events"]
    assert history[0]["actor"] == "b-helper"  # alice's memory, remembered by her bot
    recalled = client.post("/v1/recall", json={"query": "green tea"}, headers=as_bot(key["key"]))
    assert [i["id"] for i in recalled.json()["items"]] == [made.json()["id"]]
    assert client.post("/v1/recall", json={"query": "green tea"}, headers=as_bot(key["key"], "bob")).json()["items"] == []
    # as a bot token: the person reviews, never the bot
    assert client.get("/v1/candidates", headers=as_bot(key["key"])).status_code in (200, 403)
    r = client.post("/v1/me/sign-out-everywhere", headers=as_bot(key["key"]))
    assert r.status_code == 403
    with engram.store.datastore.get_connection() as conn:  # only a digest is kept, never the key
        rows = conn.execute("SELECT digest FROM engram_bot_keys").fetchall()
    secret = key["key"].rsplit("_", 1)[1]
    assert len(rows) == 1 and secret not in rows[0]["digest"] and key["key"] not in str(rows)
    listed = client.get("/v1/admin/bots/b-helper/keys", headers=ROOT).json()["items"]
    assert [(k["key_id"], k["revoked"]) for k in listed] == [(key["key_id"], False)] and "key" not in listed[0]


def test_a_revoked_key_or_a_removed_bot_stops_on_the_next_request(client) -> None:
    put_directory(client, {**DIRECTORY, "bots": {"b-helper": {"teams": [], "sources": []},
                                                 "b-other": {"teams": [], "sources": []}}})
    first, second, other = issued(client), issued(client), issued(client, "b-other")
    assert client.get("/v1/memories", headers=as_bot(first["key"])).status_code == 200
    r = client.delete(f"/v1/admin/bots/b-helper/keys/{first['key_id']}", headers=ROOT)
    assert r.status_code == 200 and r.json()["revoked"] is True
    refused = client.get("/v1/memories", headers=as_bot(first["key"]))
    assert refused.status_code == 401 and (refused.json()["code"], refused.json()["reason"]) == ("key_revoked", "revoked")
    assert client.get("/v1/memories", headers=as_bot(second["key"])).status_code == 200  # its other key still works
    put_directory(client, {**DIRECTORY, "bots": {"b-other": {"teams": [], "sources": []}}})  # b-helper removed
    assert client.get("/v1/memories", headers=as_bot(second["key"])).json()["code"] == "key_revoked"
    assert client.get("/v1/memories", headers=as_bot(other["key"])).status_code == 200


def test_keys_are_refused_when_forged_unnamed_or_of_another_company(client) -> None:
    put_directory(client, DIRECTORY)
    key = issued(client)["key"]
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    for headers in (as_bot(forged), as_bot("ek_0000000000000000_" + "x" * 43)):
        r = client.get("/v1/memories", headers=headers)
        assert r.status_code == 401 and r.json()["code"] == "key_revoked", r.text
    missing = client.get("/v1/memories", headers=as_bot(key, None))
    assert missing.status_code == 400 and missing.json()["code"] == "person_required"
    assert client.get("/v1/memories", headers=as_bot(key, "a\u0000b")).json()["code"] == "person_required"
    # another company's admin cannot issue for, list or revoke acme's bot's keys
    beta = auth(company="beta", user="root", role="admin")
    assert client.post("/v1/admin/bots/b-helper/keys", headers=beta).status_code == 404  # not in beta's directory
    key_id = client.get("/v1/admin/bots/b-helper/keys", headers=ROOT).json()["items"][0]["key_id"]
    assert client.delete(f"/v1/admin/bots/b-helper/keys/{key_id}", headers=beta).status_code == 404
    assert client.get("/v1/admin/bots/b-helper/keys", headers=beta).json()["items"] == []
    for who in (auth(), auth(role="bot", bot="b-helper"), as_bot(key)):  # only admins manage keys
        assert client.post("/v1/admin/bots/b-helper/keys", headers=who).status_code == 403
    assert client.post("/v1/admin/bots/b-unknown/keys", headers=ROOT).status_code == 404
    # a person's suspension stops the bot acting for them with its key too
    assert client.post("/v1/admin/people/alice/suspend", headers=ROOT).status_code == 200
    assert client.get("/v1/memories", headers=as_bot(key)).json()["code"] == "person_suspended"
    assert client.get("/v1/memories", headers=as_bot(key, "bob")).status_code == 200
    # the pages are for people
    assert client.get("/memory", params={"token": key}).status_code == 401
