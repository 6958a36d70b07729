"""A byte scan of a pg_dump and of the database's files finds no memory text, before or after forgetting."""

from __future__ import annotations

import pytest

from tests.support.helpers import auth, files_containing, pg_dump, remember_body

SECRETS = [
    "quokka5521 prefers the aisle seat on long flights",
    "my locker code is tangerine-9182",
    "我的猫叫小笼包九四三",
    "Always book the window seat for okapi7730",  # these two repeat one instruction: an insight
    "okapi7730 should always book the window seat on trains",
]
NEEDLES = [b"quokka5521", b"tangerine-9182", "小笼包九四三".encode(), b"aisle seat", b"okapi7730"]


def _checkpoint(engram) -> None:
    # a checkpoint of a server many tests share can outlast a request's statement timeout
    with engram.store.datastore.long_running(), engram.store.datastore.get_connection() as conn:
        conn.execute("CHECKPOINT")


def test_dump_and_disk_hold_no_plaintext(engram, client, database, postgres) -> None:
    if postgres is None:
        pytest.skip("disk scan needs the embedded server's data directory")
    alice = auth()
    ids = [client.post("/v1/memories", json=remember_body(t), headers=alice).json()["id"] for t in SECRETS]
    client.post(f"/v1/memories/{ids[0]}/correct", json={"text": SECRETS[0] + " and window", "reason": "aisle seat"},
                headers=alice)
    # the service really holds the text: recall returns it
    found = client.post("/v1/recall", json={"query": "quokka5521 aisle"}, headers=alice).json()["items"]
    assert found and "quokka5521" in found[0]["text"]
    assert engram.insights.propose_due() == 1
    [insight] = client.get("/v1/insights", headers=alice).json()["items"]
    assert "okapi7730" in insight["text"]
    assert client.post(f"/v1/insights/{insight['id']}/confirm", headers=alice).status_code == 200

    # control: the scanners do find text that is stored in the clear
    with engram.store.datastore.transaction(commit=True) as curs:
        curs.execute("CREATE TABLE scan_control (t text)")
        curs.execute("INSERT INTO scan_control VALUES ('control-canary-6620')")
    _checkpoint(engram)
    dump = pg_dump(database, "--data-only", "--inserts")
    assert b"control-canary-6620" in dump
    assert files_containing(postgres.pgdata, [b"control-canary-6620"])
    assert b"engram_recall_terms" in dump and len(dump) > 1000
    assert [n for n in NEEDLES if n in dump] == []
    assert files_containing(postgres.pgdata, NEEDLES) == []

    for memory_id in ids:
        assert client.post(f"/v1/memories/{memory_id}/forget", headers=alice).status_code == 202
    _checkpoint(engram)
    dump = pg_dump(database, "--data-only", "--inserts")
    assert [n for n in NEEDLES if n in dump] == []
    assert files_containing(postgres.pgdata, NEEDLES) == []


SOURCE = {"kind": "chat", "id": "chat-secret-5521", "message_id": "msg-8813-secret"}
SOURCE_NEEDLES = [b"chat-secret-5521", b"msg-8813-secret", b"msg-4417-secret"]


def _dump_holds(dump: bytes, needles: list[bytes]) -> list[bytes]:
    """The needles a dump holds, as text or inside a bytea column (dumped as hex)."""
    return [n for n in needles if n in dump or n.hex().encode() in dump]


def test_a_source_is_readable_through_the_api_and_in_no_dump_or_file_before_or_after_its_forget(
        engram, client, database, postgres) -> None:
    """ADR 0019: a memory's and a receipt's source (kind, id, message id) are sealed with its key."""
    if postgres is None:
        pytest.skip("disk scan needs the embedded server's data directory")
    alice = auth()
    memory_id = client.post("/v1/memories", json=remember_body("I prefer window seats", source=SOURCE),
                            headers=alice).json()["id"]
    receipt = {"receipt_id": "r-1", "author": "user", "text": "I prefer to answer in French.",
               "occurred_at": "2026-11-02T09:00:00+08:00", "visibility": "general", "team": None,
               "source": {**SOURCE, "message_id": "msg-4417-secret"}}
    assert client.post("/v1/receipts", json=receipt, headers=alice).json()["state"] == "queued"
    engram.learning.work()
    candidates = client.get("/v1/candidates", headers=alice).json()["items"]
    assert [c["source"] for c in candidates] == [{**SOURCE, "message_id": "msg-4417-secret"}]
    # readable where the person looks: the memory, its list, the export
    assert client.get(f"/v1/memories/{memory_id}", headers=alice).json()["source"] == SOURCE
    assert [m["source"] for m in client.get("/v1/memories", headers=alice).json()["items"]] == [SOURCE]
    assert client.get("/v1/export", headers=alice).json()["memories"][0]["source"] == SOURCE
    # and stored nowhere in clear, even before the forget: events, views and the WAL hold it sealed
    _checkpoint(engram)
    dump = pg_dump(database, "--data-only", "--inserts")
    assert b"engram_memories" in dump and b"I prefer" not in dump
    assert _dump_holds(dump, SOURCE_NEEDLES) == []
    assert files_containing(postgres.pgdata, SOURCE_NEEDLES) == []

    # forgetting by the source still finds both through the blinded id
    r = client.post("/v1/memories/forget", json={"source_id": "chat-secret-5521"}, headers=alice)
    assert r.status_code == 202 and len(r.json()["forget_ids"]) == 2, r.text
    forgotten = client.get(f"/v1/memories/{memory_id}", headers=alice).json()
    assert forgotten["status"] == "forgotten" and forgotten["source"] is None and forgotten["text"] is None
    assert client.get("/v1/candidates", headers=alice).json()["items"] == []
    # the stored events still decode; their source is gone with the key
    events = [engram.store.mapper.to_domain_event(n)
              for n in engram.store.recorder.select_notifications(start=1, limit=1000)]
    created = [e for e in events if type(e).__name__ in ("Remembered", "Proposed", "Received")]
    assert len(created) == 3 and all(e.source is None for e in created)
    _checkpoint(engram)
    dump = pg_dump(database, "--data-only", "--inserts")
    assert _dump_holds(dump, SOURCE_NEEDLES) == []
    assert files_containing(postgres.pgdata, SOURCE_NEEDLES) == []
