"""Review rules: secrets refused without a trace, sensitive content waits for review, candidates expire."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from engram.api.bootstrap import Engram
from engram.api.http import create_app
from engram.domain.clock import FixedClock
from engram.domain.scope import Caller

from tests.support.helpers import SECRET, auth, remember_body, stored_events

SECRETS = [
    "my password is hunter2-orchid",
    "The wifi password for the office is sunflower77",
    "我的密码是orchid9981",
    "银行卡支付密码：558201",
    "my api key: sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "use token ghp_abcdefghijklmnopqrstuvwxyz0123456789 for the repo",
    "AWS key AKIAIOSFODNN7EXAMPLE",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
]
SENSITIVE = [
    "I was diagnosed with type 2 diabetes last spring",
    "My salary is 9,000 a month",
    "我最近在吃抗抑郁的药",
    "The customer Northwind's phone is +1 415 555 0100",
    "my card is 4111 1111 1111 1111",
]
ORDINARY = ["I prefer weekly reports as short bullet points", "以后开会请提前十分钟提醒我", "My manager is Dana"]


@pytest.mark.parametrize("text", SECRETS)
def test_secrets_are_refused_and_leave_no_trace(engram, client, caplog, text: str) -> None:
    caplog.set_level(logging.DEBUG)
    before = stored_events(engram)
    r = client.post("/v1/memories", json=remember_body(text), headers=auth())
    assert r.status_code == 422 and r.json()["code"] == "secret_refused"
    assert stored_events(engram) == before
    marker = text.split()[-1][-6:]
    assert marker not in r.text and marker not in caplog.text
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT count(*) AS n FROM engram_data_keys")
        assert curs.fetchone()["n"] == 0


@pytest.mark.parametrize("text", SENSITIVE)
def test_sensitive_content_becomes_a_candidate(client, text: str) -> None:
    r = client.post("/v1/memories", json=remember_body(text), headers=auth())
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "pending_review" and body["review"] == "sensitive" and body["text"] == text
    assert [c["id"] for c in client.get("/v1/candidates", headers=auth()).json()["items"]] == [body["id"]]
    assert client.post("/v1/recall", json={"query": text}, headers=auth()).json()["items"] == []
    r = client.post(f"/v1/candidates/{body['id']}/confirm", json={}, headers=auth())
    assert r.status_code == 409 and r.json()["code"] == "sensitive_ack_required"
    r = client.post(f"/v1/candidates/{body['id']}/confirm", json={"acknowledge_sensitive": True}, headers=auth())
    assert r.status_code == 200 and r.json()["status"] == "confirmed"
    assert [i["id"] for i in client.post("/v1/recall", json={"query": text}, headers=auth()).json()["items"]] == [
        body["id"]]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_facts_are_confirmed_exactly(client, text: str) -> None:
    r = client.post("/v1/memories", json=remember_body(text), headers=auth())
    assert r.status_code == 201 and r.json()["text"] == text and r.json()["status"] == "confirmed"


def test_secrets_are_refused_in_edits_corrections_and_proposals(engram, client) -> None:
    memory = client.post("/v1/memories", json=remember_body("My manager is Dana"), headers=auth()).json()
    r = client.post(f"/v1/memories/{memory['id']}/correct", json={"text": "my password is zebra-1234"}, headers=auth())
    assert r.status_code == 422 and r.json()["code"] == "secret_refused"
    r = client.post(f"/v1/memories/{memory['id']}/correct",
                    json={"text": "My manager is Lee", "reason": "密码是abc12345"}, headers=auth())
    assert r.status_code == 422
    alice = Caller("acme", "alice", "user")
    source = {"kind": "chat", "id": "c", "message_id": "m"}
    candidate = engram.memories.propose(alice, text="likes tea", quote="I like tea", source=source, occurred_at=None)
    r = client.post(f"/v1/candidates/{candidate.id}/confirm", json={"text": "my pin is 4821"}, headers=auth())
    assert r.status_code == 422 and r.json()["code"] == "secret_refused"
    r = client.post(f"/v1/candidates/{candidate.id}/confirm", json={"text": "takes insulin daily"}, headers=auth())
    assert r.status_code == 409 and r.json()["code"] == "sensitive_ack_required"
    from engram.domain.review import SecretRefused

    before = engram.store.recorder.max_notification_id()
    with pytest.raises(SecretRefused):
        engram.memories.propose(alice, text="password is x9x9x9", quote="my password is x9x9x9", source=source,
                               occurred_at=None)
    assert engram.store.recorder.max_notification_id() == before
    sensitive = engram.memories.propose(alice, text="on insulin", quote="I take insulin", source=source, occurred_at=None)
    assert sensitive.review == "sensitive"


def test_candidates_expire_and_are_shredded(settings, database) -> None:
    clock = FixedClock(datetime(2026, 11, 1, tzinfo=UTC))
    system = Engram.open(settings.replace(candidate_ttl_days=0.5), database=database, clock=clock, background=False)
    try:
        alice = Caller("acme", "alice", "user")
        source = {"kind": "chat", "id": "c", "message_id": "m"}
        old = system.memories.propose(alice, text="likes plums", quote="I like plums", source=source, occurred_at=None)
        clock.advance(hours=6)
        young = system.memories.propose(alice, text="likes figs", quote="I like figs", source=source, occurred_at=None)
        assert system.memories.expire_due_candidates() == 0
        clock.advance(hours=6, seconds=1)
        assert system.memories.expire_due_candidates() == 1
        assert system.memories.expire_due_candidates() == 0  # idempotent
        with TestClient(create_app(system, SECRET)) as c:
            assert [x["id"] for x in c.get("/v1/candidates", headers=auth()).json()["items"]] == [young.id]
            got = c.get(f"/v1/memories/{old.id}", headers=auth()).json()
            assert got["status"] == "expired" and got["text"] is None
            history = c.get(f"/v1/memories/{old.id}/history", headers=auth()).json()["events"]
            assert [e["type"] for e in history] == ["Proposed", "Expired"] and all(e["text"] is None for e in history)
            r = c.post(f"/v1/candidates/{old.id}/confirm", json={}, headers=auth())
            assert r.status_code == 409
        assert system.store.keys.get(old.id) is None and system.store.keys.get(young.id) is not None
    finally:
        system.close()


def test_rejected_candidates_are_shredded_and_expired_ones_cannot_be_confirmed(settings, database) -> None:
    clock = FixedClock(datetime(2026, 11, 1, tzinfo=UTC))
    system = Engram.open(settings.replace(candidate_ttl_days=1), database=database, clock=clock, background=False)
    try:
        alice = Caller("acme", "alice", "user")
        source = {"kind": "chat", "id": "c", "message_id": "m"}
        rejected = system.memories.propose(alice, text="likes sloes", quote="I like sloes", source=source,
                                          occurred_at=None)
        late = system.memories.propose(alice, text="likes rowan", quote="I like rowan", source=source,
                                      occurred_at=None)
        system.memories.reject(alice, rejected.id)
        assert system.store.keys.get(rejected.id) is None
        assert system.memories.get(alice, rejected.id).text is None
        clock.advance(days=1)  # expired, though no sweep has run yet
        from engram.domain.errors import NotACandidate

        with pytest.raises(NotACandidate):
            system.memories.confirm(alice, late.id, text=None, acknowledge_sensitive=False)
    finally:
        system.close()


def test_a_correction_into_sensitive_content_needs_acknowledgement(client) -> None:
    m = client.post("/v1/memories", json=remember_body("My manager is Dana"), headers=auth()).json()
    r = client.post(f"/v1/memories/{m['id']}/correct", json={"text": "I was diagnosed with asthma"}, headers=auth())
    assert r.status_code == 409 and r.json()["code"] == "sensitive_ack_required"
    r = client.post(f"/v1/memories/{m['id']}/correct",
                    json={"text": "I was diagnosed with asthma", "acknowledge_sensitive": True}, headers=auth())
    assert r.status_code == 200 and r.json()["revision"] == 2


def test_rejection_and_expiry_report_their_purge_like_a_forget(settings, database) -> None:
    """A rejected or expired candidate gets a purge id whose status lists every copy with evidence."""
    clock = FixedClock(datetime(2026, 11, 1, tzinfo=UTC))
    system = Engram.open(settings.replace(candidate_ttl_days=1), database=database, clock=clock, background=False)
    try:
        client = TestClient(create_app(system, SECRET))
        alice = Caller("acme", "alice", "user")
        source = {"kind": "chat", "id": "c", "message_id": "m"}
        rejected = system.memories.propose(alice, text="likes sloes", quote="I like sloes", source=source,
                                           occurred_at=None)
        expiring = system.memories.propose(alice, text="likes rowan", quote="I like rowan", source=source,
                                           occurred_at=None)
        answer = client.post(f"/v1/candidates/{rejected.id}/reject", headers=auth())
        assert answer.status_code == 200 and answer.json()["purge_id"] == f"rj-{rejected.id}"
        clock.advance(days=1, seconds=1)
        assert system.memories.expire_due_candidates() == 1
        for purge_id in (f"rj-{rejected.id}", f"ex-{expiring.id}"):
            status = client.get(f"/v1/forgets/{purge_id}", headers=auth())
            assert status.status_code == 200, status.text
            doc = status.json()
            copies = {c["copy"]: c for c in doc["copies"]}
            assert doc["status"] == "purge_complete" and set(copies) >= {"event_store", "recall_view",
                                                                         "review_queue", "inbox"}
            assert all(c["state"] == "purged" and c["evidence"] for c in copies.values())
            assert client.get(f"/v1/forgets/{purge_id}", headers=auth(user="bob")).status_code == 404
        with system.store.datastore.get_connection() as conn:
            rows = conn.execute("SELECT count(*) AS n FROM engram_memories WHERE memory_id = ANY(%s::uuid[]) "
                                "AND (sealed_text IS NOT NULL OR sealed_evidence IS NOT NULL)",
                                ([rejected.id, expiring.id],)).fetchone()["n"]
        assert rows == 0  # not even ciphertext under the destroyed keys stays in the view
    finally:
        system.close()
