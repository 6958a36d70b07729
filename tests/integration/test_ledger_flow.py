"""The whole life of a memory through the HTTP API, on a real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from engram.api.http import create_app

from tests.support.helpers import SECRET, auth, put_directory, remember_body

TEXT = "I prefer weekly reports as short bullet points, zebrafinch-7781"
FIXED = "I prefer monthly reports as long narrative prose, zebrafinch-7781"


def test_remember_recall_correct_forget(engram) -> None:
    alice = auth(user="alice")
    alice_web = auth(user="alice", entry="web")
    alice_bot = auth(user="alice", role="bot", bot="b-helper", entry="channel")

    with TestClient(create_app(engram, SECRET)) as writer:
        put_directory(writer, {"bots": {"b-helper": {}}})
        r = writer.post("/v1/memories", json=remember_body(TEXT), headers=alice)
        assert r.status_code == 201, r.text
        memory = r.json()
        assert memory["status"] == "confirmed" and memory["text"] == TEXT and memory["revision"] == 1
        assert memory["evidence"][0]["quote"] == TEXT
        memory_id = memory["id"]

    # A fresh client sees the write at once (read-your-writes).
    with TestClient(create_app(engram, SECRET)) as reader:
        r = reader.post("/v1/recall", json={"query": "weekly reports format"}, headers=alice_bot)
        assert r.status_code == 200
        body = r.json()
        assert [i["id"] for i in body["items"]] == [memory_id]
        assert body["items"][0]["text"] == TEXT and body["items"][0]["kind"] == "memory"
        assert body["degraded"] is False and body["bytes"] > 0  # no semantic index configured: SQL ranks, undegraded

    # Correct from another token of the same person; recall returns revision 2 only.
    with TestClient(create_app(engram, SECRET)) as other:
        r = other.post(f"/v1/memories/{memory_id}/correct", json={"text": FIXED, "reason": "changed my mind"},
                       headers=alice_web)
        assert r.status_code == 200, r.text
        assert r.json()["revision"] == 2 and r.json()["text"] == FIXED
        items = other.post("/v1/recall", json={"query": "reports"}, headers=alice_bot).json()["items"]
        assert [(i["id"], i["revision"], i["text"]) for i in items] == [(memory_id, 2, FIXED)]
        # the replaced wording no longer answers even its own words
        assert other.post("/v1/recall", json={"query": "weekly bullet"}, headers=alice).json()["items"] == []

        history = other.get(f"/v1/memories/{memory_id}/history", headers=alice).json()["events"]
        assert [(e["type"], e["revision"], e["text"]) for e in history] == [
            ("Remembered", 1, TEXT), ("Corrected", 2, FIXED)]

        # Forget: 202 and "stopped using" before any purge is reported.
        r = other.post(f"/v1/memories/{memory_id}/forget", headers=alice)
        assert r.status_code == 202
        assert r.json()["status"] == "stopped_using"
        forget_id = r.json()["forget_id"]

    with TestClient(create_app(engram, SECRET)) as after:
        assert after.post("/v1/recall", json={"query": "reports"}, headers=alice).json()["items"] == []
        got = after.get(f"/v1/memories/{memory_id}", headers=alice).json()
        assert got["status"] == "forgotten" and got["text"] is None and got["evidence"] == []
        assert got["purge_id"] == forget_id  # from the memory to its copies' purge
        listed = after.get("/v1/memories", params={"status": "all"}, headers=alice).json()["items"]
        assert all(i["text"] is None for i in listed) and [i["status"] for i in listed] == ["forgotten"]
        assert after.get("/v1/memories", headers=alice).json()["items"] == []
        history = after.get(f"/v1/memories/{memory_id}/history", headers=alice).json()["events"]
        assert [e["type"] for e in history] == ["Remembered", "Corrected", "Forgotten"]
        assert all(e["text"] is None for e in history)
        exported = after.get("/v1/export", headers=alice)
        assert exported.status_code == 200 and "zebrafinch" not in exported.text
        markdown = after.get("/v1/export", params={"format": "markdown"}, headers=alice)
        assert markdown.status_code == 200 and "zebrafinch" not in markdown.text

        status = after.get(f"/v1/forgets/{forget_id}", headers=alice).json()
        assert status["status"] == "purge_complete"
        assert {c["copy"]: c["state"] for c in status["copies"]} == {
            "event_store": "purged", "recall_view": "purged", "review_queue": "purged", "inbox": "purged",
            "backups": "purged"}  # no backup was taken before the forget
        assert {c["copy"]: c["evidence"] for c in status["copies"]}["inbox"] == "no receipt payload produced this memory"
        assert all(c["evidence"] and c["purged_at"] for c in status["copies"])

        # Nothing more can change a forgotten memory.
        r = after.post(f"/v1/memories/{memory_id}/correct", json={"text": "again"}, headers=alice)
        assert r.status_code == 409 and r.json()["code"] == "memory_forgotten"


def test_forget_stops_use_even_with_projectors_stopped(engram, client) -> None:
    alice = auth()
    memory_id = client.post("/v1/memories", json=remember_body(TEXT), headers=alice).json()["id"]
    engram.runner.settle = lambda _n: None  # every projector stopped from here on
    assert client.post(f"/v1/memories/{memory_id}/forget", headers=alice).status_code == 202
    assert engram.projections["recall"].view.position() < (engram.store.recorder.max_notification_id() or 0)
    assert client.post("/v1/recall", json={"query": "weekly reports"}, headers=alice).json()["items"] == []
    assert client.get(f"/v1/memories/{memory_id}", headers=alice).json()["text"] is None
    assert all(i["text"] is None for i in client.get("/v1/memories", headers=alice).json()["items"])
    assert all(e["text"] is None for e in
               client.get(f"/v1/memories/{memory_id}/history", headers=alice).json()["events"])
    assert "zebrafinch" not in client.get("/v1/export", headers=alice).text


def test_rebuilding_the_recall_view_after_forget_brings_nothing_back(engram, client) -> None:
    alice = auth()
    keep = client.post("/v1/memories", json=remember_body("I drink oolong tea every morning"), headers=alice).json()
    gone = client.post("/v1/memories", json=remember_body(TEXT), headers=alice).json()
    client.post(f"/v1/memories/{gone['id']}/correct", json={"text": FIXED}, headers=alice)
    client.post(f"/v1/memories/{gone['id']}/forget", headers=alice)

    def corpus() -> list[tuple]:
        with engram.store.datastore.transaction() as curs:
            curs.execute("SELECT company, person, answers, total_len FROM engram_recall_stats ORDER BY 1, 2")
            return [tuple(r.values()) for r in curs.fetchall()]

    before = corpus()
    assert [row[2] for row in before] == [1]  # only the kept memory still answers
    applied = engram.operations.rebuild("recall")
    assert applied == 4  # two Remembered, one Corrected, one Forgotten
    assert corpus() == before
    assert client.post("/v1/recall", json={"query": "reports zebrafinch"}, headers=alice).json()["items"] == []
    items = client.post("/v1/recall", json={"query": "oolong tea"}, headers=alice).json()["items"]
    assert [i["id"] for i in items] == [keep["id"]]
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT count(*) AS n FROM engram_recall_terms WHERE memory_id = %s", (gone["id"],))
        assert curs.fetchone()["n"] == 0
        curs.execute("SELECT sealed_text FROM engram_memories WHERE memory_id = %s", (gone["id"],))
        assert curs.fetchone()["sealed_text"] is None


def test_valid_time_supersede_and_as_of(client) -> None:
    alice = auth()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    m = client.post("/v1/memories", json=remember_body("My manager is Dana", valid_from=t0.isoformat()),
                    headers=alice).json()
    assert m["time_uncertain"] is False
    change = t0 + timedelta(days=100)
    r = client.post(f"/v1/memories/{m['id']}/correct",
                    json={"text": "My manager is Lee", "valid_from": change.isoformat()}, headers=alice)
    assert r.status_code == 200
    before = client.post("/v1/recall", json={"query": "manager", "as_of": (change - timedelta(days=1)).isoformat()},
                         headers=alice).json()["items"]
    after = client.post("/v1/recall", json={"query": "manager"}, headers=alice).json()["items"]
    assert [(i["revision"], i["text"]) for i in before] == [(1, "My manager is Dana")]
    assert [(i["revision"], i["text"]) for i in after] == [(2, "My manager is Lee")]
    # the superseded answer ends where the correction took over; the current one is open-ended
    assert datetime.fromisoformat(before[0]["valid_to"]) == change and after[0]["valid_to"] is None
    assert datetime.fromisoformat(before[0]["valid_from"]) == t0
    ancient = client.post("/v1/recall", json={"query": "manager", "as_of": "2025-01-01T00:00:00+00:00"},
                          headers=alice).json()["items"]
    assert ancient == []


def test_recall_byte_budget_counts_what_it_could_not_return(engram, client) -> None:
    alice = auth()
    small = [f"budget note number {i} about lunch" for i in range(5)]
    for s in small:
        client.post("/v1/memories", json=remember_body(s), headers=alice)
    body = client.post("/v1/recall", json={"query": "budget"}, headers=alice).json()
    assert sorted(i["text"] for i in body["items"]) == sorted(small) and body["omitted"] == 0
    each = 2 * len(small[0].encode())  # its text and its quote
    tight = client.post("/v1/recall", json={"query": "budget", "max_bytes": 2 * each + 10}, headers=alice).json()
    assert [i.get("truncated", False) for i in tight["items"]] == [False, False, True]
    assert tight["omitted"] == 2 and tight["bytes"] == 2 * each + 10
    assert client.post("/v1/recall", json={"query": "budget", "limit": 2}, headers=alice).json()["items"].__len__() == 2


def test_ranking_prefers_the_better_match(client) -> None:
    alice = auth()
    client.post("/v1/memories", json=remember_body("I like hiking in the mountains"), headers=alice)
    best = client.post("/v1/memories", json=remember_body("Send the risk report to the risk committee"),
                       headers=alice).json()
    client.post("/v1/memories", json=remember_body("The report template is in the shared drive"), headers=alice)
    items = client.post("/v1/recall", json={"query": "risk report"}, headers=alice).json()["items"]
    assert items[0]["id"] == best["id"] and len(items) == 2
    assert items[0]["score"] > items[1]["score"]


def test_chinese_recall(client) -> None:
    alice = auth()
    m = client.post("/v1/memories", json=remember_body("我喜欢喝乌龙茶，以后开会请提醒我"), headers=alice).json()
    items = client.post("/v1/recall", json={"query": "乌龙茶"}, headers=alice).json()["items"]
    assert [i["id"] for i in items] == [m["id"]]


def test_candidates_review_through_the_service(engram, client) -> None:
    from engram.domain.scope import Caller

    alice = Caller("acme", "alice", "user")
    source = {"kind": "chat", "id": "chat-9", "message_id": "m-1"}
    normal = engram.memories.propose(alice, text="prefers tea", quote="I prefer tea", source=source, occurred_at=None)
    sensitive = engram.memories.propose(alice, text="takes insulin", quote="I take insulin", source=source,
                                       occurred_at=None, review="sensitive")
    rejected = engram.memories.propose(alice, text="likes rain", quote="I like rain", source=source, occurred_at=None)
    headers = auth()
    listed = client.get("/v1/candidates", headers=headers).json()["items"]
    assert {c["id"] for c in listed} == {normal.id, sensitive.id, rejected.id}
    assert {c["review"] for c in listed} == {"normal", "sensitive"}
    assert all(c["status"] == "pending_review" and c["expires_at"] for c in listed)
    # unreviewed candidates never reach recall
    assert client.post("/v1/recall", json={"query": "tea insulin rain"}, headers=headers).json()["items"] == []

    r = client.post(f"/v1/candidates/{sensitive.id}/confirm", json={}, headers=headers)
    assert r.status_code == 409 and r.json()["code"] == "sensitive_ack_required"
    r = client.post(f"/v1/candidates/{sensitive.id}/confirm", json={"acknowledge_sensitive": True}, headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "confirmed"
    r = client.post(f"/v1/candidates/{normal.id}/confirm", json={"text": "prefers green tea"}, headers=headers)
    assert r.status_code == 200 and r.json()["text"] == "prefers green tea"
    assert client.post(f"/v1/candidates/{rejected.id}/reject", headers=headers).status_code == 200
    assert client.get("/v1/candidates", headers=headers).json()["items"] == []
    texts = {i["text"] for i in client.post("/v1/recall", json={"query": "tea insulin rain"}, headers=headers).json()["items"]}
    assert texts == {"prefers green tea", "takes insulin"}
    assert client.post(f"/v1/candidates/{rejected.id}/confirm", json={}, headers=headers).status_code == 409


def test_list_pagination_and_query(client) -> None:
    alice = auth()
    ids = [client.post("/v1/memories", json=remember_body(f"fact number {i} about sailing"), headers=alice).json()["id"]
           for i in range(5)]
    client.post("/v1/memories", json=remember_body("unrelated cooking fact"), headers=alice)
    seen, cursor = [], None
    while True:
        params = {"limit": 2, "q": "sailing"}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/memories", params=params, headers=alice).json()
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    assert len(client.get("/v1/memories", headers=alice).json()["items"]) == 6


def test_concurrent_writes_are_200_or_409_never_500(engram, client) -> None:
    import threading

    alice = auth()
    memory_id = client.post("/v1/memories", json=remember_body("I take the 8:05 train"), headers=alice).json()["id"]
    statuses: list[int] = []

    def act(i: int) -> None:
        if i == 5:
            r = client.post(f"/v1/memories/{memory_id}/forget", headers=alice)
        else:
            r = client.post(f"/v1/memories/{memory_id}/correct", json={"text": f"I take the train number {i}"},
                            headers=alice)
        statuses.append(r.status_code)

    threads = [threading.Thread(target=act, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(statuses) <= {200, 202, 409} and 202 in statuses
    got = client.get(f"/v1/memories/{memory_id}", headers=alice).json()
    assert got["status"] == "forgotten" and got["text"] is None
    assert all(e["text"] is None for e in client.get(f"/v1/memories/{memory_id}/history", headers=alice).json()["events"])


def test_a_correction_is_its_own_evidence_and_the_export_titles_the_current_answer(client) -> None:
    alice = auth()
    m = client.post("/v1/memories", json=remember_body("I live in Berlin"), headers=alice).json()
    said = {"kind": "chat", "id": "chat-9", "message_id": "m-77"}
    r = client.post(f"/v1/memories/{m['id']}/correct", json={"text": "I live in Munich", "source": said},
                    headers=alice)
    assert r.status_code == 200 and r.json()["evidence"][0]["quote"] == "I live in Munich"
    item = client.post("/v1/recall", json={"query": "live"}, headers=alice).json()["items"][0]
    assert item["text"] == "I live in Munich"
    assert [(e["quote"], e["source"]) for e in item["evidence"]] == [("I live in Munich", said)]
    history = client.get(f"/v1/memories/{m['id']}/history", headers=alice).json()["events"]
    assert [e["evidence"][0]["quote"] for e in history] == ["I live in Berlin", "I live in Munich"]

    # without a source, the correction is its own source, named after the actor (API.md), whatever the entry
    r = client.post(f"/v1/memories/{m['id']}/correct", json={"text": "I live in Hamburg"},
                    headers=auth(entry="web"))
    assert r.json()["evidence"][0]["source"] == {"kind": "correction", "id": "alice", "message_id": None}
    item = client.post("/v1/recall", json={"query": "Hamburg"}, headers=alice).json()["items"][0]
    assert item["evidence"][0]["source"] == {"kind": "correction", "id": "alice", "message_id": None}

    # a correction that only takes over next year: recall and the export's title answer with today's
    future = (datetime.now(UTC) + timedelta(days=365)).isoformat()
    assert client.post(f"/v1/memories/{m['id']}/correct", json={"text": "I will live in Vienna",
                                                                "valid_from": future},
                       headers=alice).status_code == 200
    now = client.post("/v1/recall", json={"query": "live"}, headers=alice).json()["items"][0]
    assert now["text"] == "I live in Hamburg" and now["evidence"][0]["quote"] == "I live in Hamburg"
    exported = client.get("/v1/export", headers=alice).json()["memories"][0]
    assert exported["answer"]["text"] == "I live in Hamburg" and exported["text"] == "I will live in Vienna"
    markdown = client.get("/v1/export", params={"format": "markdown"}, headers=alice).text
    assert "## I live in Hamburg" in markdown and "## I will live in Vienna" not in markdown
