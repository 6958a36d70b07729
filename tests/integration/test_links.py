"""Links: memories mentioned together in one message, through the HTTP API on a real PostgreSQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.support.helpers import auth, put_directory, remember_body

TWO_STATEMENTS = "Thanks! I prefer weekly reports as short bullet points. I always put risks first. What's next?"


def message(message_id: str, chat: str = "chat-42", kind: str = "chat") -> dict[str, Any]:
    return {"kind": kind, "id": chat, "message_id": message_id}


def remember(client: Any, text: str, source: dict[str, Any], **who: Any) -> str:
    r = client.post("/v1/memories", json=remember_body(text, source=source), headers=auth(**who))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def links(client: Any, memory_id: str, **who: Any) -> list[dict[str, Any]]:
    """The memory's links, checked to be the same in both places the API shows them."""
    r = client.get(f"/v1/memories/{memory_id}", headers=auth(**who))
    assert r.status_code == 200, r.text
    listed = client.get(f"/v1/memories/{memory_id}/links", headers=auth(**who))
    assert listed.status_code == 200, listed.text
    assert listed.json() == {"items": r.json()["links"]}
    return list(r.json()["links"])


def linked(client: Any, memory_id: str, **who: Any) -> dict[str, tuple[str, str | None]]:
    return {link["memory_id"]: (link["status"], link["reason"]) for link in links(client, memory_id, **who)}


def citations(engram: Any, memory_id: str) -> list[dict[str, Any]]:
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT * FROM engram_link_citations WHERE memory_id = %s ORDER BY version", (memory_id,))
        return list(curs.fetchall())


def test_statements_of_one_message_are_linked_both_ways(engram, client) -> None:
    receipt = {"receipt_id": "r-1", "author": "user", "text": TWO_STATEMENTS,
               "occurred_at": "2026-11-02T09:00:00+08:00", "source": message("m-r-1")}
    assert client.post("/v1/receipts", json=receipt, headers=auth()).status_code == 202
    assert engram.learning.work() == 1
    candidates = client.get("/v1/candidates", headers=auth()).json()["items"]
    assert len(candidates) == 2
    first, second = (c["id"] for c in candidates)
    # a memory the person asked to remember from the same message is co-mentioned with both
    stated = remember(client, "I want the summary on top", message("m-r-1"))
    unrelated = remember(client, "I drink oolong tea every morning", message("m-other"))
    same_id_elsewhere = remember(client, "I like short meetings", message("m-r-1", chat="chat-7"))

    assert linked(client, first) == {second: ("active", None), stated: ("active", None)}
    assert linked(client, second) == {first: ("active", None), stated: ("active", None)}
    assert linked(client, stated) == {first: ("active", None), second: ("active", None)}
    assert links(client, unrelated) == [] and links(client, same_id_elsewhere) == []

    link = next(x for x in links(client, first) if x["memory_id"] == second)
    assert link["kind"] == "co_mention" and link["invalidated_at"] is None
    assert datetime.fromisoformat(link["since"]) <= datetime.fromisoformat(
        client.get(f"/v1/memories/{stated}", headers=auth()).json()["created_at"])
    # confirming a candidate keeps its links
    assert client.post(f"/v1/candidates/{first}/confirm", json={}, headers=auth()).status_code == 200
    assert linked(client, first)[second] == ("active", None)

    # only blinded message keys are stored: no message id, chat id or text in the view
    rows = citations(engram, first)
    assert len(rows) == 1 and rows[0]["message_keys"][0].startswith("m")
    assert all(needle not in str(rows) for needle in ("m-r-1", "chat-42", "weekly"))


def test_a_correction_from_another_message_invalidates_on_both_sides(engram, client) -> None:
    a = remember(client, "The weekly meeting is on Friday", message("m-1"))
    b = remember(client, "Weekly reports are short bullet points", message("m-1"))
    c = remember(client, "The retro is on Monday", message("m-2"))
    d = remember(client, "I bring the agenda", message("m-1"))
    assert linked(client, a) == {b: ("active", None), d: ("active", None)}

    # the same message again: the links go on
    r = client.post(f"/v1/memories/{d}/correct", json={"text": "I bring the agenda, printed", "source": message("m-1")},
                    headers=auth())
    assert r.status_code == 200
    assert linked(client, d) == {a: ("active", None), b: ("active", None)}

    r = client.post(f"/v1/memories/{a}/correct",
                    json={"text": "The weekly meeting moves to Monday", "source": message("m-2")}, headers=auth())
    assert r.status_code == 200, r.text
    corrected_at = datetime.fromisoformat(r.json()["updated_at"])
    assert linked(client, a) == {b: ("invalidated", "corrected"), d: ("invalidated", "corrected"),
                                 c: ("active", None)}
    assert linked(client, b) == {a: ("invalidated", "corrected"), d: ("active", None)}
    assert linked(client, c) == {a: ("active", None)}
    broken = next(x for x in links(client, b) if x["memory_id"] == a)
    assert broken["status"] == "invalidated" and datetime.fromisoformat(broken["invalidated_at"]) == corrected_at
    assert datetime.fromisoformat(broken["since"]) < corrected_at
    new = next(x for x in links(client, c) if x["memory_id"] == a)
    assert datetime.fromisoformat(new["since"]) == corrected_at

    # a correction naming no message (its evidence is the correction itself) ends the rest
    assert client.post(f"/v1/memories/{d}/correct", json={"text": "Someone else brings the agenda"},
                       headers=auth()).status_code == 200
    assert linked(client, b) == {a: ("invalidated", "corrected"), d: ("invalidated", "corrected")}


def test_forget_invalidates_and_keeps_no_message_key(engram, client) -> None:
    a = remember(client, "I prefer window seats, zebrafinch-7781", message("m-1"))
    b = remember(client, "I prefer aisle seats", message("m-1"))
    c = remember(client, "I travel light", message("m-1"))
    assert linked(client, b) == {a: ("active", None), c: ("active", None)}
    assert citations(engram, a)[0]["message_keys"]

    assert client.post(f"/v1/memories/{a}/forget", headers=auth()).status_code == 202
    assert linked(client, b) == {a: ("invalidated", "forgotten"), c: ("active", None)}
    assert linked(client, c) == {a: ("invalidated", "forgotten"), b: ("active", None)}
    forgotten = client.get(f"/v1/memories/{a}", headers=auth()).json()
    assert forgotten["status"] == "forgotten"
    assert {x["memory_id"]: x["reason"] for x in forgotten["links"]} == {b: "forgotten", c: "forgotten"}
    gone = next(x for x in forgotten["links"] if x["memory_id"] == b)
    assert gone["invalidated_at"] is not None

    # its link rows hold ids, times and reasons; its blinded message key is gone
    assert citations(engram, a) == []
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT * FROM engram_links_kept WHERE memory_id = %s", (a,))
        kept = list(curs.fetchall())
    assert {str(r["other_id"]) for r in kept} == {b, c}
    assert all(set(r) == {"memory_id", "version", "other_id", "other_version", "since", "invalidated_at", "reason"}
               for r in kept)


def test_rejected_and_expired_candidates_break_their_links(engram, client) -> None:
    receipt = {"receipt_id": "r-1", "author": "user", "text": TWO_STATEMENTS, "source": message("m-r-1")}
    client.post("/v1/receipts", json=receipt, headers=auth())
    engram.learning.work()
    first, second = (c["id"] for c in client.get("/v1/candidates", headers=auth()).json()["items"])
    assert client.post(f"/v1/candidates/{first}/reject", headers=auth()).status_code == 200
    assert linked(client, second) == {first: ("invalidated", "rejected")}
    assert citations(engram, first) == []


def test_other_people_and_companies_never_appear(engram, client) -> None:
    same = message("m-1")
    mine = remember(client, "I prefer tea", same)
    also_mine = remember(client, "I prefer green tea", same)
    bobs = remember(client, "I prefer coffee", same, user="bob")
    bobs_other = remember(client, "I prefer espresso", same, user="bob")
    elsewhere = remember(client, "I prefer water", same, company="globex")
    assert linked(client, mine) == {also_mine: ("active", None)}
    assert linked(client, bobs, user="bob") == {bobs_other: ("active", None)}
    assert links(client, elsewhere, company="globex") == []
    # nobody reads another person's memory, nor its links
    assert client.get(f"/v1/memories/{mine}/links", headers=auth(user="bob")).status_code == 404
    # the blinded key differs per person, though the message is the same
    assert citations(engram, mine)[0]["message_keys"] != citations(engram, bobs)[0]["message_keys"]


def test_a_restricted_memory_the_caller_cannot_use_is_not_listed(engram, client) -> None:
    put_directory(client, {"teams": {"t-risk": {"members": ["alice"]}},
                           "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
                           "bots": {"b-helper": {}, "b-risk": {"teams": ["t-risk"], "sources": ["s-jira"]}}})
    ticket = message("m-9", chat="s-jira", kind="jira")
    general = remember(client, "I prefer risks first in every report", ticket)
    r = client.post("/v1/memories", headers=auth(), json=remember_body(
        "The Q3 risk register is in the shared drive", source=ticket, visibility="restricted", team="t-risk"))
    assert r.status_code == 201, r.text
    restricted = r.json()["id"]

    assert linked(client, general) == {restricted: ("active", None)}
    assert linked(client, general, role="bot", bot="b-risk") == {restricted: ("active", None)}
    helper = client.get(f"/v1/memories/{general}", headers=auth(role="bot", bot="b-helper"))
    assert helper.status_code == 200 and helper.json()["links"] == []
    assert restricted not in client.get(f"/v1/memories/{general}/links",
                                        headers=auth(role="bot", bot="b-helper")).text
    # out of the team, the person no longer sees it either
    put_directory(client, {"teams": {"t-risk": {"members": []}},
                           "sources": {"s-jira": {"team": "t-risk", "members": []}}})
    assert links(client, general) == []


def test_rebuilding_the_view_reproduces_the_links(engram, client) -> None:
    a = remember(client, "The weekly meeting is on Friday", message("m-1"))
    b = remember(client, "Weekly reports are short bullet points", message("m-1"))
    c = remember(client, "Risks come first", message("m-1"))
    d = remember(client, "The retro is on Monday", message("m-2"))
    client.post(f"/v1/memories/{a}/correct", json={"text": "Monday now", "source": message("m-2")}, headers=auth())
    client.post(f"/v1/memories/{c}/forget", headers=auth())
    every = (a, b, c, d)

    def snapshot() -> tuple[dict[str, list[dict[str, Any]]], list[list[tuple[Any, ...]]]]:
        tables = []
        with engram.store.datastore.transaction() as curs:
            for table in ("engram_link_memories", "engram_link_citations", "engram_links_kept"):
                curs.execute(f"SELECT * FROM {table} ORDER BY 1, 2")
                tables.append([tuple(r.values()) for r in curs.fetchall()])
        return {m: links(client, m) for m in every}, tables

    before = snapshot()
    assert {x["memory_id"]: x["reason"] for x in before[0][b]} == {a: "corrected", c: "forgotten"}
    assert {x["memory_id"]: x["status"] for x in before[0][d]} == {a: "active"}
    engram.operations.rebuild("links")
    assert snapshot() == before
    # replaying every event again over the built view changes nothing either
    projection = engram.projections["links"]
    from eventsourcing.persistence import Tracking

    notes = engram.store.recorder.select_notifications(start=0, limit=1000)
    with engram.store.datastore.transaction(commit=True) as curs:
        for note in notes:
            projection.apply(curs, engram.operations.decode(note), Tracking("engram", note.id))
    assert snapshot() == before


def test_the_order_memories_are_applied_in_does_not_change_their_links(engram, client) -> None:
    """Distributed mode applies each memory's events in order, but memories on different partitions in
    any order: applied one memory after the other, the last created first, the links are the same."""
    from eventsourcing.persistence import Tracking

    a = remember(client, "The weekly meeting is on Friday", message("m-1"))
    b = remember(client, "Weekly reports are short bullet points", message("m-1"))
    c = remember(client, "The retro is on Monday", message("m-2"))
    client.post(f"/v1/memories/{a}/correct", json={"text": "Monday now", "source": message("m-2")}, headers=auth())
    client.post(f"/v1/memories/{b}/correct", json={"text": "Reports are one page"}, headers=auth())
    serial = {m: links(client, m) for m in (a, b, c)}
    assert {x["memory_id"]: x["reason"] for x in serial[b]} == {a: "corrected"}
    assert {x["memory_id"]: x["status"] for x in serial[c]} == {a: "active"}

    notes = engram.store.recorder.select_notifications(start=0, limit=1000)
    events = [(engram.operations.decode(n), n.id) for n in notes]
    first_seen = {e.originator_id: i for i, (e, _) in reversed(list(enumerate(events)))}
    by_memory = sorted(events, key=lambda item: (-first_seen[item[0].originator_id], item[1]))
    projection = engram.projections["links"]
    with engram.store.datastore.transaction(commit=True) as curs:
        projection.view.clear(curs)
        projection.begin()
        for event, position in by_memory:  # applied in this order when the batch is flushed
            projection.apply(curs, event, Tracking("engram", position))
        projection.flush(curs)
        projection.view.set_position(curs, notes[-1].id)
    assert {m: links(client, m) for m in (a, b, c)} == serial
