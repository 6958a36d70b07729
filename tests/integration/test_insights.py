"""Valid time, corrections and insights through the HTTP API, in English and in Chinese.

A person says the weekly meeting moves from Friday to next Monday, that weekly reports should be
short bullet points, and on two separate occasions that risks come first: recall answers Monday now
and Friday as of last month (with its valid_to); an insight resting on both risk statements is
proposed with both pieces of evidence, confirmed, recalled with its evidence, and stops at once
when one of them is forgotten.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.api.bootstrap import Engram
from engram.api.http import create_app
from engram.domain.clock import FixedClock

from tests.support.helpers import SECRET, auth, is_problem, put_directory, remember_body

LAST_MONTH = datetime(2026, 10, 2, 9, 0, tzinfo=UTC)   # a Friday
THIS_WEEK = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)   # the Thursday before
NEXT_MONDAY = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)

SCENARIOS = {
    "en": {
        "meeting": "Remember that the weekly meeting is on Friday.",
        "moved": "The weekly meeting moves from Friday to next Monday",
        "reports": "Please remember that weekly reports should be short bullet points.",
        "risks": ["From now on, risks come first in every report.", "Remember: risks first, always."],
        "meeting_query": "weekly meeting", "risk_query": "risks first",
        "friday": "Friday", "monday": "Monday", "insight_words": "risks first",
    },
    "zh": {
        "meeting": "记住，周会在周五。",
        "moved": "周会从周五改到下周一",
        "reports": "记住，周报要简短要点。",
        "risks": ["从现在起，汇报时风险优先。", "记住：风险优先。"],
        "meeting_query": "周会", "risk_query": "风险优先",
        "friday": "周五", "monday": "下周一", "insight_words": "风险优先",
    },
}


@pytest.fixture
def make(settings, database) -> Iterator[Any]:
    systems: list[Engram] = []

    def _make(clock: FixedClock) -> tuple[Engram, TestClient]:
        system = Engram.open(settings, database=database, clock=clock, background=False)
        systems.append(system)
        return system, TestClient(create_app(system, SECRET))

    yield _make
    for s in systems:
        s.close()


def receipt(rid: str, text: str, at: datetime) -> dict[str, Any]:
    return {"receipt_id": rid, "author": "user", "text": text, "occurred_at": at.isoformat(),
            "source": {"kind": "chat", "id": "chat-team", "message_id": "m-" + rid}, "visibility": "general",
            "team": None}


def say(system: Engram, client: TestClient, rid: str, text: str, at: datetime, **who: Any) -> str:
    """The person says something; learning proposes it; the person confirms the candidate."""
    assert client.post("/v1/receipts", json=receipt(rid, text, at), headers=auth(**who)).status_code == 202
    assert system.learning.work() == 1
    ids = client.get(f"/v1/receipts/{rid}", headers=auth(**who)).json()["candidate_ids"]
    assert len(ids) == 1, ids
    r = client.post(f"/v1/candidates/{ids[0]}/confirm", headers=auth(**who))
    assert r.status_code == 200, r.text
    return str(ids[0])


def recall(client: TestClient, query: str, as_of: datetime | None = None, **who: Any) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": query}
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    r = client.post("/v1/recall", json=body, headers=auth(**who))
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def insights(client: TestClient, status: str | None = None, **who: Any) -> list[dict[str, Any]]:
    r = client.get("/v1/insights", params={"status": status} if status else {}, headers=auth(**who))
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_meeting_reports_and_risks_first(make, lang: str) -> None:
    s = SCENARIOS[lang]
    clock = FixedClock(LAST_MONTH)
    system, client = make(clock)
    assert system.insights is not None

    meeting = say(system, client, "meeting", s["meeting"], LAST_MONTH)
    clock.advance(days=7)
    reports = say(system, client, "reports", s["reports"], clock.now())
    first_risk = say(system, client, "risk-1", s["risks"][0], clock.now())
    assert system.insights.propose_due() == 0  # one risk statement is not a pattern
    assert insights(client) == []

    clock.advance(days=20)
    second_risk = say(system, client, "risk-2", s["risks"][1], clock.now())

    # This week the person says the meeting moves to next Monday: a correction with its own evidence.
    clock.advance(days=THIS_WEEK.toordinal() - clock.now().toordinal())
    r = client.post(f"/v1/memories/{meeting}/correct", headers=auth(), json={
        "text": s["moved"], "valid_from": NEXT_MONDAY.isoformat(), "reason": "moved",
        "source": {"kind": "chat", "id": "chat-team", "message_id": "m-moved"}})
    assert r.status_code == 200, r.text

    # The proposers find the repeated instruction, and only it.
    assert system.insights.propose_due() == 1
    proposed = insights(client, "proposed")
    assert len(proposed) == 1
    insight = proposed[0]
    assert s["insight_words"] in insight["text"] and insight["proposer"] == "local"
    assert sorted(insight["evidence_memory_ids"]) == sorted([first_risk, second_risk])
    assert reports not in insight["evidence_memory_ids"] and meeting not in insight["evidence_memory_ids"]
    quotes = {e["memory_id"]: e["quote"] for e in insight["evidence"]}
    assert quotes == {first_risk: s["risks"][0], second_risk: s["risks"][1]}
    # a proposed insight is not recalled
    assert all(i["kind"] == "memory" for i in recall(client, s["risk_query"]))
    assert system.insights.propose_due() == 0  # nothing changed: nothing proposed twice

    r = client.post(f"/v1/insights/{insight['id']}/confirm", headers=auth())
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "confirmed"
    assert [i["id"] for i in insights(client, "confirmed")] == [insight["id"]]
    exported = client.get("/v1/export", headers=auth()).json()["insights"]
    assert [(i["id"], i["status"], sorted(i["evidence_memory_ids"])) for i in exported] == [
        (insight["id"], "confirmed", sorted([first_risk, second_risk]))]
    assert insight["text"] in client.get("/v1/export", params={"format": "markdown"}, headers=auth()).text

    # Next Monday: recall answers Monday; as of last month it answers Friday, valid until Monday.
    clock.advance(days=NEXT_MONDAY.toordinal() - clock.now().toordinal(), hours=12)
    now_items = [i for i in recall(client, s["meeting_query"]) if i["id"] == meeting]
    assert len(now_items) == 1 and s["monday"] in now_items[0]["text"] and now_items[0]["revision"] == 2
    assert now_items[0]["evidence"][0]["source"]["message_id"] == "m-moved"
    then = [i for i in recall(client, s["meeting_query"], as_of=datetime(2026, 10, 15, tzinfo=UTC))
            if i["id"] == meeting]
    assert len(then) == 1 and s["friday"] in then[0]["text"] and s["monday"] not in then[0]["text"]
    assert datetime.fromisoformat(then[0]["valid_to"]) == NEXT_MONDAY
    assert then[0]["evidence"][0]["quote"] == s["meeting"]

    # The confirmed insight is recalled with both pieces of evidence, by the person and by their bot.
    put_directory(client, {"bots": {"b-helper": {}}})
    for who in ({}, {"role": "bot", "bot": "b-helper", "entry": "channel"}):
        found = [i for i in recall(client, s["risk_query"], **who) if i["kind"] == "insight"]
        assert [i["id"] for i in found] == [insight["id"]], who
        assert {e["quote"] for e in found[0]["evidence"]} == set(s["risks"])
        assert sorted(found[0]["evidence_memory_ids"]) == sorted([first_risk, second_risk])

    # Forgetting one piece of evidence stops the insight at once, before any background work.
    assert client.post(f"/v1/memories/{first_risk}/forget", headers=auth()).status_code == 202
    assert not [i for i in recall(client, s["risk_query"]) if i["kind"] == "insight"]
    after = insights(client)
    assert [(i["id"], i["status"], i["reason"], i["text"]) for i in after] == [
        (insight["id"], "invalidated", "forgotten", None)]
    assert [e["memory_id"] for e in after[0]["evidence"]] == [second_risk]  # the forgotten quote is gone
    assert insights(client, "confirmed") == []
    is_problem(client.post(f"/v1/insights/{insight['id']}/confirm", headers=auth()), 409, "insight_invalidated")

    # The background records it for good and destroys the insight's key: its text came from forgotten words.
    admin = auth(user="root", role="admin")
    assert client.get("/v1/admin/status", headers=admin).json()["backlogs"]["insights"] == {
        "people_to_propose": 0, "invalidations_to_record": 1}
    assert 'engram_insight_backlog{kind="invalidations_to_record"} 1' in client.get("/metrics").text
    assert system.insights.settle_invalidations() == 1
    assert client.get("/v1/admin/status", headers=admin).json()["backlogs"]["insights"][
        "invalidations_to_record"] == 0
    assert system.ledger.keys.get(insight["id"]) is None
    assert system.insights.settle_invalidations() == 0
    history = list(system.ledger.store.events.get(__import__("uuid").UUID(insight["id"])))
    assert type(history[-1]).__name__ == "Invalidated" and history[0].text is None  # sealed, key gone


def _two_risks(system: Engram, client: TestClient, clock: FixedClock) -> tuple[str, str, dict[str, Any]]:
    a = say(system, client, "r-a", "From now on, risks come first in every report.", clock.now())
    clock.advance(days=3)
    b = say(system, client, "r-b", "Remember: risks first, always.", clock.now())
    assert system.insights is not None and system.insights.propose_due() == 1
    [insight] = insights(client, "proposed")
    return a, b, insight


def test_correction_invalidates_and_rejection_is_final(make) -> None:
    clock = FixedClock(LAST_MONTH)
    system, client = make(clock)
    assert system.insights is not None
    a, b, insight = _two_risks(system, client, clock)
    assert client.post(f"/v1/insights/{insight['id']}/confirm", headers=auth()).status_code == 200
    r = client.post(f"/v1/memories/{b}/correct", headers=auth(), json={"text": "Opportunities come first now."})
    assert r.status_code == 200
    [after] = insights(client)
    assert (after["status"], after["reason"]) == ("invalidated", "corrected")
    assert after["text"] is not None  # corrected away, not forgotten: its words stay visible to its person
    assert not [i for i in recall(client, "risks first") if i["kind"] == "insight"]
    assert system.insights.settle_invalidations() == 1
    assert system.ledger.keys.get(after["id"]) is not None

    # A new pair is proposed; rejecting it destroys its text and it is never proposed again.
    clock.advance(days=1)
    c = say(system, client, "r-c", "Please remember to put the risks first.", clock.now())
    assert system.insights.propose_due() == 1
    [new] = insights(client, "proposed")
    assert sorted(new["evidence_memory_ids"]) == sorted([a, c])
    r = client.post(f"/v1/insights/{new['id']}/reject", headers=auth())
    assert r.status_code == 200 and r.json()["status"] == "rejected" and r.json()["text"] is None
    assert system.ledger.keys.get(new["id"]) is None
    clock.advance(days=1)
    r = client.post(f"/v1/memories/{a}/correct", headers=auth(),
                    json={"text": "From now on, risks come first in every report, please."})
    assert r.status_code == 200
    assert system.insights.propose_due() == 0  # the same memories again: the person said no once
    assert insights(client, "proposed") == [] and insights(client, "confirmed") == []


def test_insights_stay_within_one_scope_and_one_person(make) -> None:
    clock = FixedClock(LAST_MONTH)
    system, client = make(clock)
    assert system.insights is not None
    put_directory(client, {"teams": {"t-risk": {"members": ["alice"]}},
                           "sources": {"s-board": {"team": "t-risk", "members": ["alice"]}}})
    general = client.post("/v1/memories", headers=auth(), json=remember_body("Risks come first, always.")).json()
    restricted = client.post("/v1/memories", headers=auth(), json=remember_body(
        "Please put the risks first.", visibility="restricted", team="t-risk",
        source={"kind": "chat", "id": "s-board", "message_id": "m-board"})).json()
    assert restricted["status"] == "confirmed", restricted
    other = client.post("/v1/memories", headers=auth(user="bob"), json=remember_body("Risks first, please.")).json()
    assert system.insights.propose_due() == 0  # across scopes and across people: never
    assert insights(client) == [] and insights(client, user="bob") == []

    second = client.post("/v1/memories", headers=auth(), json=remember_body(
        "Remember: risks first in the board pack.", visibility="restricted", team="t-risk",
        source={"kind": "chat", "id": "s-board", "message_id": "m-board-2"})).json()
    assert system.insights.propose_due() == 1
    [insight] = insights(client, "proposed")
    assert sorted(insight["evidence_memory_ids"]) == sorted([restricted["id"], second["id"]])
    assert general["id"] not in insight["evidence_memory_ids"] and other["id"] not in insight["evidence_memory_ids"]
    assert client.post(f"/v1/insights/{insight['id']}/confirm", headers=auth()).status_code == 200
    assert [i["kind"] for i in recall(client, "risks first")].count("insight") == 1

    # Others never see it, nor act on it: another person, another company, an admin.
    for who in ({"user": "bob"}, {"company": "globex"}):
        assert insights(client, **who) == []
        assert not [i for i in recall(client, "risks first", **who) if i["kind"] == "insight"]
        is_problem(client.post(f"/v1/insights/{insight['id']}/reject", headers=auth(**who)), 404, "not_found")
    is_problem(client.post(f"/v1/insights/{insight['id']}/reject", headers=auth(user="root", role="admin")),
               403, "forbidden")
    is_problem(client.post("/v1/insights/not-a-uuid/confirm", headers=auth()), 404, "not_found")
    is_problem(client.get("/v1/insights", params={"status": "bogus"}, headers=auth()), 422, "validation_error")

    # The person leaves the team: the insight (its text came from that team's source) is out of scope at once.
    put_directory(client, {"teams": {"t-risk": {"members": []}},
                           "sources": {"s-board": {"team": "t-risk", "members": []}}})
    assert [(i["status"], i["reason"], i["text"], i["evidence"]) for i in insights(client)] == [
        ("invalidated", "out_of_scope", None, [])]
    is_problem(client.post(f"/v1/insights/{insight['id']}/reject", headers=auth()), 409, "insight_not_proposed")
    assert not [i for i in recall(client, "risks first") if i["kind"] == "insight"]
    # Back in the team: it is in use again (nothing was forgotten or corrected).
    put_directory(client, {"teams": {"t-risk": {"members": ["alice"]}},
                           "sources": {"s-board": {"team": "t-risk", "members": ["alice"]}}})
    assert [i["status"] for i in insights(client)] == ["confirmed"]

    # Revoking the source stops it at once too.
    assert client.post("/v1/sources/s-board/revoke", headers=auth()).status_code == 202
    assert [(i["status"], i["reason"], i["text"]) for i in insights(client)] == [("invalidated", "revoked", None)]
    assert insights(client, "confirmed") == []
    assert not [i for i in recall(client, "risks first") if i["kind"] == "insight"]


def test_account_forget_takes_the_insights_words_too(make) -> None:
    clock = FixedClock(LAST_MONTH)
    system, client = make(clock)
    assert system.insights is not None and system.forgetting is not None
    _a, _b, insight = _two_risks(system, client, clock)
    assert client.post(f"/v1/insights/{insight['id']}/confirm", headers=auth()).status_code == 200
    assert client.post("/v1/me/forget", headers=auth()).status_code == 202
    while system.forgetting.continue_account_forgets():
        pass
    assert [(i["status"], i["text"]) for i in insights(client)] == [("invalidated", None)]
    assert not [i for i in recall(client, "risks first") if i["kind"] == "insight"]
    assert system.insights.settle_invalidations() == 1
    assert system.ledger.keys.get(insight["id"]) is None


def test_no_proposals_while_learning_is_paused_and_they_come_when_it_resumes(make) -> None:
    clock = FixedClock(LAST_MONTH)
    system, client = make(clock)
    assert system.insights is not None
    assert client.put("/v1/settings", headers=auth(), json={"learning_paused": True, "use_paused": False}).status_code == 200
    for text in ("Risks come first, always", "Please put the risks first"):
        assert client.post("/v1/memories", headers=auth(), json=remember_body(text)).status_code == 201
    assert system.insights.propose_due() == 0 and insights(client) == []
    assert system.insights.propose_due() == 0  # nothing left waiting: a paused person is not retried forever
    assert client.put("/v1/settings", headers=auth(), json={"learning_paused": False, "use_paused": False}).status_code == 200
    assert system.insights.propose_due() == 1
    assert len(insights(client, "proposed")) == 1


def test_the_proposer_gives_way_to_recalls_as_it_does_to_writes(settings, database) -> None:
    """A backlog of proposals (after an import, say) runs at its slower pace while recalls arrive too:
    the proposer's sweeper counts them with the writes."""
    from engram.domain.scope import Caller

    system = Engram.open(settings, database=database, background=True)
    try:
        proposer = next(s for s in system.sweepers if s.task == system.insights.propose_due)
        assert proposer.yield_to is not None
        before = proposer.yield_to()
        system.recall.recall(Caller("acme", "alice", "user"), query="weekly meeting", as_of=None, max_bytes=8192,
                             limit=5)
        assert proposer.yield_to() == before + 1
    finally:
        system.close()
