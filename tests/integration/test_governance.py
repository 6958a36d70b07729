"""Who sees what: an adversarial matrix through the HTTP API, each cell the exact visible set."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from engram.api.bootstrap import Engram
from engram.api.http import create_app

from tests.support.helpers import SECRET, auth, put_directory, remember_body, token

DIRECTORY = {
    "teams": {"t-risk": {"members": ["alice", "bob"]}, "t-ops": {"members": ["alice"]}},
    "sources": {"s-jira": {"team": "t-risk", "members": ["alice", "bob"]},
                "s-wiki": {"team": "t-ops", "members": ["alice"]}},
    "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}, "b-general": {}},
}


def remember(client, text: str, company: str = "acme", user: str = "alice", **extra) -> str:
    r = client.post("/v1/memories", json=remember_body(text, **extra), headers=auth(company=company, user=user))
    assert r.status_code == 201, r.text
    return r.json()["id"]


def restricted(team: str, source: str) -> dict:
    return {"visibility": "restricted", "team": team,
            "source": {"kind": "ticket", "id": source, "message_id": "m-1"}}


def visible(client, headers: dict, query: str = "apricot") -> set[str]:
    r = client.post("/v1/recall", json={"query": query}, headers=headers)
    assert r.status_code == 200, r.text
    return {i["id"] for i in r.json()["items"]}


@pytest.fixture
def world(client):
    put_directory(client, DIRECTORY)
    put_directory(client, {"bots": {"b-helper": {}}}, company="globex")
    ids = {
        "general": remember(client, "apricot general preference"),
        "risk": remember(client, "apricot risk ticket note", **restricted("t-risk", "s-jira")),
        "ops": remember(client, "apricot ops wiki note", **restricted("t-ops", "s-wiki")),
        "globex": remember(client, "apricot globex note", company="globex"),
        "bob": remember(client, "apricot bob note", user="bob", **restricted("t-risk", "s-jira")),
    }
    return ids


def test_matrix(client, world) -> None:
    w = world
    cells = {
        "alice herself": (auth(), {w["general"], w["risk"], w["ops"]}),
        "alice via web": (auth(entry="web"), {w["general"], w["risk"], w["ops"]}),
        "alice via scheduled bot": (auth(role="bot", bot="b-helper", entry="scheduled"), {w["general"], w["risk"]}),
        "alice via channel bot": (auth(role="bot", bot="b-helper", entry="channel"), {w["general"], w["risk"]}),
        "bot with no teams": (auth(role="bot", bot="b-general"), {w["general"]}),
        "unregistered bot": (auth(role="bot", bot="b-rogue"), set()),
        "same person, other company": (auth(company="globex"), {w["globex"]}),
        "same bot id, other company": (auth(company="globex", role="bot", bot="b-helper"), {w["globex"]}),
        "teammate": (auth(user="bob"), {w["bob"]}),
        "company admin": (auth(role="admin"), set()),
        "operator": (auth(role="operator"), set()),
    }
    for name, (headers, expected) in cells.items():
        assert visible(client, headers) == expected, name
    r = client.post("/v1/recall", json={"query": "apricot"},
                    headers={"Authorization": f"Bearer {token(secret='forged-' + 'q' * 40)}"})
    assert r.status_code == 401 and r.json()["code"] == "invalid_token"


def test_single_objects_are_404_outside_scope(client, world) -> None:
    for headers in (auth(role="bot", bot="b-helper"), auth(company="globex"), auth(user="bob"), auth(role="admin"),
                    auth(role="bot", bot="b-rogue")):
        r = client.get(f"/v1/memories/{world['ops']}", headers=headers)
        assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert client.get(f"/v1/memories/{world['ops']}", headers=auth()).status_code == 200


def test_membership_removed_after_a_successful_recall(client, world) -> None:
    bot = auth(role="bot", bot="b-helper")
    assert world["risk"] in visible(client, bot)
    trimmed = {**DIRECTORY, "sources": {**DIRECTORY["sources"], "s-jira": {"team": "t-risk", "members": ["bob"]}}}
    put_directory(client, trimmed)
    assert visible(client, bot) == {world["general"]}
    assert visible(client, auth()) == {world["general"], world["ops"]}
    assert client.get(f"/v1/memories/{world['risk']}", headers=auth()).status_code == 404
    # the bot losing the team works the same way
    put_directory(client, DIRECTORY)
    assert world["risk"] in visible(client, bot)
    put_directory(client, {**DIRECTORY, "bots": {"b-helper": {"teams": [], "sources": []}}})
    assert visible(client, bot) == {world["general"]}


def test_a_source_moved_to_another_team_takes_its_memories_out_of_use(client, world) -> None:
    moved = {**DIRECTORY, "sources": {**DIRECTORY["sources"], "s-jira": {"team": "t-ops", "members": ["alice", "bob"]}}}
    put_directory(client, moved)
    # alice holds both teams and the source, but the memory was scoped to (t-risk, s-jira)
    assert visible(client, auth()) == {world["general"], world["ops"]}
    assert client.get(f"/v1/memories/{world['risk']}", headers=auth()).status_code == 404
    put_directory(client, DIRECTORY)
    assert world["risk"] in visible(client, auth())


def test_unregistering_a_bot_stops_it_at_once(client, world) -> None:
    bot = auth(role="bot", bot="b-helper")
    assert visible(client, bot)
    put_directory(client, {**DIRECTORY, "bots": {}})
    assert visible(client, bot) == set()
    assert visible(client, auth()) == {world["general"], world["risk"], world["ops"]}


def test_revoked_source_by_person_and_by_admin(client, world) -> None:
    r = client.post("/v1/sources/s-wiki/revoke", headers=auth())
    assert r.status_code == 202 and r.json()["scope"] == "person"
    assert visible(client, auth()) == {world["general"], world["risk"]}
    assert client.get(f"/v1/memories/{world['ops']}", headers=auth()).status_code == 404

    r = client.post("/v1/sources/s-jira/revoke", headers=auth(role="admin"))
    assert r.status_code == 202 and r.json()["scope"] == "company"
    assert visible(client, auth()) == {world["general"]}
    assert visible(client, auth(user="bob")) == set()
    assert visible(client, auth(company="globex")) == {world["globex"]}
    # a general memory from a revoked chat stops too
    chat = remember(client, "apricot from chat nine", source={"kind": "chat", "id": "chat-9", "message_id": "m"})
    assert chat in visible(client, auth())
    client.post("/v1/sources/chat-9/revoke", headers=auth())
    assert chat not in visible(client, auth())


def test_restricted_memory_needs_a_directory_source_and_its_team(client) -> None:
    put_directory(client, DIRECTORY)
    for extra in (restricted("t-ops", "s-jira"), restricted("t-risk", "s-nowhere"), restricted("t-ghost", "s-jira")):
        r = client.post("/v1/memories", json=remember_body("x", **extra), headers=auth())
        assert r.status_code == 422 and r.json()["code"] == "invalid_scope"
    r = client.post("/v1/memories", json=remember_body("x", **restricted("t-ops", "s-wiki")), headers=auth(user="bob"))
    assert r.status_code == 422 and r.json()["code"] == "invalid_scope"


def test_directory_is_for_admins_and_is_validated(client, engram) -> None:
    for role in ("user", "bot"):
        r = client.put("/v1/admin/directory", json=DIRECTORY, headers=auth(role=role, bot="b-helper"))
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
        assert client.get("/v1/admin/directory", headers=auth(role=role, bot="b")).status_code == 403
    r = client.put("/v1/admin/directory", json={"sources": {"s-x": {"team": "t-none", "members": []}}},
                   headers=auth(role="admin"))
    assert r.status_code == 422 and r.json()["code"] == "invalid_directory"
    r = client.put("/v1/admin/directory", json={"teams": {"t": {"members": "alice"}}}, headers=auth(role="operator"))
    assert r.status_code == 422 and r.json()["code"] == "validation_error"
    stored = put_directory(client, DIRECTORY)
    assert stored["sources"]["s-jira"] == {"team": "t-risk", "members": ["alice", "bob"]}
    assert client.get("/v1/admin/directory", headers=auth(role="operator")).json() == stored
    # every change is an event on the company's directory aggregate
    put_directory(client, {"teams": {}})
    from engram.domain.directory import directory_id

    kinds = [type(e).__name__ for e in engram.store.events.get(directory_id("acme"))]
    assert kinds == ["Opened", "Replaced", "Replaced"]


def test_use_paused_and_learning_paused_are_independent(client, world) -> None:
    assert client.get("/v1/settings", headers=auth()).json() == {"learning_paused": False, "use_paused": False}
    r = client.put("/v1/settings", json={"learning_paused": False, "use_paused": True}, headers=auth())
    assert r.status_code == 200 and r.json() == {"learning_paused": False, "use_paused": True}
    body = client.post("/v1/recall", json={"query": "apricot"}, headers=auth(role="bot", bot="b-helper")).json()
    assert body["items"] == [] and body["paused"] is True
    assert len(client.get("/v1/memories", headers=auth()).json()["items"]) == 3  # data kept
    bot = auth(role="bot", bot="b-helper")
    assert client.get("/v1/memories", headers=bot).json()["items"] == []  # but no bot reads it meanwhile
    assert client.get(f"/v1/memories/{world['general']}", headers=bot).status_code == 404
    assert visible(client, auth(user="bob")) == {world["bob"]}  # only alice paused
    r = client.put("/v1/settings", json={"learning_paused": True, "use_paused": False}, headers=auth())
    assert r.json() == {"learning_paused": True, "use_paused": False}
    assert visible(client, auth()) == {world["general"], world["risk"], world["ops"]}
    r = client.put("/v1/settings", json={"learning_paused": True, "use_paused": "yes"}, headers=auth())
    assert r.status_code == 422
    r = client.put("/v1/settings", json={"learning_paused": False, "use_paused": True}, headers=auth(role="bot", bot="b-helper"))
    assert r.status_code == 403


@pytest.mark.parametrize("mode", ["off", "shadow", "enabled"])
def test_rollout_modes(settings, database, mode: str) -> None:
    system = Engram.open(settings.replace(mode=mode, company_allowlist=frozenset({"acme"})), database=database,
                         background=False)
    try:
        with TestClient(create_app(system, SECRET)) as c:
            put_directory(c, {"bots": {"b-helper": {}}})
            r = c.post("/v1/memories", json=remember_body("apricot jam"), headers=auth())
            bot = auth(role="bot", bot="b-helper")
            if mode == "off":
                assert r.status_code == 403 and r.json()["code"] == "engram_off"
                assert c.post("/v1/recall", json={"query": "apricot"}, headers=bot).json() == {
                    "items": [], "degraded": False, "bytes": 0, "omitted": 0, "mode": "off"}
            elif mode == "shadow":
                assert r.status_code == 201
                assert c.post("/v1/recall", json={"query": "apricot"}, headers=bot).json()["items"] == []
                assert c.get(f"/v1/memories/{r.json()['id']}", headers=bot).status_code == 404
                assert c.get("/v1/memories", headers=bot).json()["items"] == []
                assert visible(c, auth()) == {r.json()["id"]}
            else:
                assert visible(c, bot) == {r.json()["id"]}
            # a company outside the allowlist is off whatever the mode
            r = c.post("/v1/memories", json=remember_body("apricot"), headers=auth(company="globex"))
            assert r.status_code == 403 and r.json()["code"] == "engram_off"
    finally:
        system.close()


def test_admin_status_and_metrics(engram, client, world) -> None:
    client.post("/v1/receipts", json={"receipt_id": "r-1", "author": "user", "text": "I like figs.",
                                      "source": {"kind": "chat", "id": "c-1", "message_id": "m-1"}}, headers=auth())
    engram.ledger.caught_up()  # a receipt is eventually visible (API.md): here, at once
    for role in ("user", "bot"):
        r = client.get("/v1/admin/status", headers=auth(role=role, bot="b-helper"))
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
    status = client.get("/v1/admin/status", headers=auth(role="operator")).json()
    assert status["backlogs"]["inbox"] == {"queued": 1} and status["backlogs"]["projector_lag"] == 0
    assert status["budget_today"]["calls"] == 0 and status["mode"] == "enabled"
    assert "apricot" not in str(status) and "figs" not in str(status)
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and 'engram_inbox_receipts{state="queued"} 1' in metrics.text
    assert "apricot" not in metrics.text
