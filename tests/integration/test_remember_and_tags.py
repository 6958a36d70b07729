"""Remembering the same text from the same message twice stores it once; tags are sealed, filter
recall and lists, and go with a forget (API.md "Capture")."""

from __future__ import annotations

import threading
from typing import Any

from tests.support.helpers import auth, is_problem, pg_dump, remember_body

SOURCE = {"kind": "chat", "id": "chat-7", "message_id": "m-41"}


def remember(client: Any, text: str, source: dict[str, Any] = SOURCE, **extra: Any) -> Any:
    return client.post("/v1/memories", headers=auth(), json=remember_body(text, source=source, **extra))


def test_the_same_text_from_the_same_message_is_stored_once(engram, client) -> None:
    first = remember(client, "I take the 7:42 train to work")
    assert first.status_code == 201, first.text
    again = remember(client, "I take the 7:42 train to work")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert "existing" not in again.json()  # an internal mark, never answered
    # the same text from another message: the same memory, its evidence extended (API.md "Capture")
    other = remember(client, "I take the 7:42 train to work", {**SOURCE, "message_id": "m-42"})
    assert other.status_code == 200 and other.json()["id"] == first.json()["id"]
    assert [e["source"]["message_id"] for e in other.json()["evidence"]] == [SOURCE["message_id"], "m-42"]
    # another text or another person: new memories
    assert remember(client, "I take the 7:45 train to work").status_code == 201
    bob = client.post("/v1/memories", headers=auth(user="bob"),
                      json=remember_body("I take the 7:42 train to work", source=SOURCE))
    assert bob.status_code == 201 and bob.json()["id"] != first.json()["id"]
    listed = client.get("/v1/memories", headers=auth()).json()["items"]
    assert len(listed) == 2
    # forgotten, then sent again (a late retry): nothing new; the answer says it is forgotten
    assert client.post(f"/v1/memories/{first.json()['id']}/forget", headers=auth()).status_code == 202
    late = remember(client, "I take the 7:42 train to work")
    assert late.status_code == 200 and late.json()["status"] == "forgotten" and late.json()["text"] is None


def test_concurrent_repeats_store_one_memory(engram, client) -> None:
    answers: list[Any] = []

    def send() -> None:
        answers.append(remember(client, "The team offsite is in Porto"))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in answers).count(201) >= 1
    assert all(r.status_code in (200, 201) for r in answers), [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert len(client.get("/v1/memories", headers=auth()).json()["items"]) == 1


def test_tags_are_kept_sealed_and_filter_recall_and_lists(engram, client, database) -> None:
    tea = remember(client, "Green tea after lunch, quokka-tag", tags=["drinks", "habit-zebra4471"]).json()
    coffee = remember(client, "Coffee before the standup", {**SOURCE, "message_id": "m-2"}, tags=["drinks"]).json()
    plain = remember(client, "Lunch at noon sharp", {**SOURCE, "message_id": "m-3"}).json()
    assert tea["tags"] == ["drinks", "habit-zebra4471"] and plain["tags"] == []
    assert client.get(f"/v1/memories/{tea['id']}", headers=auth()).json()["tags"] == ["drinks", "habit-zebra4471"]

    def recalled(**body: Any) -> set[str]:
        r = client.post("/v1/recall", headers=auth(), json=body)
        assert r.status_code == 200, r.text
        return {i["id"] for i in r.json()["items"]}

    assert recalled(query="lunch") == {tea["id"], plain["id"]}
    assert recalled(query="lunch", tags=["drinks"]) == {tea["id"]}
    assert recalled(query="", tags=["drinks"]) == {tea["id"], coffee["id"]}
    assert recalled(query="", tags=["DRINKS", "habit-zebra4471"]) == {tea["id"]}  # all of them, any case
    assert recalled(query="", tags=["nothing-has-this"]) == set()
    listed = client.get("/v1/memories", headers=auth(), params={"tags": ["drinks"]}).json()["items"]
    assert {m["id"] for m in listed} == {tea["id"], coffee["id"]}
    assert {tuple(m["tags"]) for m in listed} == {("drinks", "habit-zebra4471"), ("drinks",)}

    # bad tags: a clear 422, nothing stored
    before = len(client.get("/v1/memories", headers=auth()).json()["items"])
    for bad in (["x"] * 17, ["a" * 65], [""], ["bad\x00tag"], "drinks", [3]):
        r = remember(client, "Never stored", {**SOURCE, "message_id": "m-bad"}, tags=bad)
        assert r.status_code == 422, (bad, r.text)
    is_problem(client.post("/v1/recall", headers=auth(), json={"tags": ["a" * 65]}), 422, "validation_error")
    assert len(client.get("/v1/memories", headers=auth()).json()["items"]) == before

    # sealed at rest: the tag text appears nowhere in the database
    assert b"habit-zebra4471" not in pg_dump(database, "--data-only", "--inserts")
    # forgotten: its tags go with it
    assert client.post(f"/v1/memories/{tea['id']}/forget", headers=auth()).status_code == 202
    assert client.get(f"/v1/memories/{tea['id']}", headers=auth()).json()["tags"] == []
    assert recalled(query="", tags=["habit-zebra4471"]) == set()
