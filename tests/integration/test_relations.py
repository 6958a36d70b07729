"""Duplicates folded and updates offered as corrections (API.md "Review" and "Capture", ADR 0041), through
the HTTP API on a real PostgreSQL with the rule extractor: the same thing said twice is one candidate with
both quotes; a remember of what a confirmed memory says extends that memory; a candidate that changes a
confirmed memory carries `relation: update`, and confirming it corrects that memory with valid time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engram.domain.clock import FixedClock
from engram.domain.receipt import Receipt, receipt_uuid

from tests.support.helpers import SECRET, auth, remember_body

ALICE = auth()
NOW = datetime.now(UTC)


def say(client: Any, engram: Any, rid: str, text: str, at: datetime = NOW, chat: str = "chat-1") -> dict[str, Any]:
    r = client.post("/v1/receipts", headers=ALICE, json={
        "receipt_id": rid, "author": "user", "text": text, "occurred_at": at.isoformat(),
        "source": {"kind": "chat", "id": chat, "message_id": rid}})
    assert r.status_code == 202, r.text
    while engram.learning.work():
        pass
    got = client.get(f"/v1/receipts/{rid}", headers=ALICE).json()
    assert got["state"] == "done", got
    return got


def candidates(client: Any) -> list[dict[str, Any]]:
    return client.get("/v1/candidates", headers=ALICE).json()["items"]


def remember(client: Any, text: str, message: str, at: datetime | None = None) -> Any:
    body = remember_body(text, source={"kind": "chat", "id": "chat-1", "message_id": message})
    if at is not None:
        body["occurred_at"] = at.isoformat()
    return client.post("/v1/memories", headers=ALICE, json=body)


def recall(client: Any, query: str, as_of: datetime | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": query}
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    return client.post("/v1/recall", headers=ALICE, json=body).json()["items"]


def test_the_same_thing_said_twice_is_one_candidate_with_both_quotes(engram, client) -> None:
    first = say(client, engram, "m-1", "I live in Porto.")
    again = say(client, engram, "m-2", "As I said before, I live in Porto.", chat="chat-2")
    assert first["candidate_ids"] == again["candidate_ids"] and len(first["candidate_ids"]) == 1
    [candidate] = candidates(client)
    assert [e["source"]["message_id"] for e in candidate["evidence"]] == ["m-1", "m-2"]
    assert [e["quote"] for e in candidate["evidence"]] == ["I live in Porto.", "I live in Porto."]
    assert candidate["relation"] is None and candidate["context"] == "I live in Porto."
    say(client, engram, "m-3", "I live in Porto and I like it.")  # more than the same thing: its own candidate
    assert len(candidates(client)) >= 2

    # rejecting it clears the text of every receipt its quotes came from, at once
    assert client.post(f"/v1/candidates/{candidate['id']}/reject", headers=ALICE).status_code == 200
    for rid in ("m-1", "m-2"):
        assert engram.ledger.get(receipt_uuid("acme", "alice", rid), Receipt).cleared


def test_a_remember_of_what_a_confirmed_memory_says_extends_it(engram, client) -> None:
    made = remember(client, "I prefer tea in the morning", "m-1")
    assert made.status_code == 201
    again = remember(client, "As I said, I prefer tea in the morning.", "m-2")
    assert again.status_code == 200, again.text
    memory = again.json()
    assert memory["id"] == made.json()["id"] and memory["revision"] == 1
    assert [e["source"]["message_id"] for e in memory["evidence"]] == ["m-1", "m-2"]
    assert len(client.get("/v1/memories", headers=ALICE).json()["items"]) == 1
    [item] = recall(client, "tea in the morning")
    assert len(item["evidence"]) == 2 and item["text"] == "I prefer tea in the morning"
    # another preference on the same topic is a memory of its own
    assert remember(client, "I prefer coffee in the afternoon", "m-3").status_code == 201


def test_learning_finds_a_duplicate_said_in_other_words_by_meaning_but_never_a_changed_value(engram, client) -> None:
    """The packaged model's vectors: what the words miss ("the blue Civic, a Honda"), when the same names
    and numbers are said; the same sentence with another value is not a duplicate however near."""
    car = remember(client, "I drive a blue Honda Civic", "m-1").json()
    daughter = remember(client, "我女儿叫朵朵", "m-2").json()
    assert engram.embedding.work() == 2
    say(client, engram, "m-3", "My car is the blue Civic, a Honda.")
    say(client, engram, "m-4", "我闺女名字叫朵朵。")
    say(client, engram, "m-5", "我闺女名字叫豆豆。")
    found = {c["text"]: c["relation"] for c in candidates(client)}
    assert found["My car is the blue Civic, a Honda"] == {"kind": "duplicate", "memory_id": car["id"]}
    assert found["我闺女名字叫朵朵"] == {"kind": "duplicate", "memory_id": daughter["id"]}
    assert (found["我闺女名字叫豆豆"] or {}).get("kind") != "duplicate"


def test_without_a_model_the_packaged_probe_offers_an_update_the_rules_cannot_see(settings, database) -> None:
    """`ENGRAM_RELATION_PROBE=on`: no rule knows that a climbing hall is a gym; the probe over both
    statements' vectors (ADR 0043) offers the change as a correction of the memory it changes."""
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    engram = Engram.open(settings.model_copy(update={"relation_probe": "on"}), database=database, background=False)
    client = TestClient(create_app(engram, SECRET))
    try:
        _the_gym_changes(engram, client)
    finally:
        client.close()
        engram.close()


def _the_gym_changes(engram: Any, client: Any) -> None:
    gym = remember(client, "My gym is the Fitness First on Main Street", "m-1").json()
    remember(client, "I play tennis on Sundays", "m-2")
    assert engram.embedding.work() == 2
    say(client, engram, "m-3", "I switched gyms, I go to the climbing hall in Neukölln now.")
    found = {c["text"]: c["relation"] for c in candidates(client)}
    assert found["I go to the climbing hall in Neukölln now"] == {"kind": "update", "memory_id": gym["id"]}


def test_with_a_model_configured_it_judges_what_the_rules_and_vectors_leave_within_the_budget(
        settings, database, llm) -> None:
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    asked: list[tuple[str, list[str]]] = []

    def judge(new: str, olds: list[str]) -> list[dict[str, Any]]:
        asked.append((new, olds))
        return [{"index": i, "kind": "update"} for i, old in enumerate(olds, 1) if "Berlin" in old]

    llm.relations = judge
    moved, again = "Home is Lisbon now.", "Home is Porto now."
    llm.proposals[moved] = [{"text": "Home is Lisbon now", "quote": "Home is Lisbon now."}]
    llm.proposals[again] = [{"text": "Home is Porto now", "quote": "Home is Porto now."}]
    # one budget day throughout, whenever the run crosses midnight UTC (it once did, and counted 0 calls)
    system = Engram.open(settings.replace(llm_base_url=llm.url, llm_model="test-model", daily_calls=3,
                                         person_daily_calls=3),
                         database=database, background=False, clock=FixedClock(NOW))
    try:
        client = TestClient(create_app(system, SECRET))
        berlin = remember(client, "My flat is in Berlin", "m-1").json()
        assert system.embedding is not None and system.embedding.work() == 1
        say(client, system, "m-2", moved)
        [candidate] = candidates(client)
        assert candidate["relation"] == {"kind": "update", "memory_id": berlin["id"]}
        assert asked == [("Home is Lisbon now", ["My flat is in Berlin"])]  # only the person's own, by text
        assert system.learning.budget.today("acme", NOW.date())["calls"] == 2  # extraction and the judge
        say(client, system, "m-3", again)  # the third call extracts; the judge finds the budget spent
        assert len(asked) == 1
        assert {c["text"]: c["relation"] for c in candidates(client)}["Home is Porto now"] is None
    finally:
        system.close()


def test_a_candidate_repeating_a_confirmed_memory_confirms_into_it(engram, client) -> None:
    made = remember(client, "My manager is Priya", "m-1").json()
    say(client, engram, "m-2", "My manager is Priya.")
    [candidate] = candidates(client)
    assert candidate["relation"] == {"kind": "duplicate", "memory_id": made["id"]}
    r = client.post(f"/v1/candidates/{candidate['id']}/confirm", headers=ALICE, json={})
    assert r.status_code == 200, r.text
    assert r.json()["id"] == made["id"] and r.json()["revision"] == 1 and len(r.json()["evidence"]) == 2
    assert candidates(client) == [] and len(client.get("/v1/memories", headers=ALICE).json()["items"]) == 1
    assert engram.ledger.get(receipt_uuid("acme", "alice", "m-2"), Receipt).cleared  # its quote lives on there


def test_an_update_confirmed_corrects_the_memory_with_valid_time(engram, client) -> None:
    berlin = remember(client, "I live in Berlin", "m-1", at=NOW - timedelta(days=400)).json()
    say(client, engram, "m-2", "I moved to Lisbon last month.")
    [candidate] = candidates(client)
    assert candidate["relation"] == {"kind": "update", "memory_id": berlin["id"]}

    r = client.post(f"/v1/candidates/{candidate['id']}/confirm", headers=ALICE, json={})
    assert r.status_code == 200, r.text
    memory = r.json()
    first_of_last_month = (NOW.replace(day=1) - timedelta(days=1)).replace(day=1).date()
    assert memory["id"] == berlin["id"] and memory["revision"] == 2
    assert memory["text"] == "I moved to Lisbon last month"
    assert datetime.fromisoformat(memory["valid_from"]).date() == first_of_last_month
    assert [e["source"]["message_id"] for e in memory["evidence"]] == ["m-2"]
    assert recall(client, "Lisbon")[0]["text"] == "I moved to Lisbon last month"
    assert recall(client, "Berlin") == []
    before = recall(client, "Berlin", as_of=NOW - timedelta(days=100))
    assert [i["text"] for i in before] == ["I live in Berlin"]
    history = client.get(f"/v1/memories/{berlin['id']}/history", headers=ALICE).json()["events"]
    assert [e["revision"] for e in history][-1] == 2
    assert candidates(client) == [] and len(client.get("/v1/memories", headers=ALICE).json()["items"]) == 1


def test_rejecting_an_update_leaves_the_memory_as_it_was(engram, client) -> None:
    made = remember(client, "我住在杭州", "m-1").json()
    say(client, engram, "m-2", "我上个月搬到了宁波。")
    [candidate] = candidates(client)
    assert candidate["relation"] == {"kind": "update", "memory_id": made["id"]}
    assert client.post(f"/v1/candidates/{candidate['id']}/reject", headers=ALICE).status_code == 200
    memory = client.get(f"/v1/memories/{made['id']}", headers=ALICE).json()
    assert memory["text"] == "我住在杭州" and memory["revision"] == 1 and len(memory["evidence"]) == 1


def test_an_update_of_a_memory_forgotten_since_confirms_as_its_own(engram, client) -> None:
    made = remember(client, "My manager is Priya", "m-1").json()
    say(client, engram, "m-2", "My manager is Tom.")
    [candidate] = candidates(client)
    assert candidate["relation"] == {"kind": "update", "memory_id": made["id"]}
    assert client.post(f"/v1/memories/{made['id']}/forget", headers=ALICE).status_code == 202
    r = client.post(f"/v1/candidates/{candidate['id']}/confirm", headers=ALICE, json={})
    assert r.status_code == 200 and r.json()["id"] == candidate["id"] and r.json()["text"] == "My manager is Tom"


def test_another_persons_memory_is_never_related(engram, client) -> None:
    bob = auth(user="bob")
    body = remember_body("I live in Berlin", source={"kind": "chat", "id": "chat-9", "message_id": "b-1"})
    assert client.post("/v1/memories", headers=bob, json=body).status_code == 201
    say(client, engram, "m-1", "I moved to Lisbon last month.")
    [candidate] = candidates(client)
    assert candidate["relation"] is None
    assert remember(client, "I live in Berlin", "m-2").status_code == 201


def test_a_models_fragment_becomes_a_candidate_that_stands_on_its_own(settings, database, llm) -> None:
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    message = "Luis is my landlord and he only answers texts."
    llm.proposals[message] = [{"text": "he only answers texts", "quote": "he only answers texts"}]
    system = Engram.open(settings.replace(llm_base_url=llm.url, llm_model="test-model"), database=database,
                         background=False)
    try:
        client = TestClient(create_app(system, SECRET))
        say(client, system, "m-1", message)
        [candidate] = candidates(client)
        assert candidate["text"] == "Luis is my landlord and he only answers texts"
        assert candidate["evidence"][0]["quote"] == "he only answers texts"
        assert candidate["context"] == message
    finally:
        system.close()


def test_a_models_proposal_that_leans_on_an_earlier_message_or_passes_on_a_rumour_is_not_a_candidate(
        settings, database, llm) -> None:
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    message = "She's bringing her son. Apparently Rui is moving to Coimbra. I live in Campo de Ourique."
    llm.proposals[message] = [{"text": "She's bringing her son", "quote": "She's bringing her son"},
                              {"text": "Apparently Rui is moving to Coimbra", "quote": "Apparently Rui is moving to Coimbra"},
                              {"text": "Lives in Campo de Ourique", "quote": "I live in Campo de Ourique"}]
    system = Engram.open(settings.replace(llm_base_url=llm.url, llm_model="test-model"), database=database,
                         background=False)
    try:
        client = TestClient(create_app(system, SECRET))
        say(client, system, "m-1", message)
        assert [c["text"] for c in candidates(client)] == ["Lives in Campo de Ourique"]
    finally:
        system.close()


def test_the_page_shows_the_sentence_with_the_quote_marked_and_what_confirming_does(engram, client) -> None:
    berlin = remember(client, "I live in Berlin", "m-1").json()
    say(client, engram, "m-2", "Big news. I moved to Lisbon last month.")
    page = client.get("/memory", headers=ALICE)
    assert page.status_code == 200
    assert "<q>Big news. <mark>I moved to Lisbon last month.</mark></q>" in page.text
    assert f"/memory/m/{berlin['id']}" in page.text and "This changes" in page.text


def test_the_page_confirms_or_rejects_many_at_once_but_never_a_sensitive_one_in_bulk(engram, client) -> None:
    say(client, engram, "m-1", "I prefer aisle seats. I hate cilantro.")
    say(client, engram, "m-2", "My blood pressure medication is lisinopril.", chat="chat-2")
    found = {c["text"]: c for c in candidates(client)}
    assert len(found) == 3 and found["My blood pressure medication is lisinopril"]["review"] == "sensitive"
    page = client.get("/memory", headers=ALICE).text
    assert page.count('class="group"') == 2  # one heading per conversation
    every = [c["id"] for c in found.values()]
    r = client.post("/memory/candidates/bulk", data={"decision": "confirm", "ids": every}, headers=ALICE,
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    assert [c["text"] for c in candidates(client)] == ["My blood pressure medication is lisinopril"]
    assert {m["text"] for m in client.get("/v1/memories", headers=ALICE).json()["items"]} == {
        "I prefer aisle seats", "I hate cilantro"}
    r = client.post("/memory/candidates/bulk", data={"decision": "reject", "ids": every + ["no-such-id"]},
                    headers=ALICE, follow_redirects=False)
    assert r.status_code == 303 and candidates(client) == []
    too_many = client.post("/memory/candidates/bulk", data={"decision": "reject", "ids": ["x"] * 201},
                           headers=ALICE, follow_redirects=False)
    assert too_many.status_code == 422
