"""Times at and past the edges: refused at the boundary with `invalid_time`, and an event no projector
can apply is set aside while everything else flows."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from tests.support.helpers import auth, remember_body, stored_events

EXTREMES = [
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC: PostgreSQL stores it, Python cannot read it back
    "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
    "1899-12-31T23:59:59Z",
    "2200-01-01T00:00:01Z",
    "2026-01-01T00:00:00",  # no offset
    "10000-01-01T00:00:00Z",
]
EDGES = ["1900-01-01T00:00:00Z", "1900-01-01T00:00:00-01:00", "2200-01-01T00:00:00Z", "2199-12-31T23:00:00-00:59"]


def _invalid_time(r) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "invalid_time"


@pytest.fixture
def memory_id(client) -> str:
    return client.post("/v1/memories", json=remember_body("I keep my notes in Obsidian"), headers=auth()).json()["id"]


def test_extreme_times_are_refused_everywhere_and_store_nothing(engram, client, memory_id) -> None:
    before = stored_events(engram)
    for value in EXTREMES:
        for field in ("valid_from", "valid_to", "occurred_at"):
            for text in ("tea at noon", "My blood pressure medication is at 8am"):  # plain, and a sensitive candidate
                _invalid_time(client.post("/v1/memories", json=remember_body(text, **{field: value}), headers=auth()))
        for field in ("valid_from", "valid_to"):
            _invalid_time(client.post(f"/v1/memories/{memory_id}/correct", json={"text": "Logseq", field: value},
                                      headers=auth()))
        _invalid_time(client.post("/v1/receipts", json={
            "receipt_id": "r-" + uuid4().hex, "author": "user", "text": "I like green tea.", "occurred_at": value,
            "source": {"kind": "chat", "id": "c-1", "message_id": "m-1"}}, headers=auth()))
        _invalid_time(client.post("/v1/recall", json={"query": "notes", "as_of": value}, headers=auth()))
    for not_a_time in (0, 1e18, True, [], {"year": 2026}):
        _invalid_time(client.post("/v1/recall", json={"query": "notes", "as_of": not_a_time}, headers=auth()))
    assert stored_events(engram) == before
    # every company still writes and reads
    other = auth(company="globex", user="gina")
    assert client.post("/v1/memories", json=remember_body("Gina prefers mornings"), headers=other).status_code == 201
    assert [i["text"] for i in client.post("/v1/recall", json={"query": "mornings"}, headers=other).json()["items"]] \
        == ["Gina prefers mornings"]


def test_times_at_the_edges_are_stored_and_read_back(client) -> None:
    for value in EDGES:
        r = client.post("/v1/memories", json=remember_body(f"edge {value}", valid_from=value), headers=auth())
        assert r.status_code == 201, r.text
        got = client.get(f"/v1/memories/{r.json()['id']}", headers=auth()).json()
        assert datetime.fromisoformat(got["valid_from"]) == datetime.fromisoformat(value.replace("Z", "+00:00"))
        r = client.post("/v1/recall", json={"query": "edge", "as_of": value}, headers=auth())
        assert r.status_code == 200, r.text


def test_the_domain_refuses_what_the_boundary_refuses() -> None:
    from engram.domain.instant import InvalidTime
    from engram.domain.memory import Memory
    from engram.domain.scope import Scope

    year_zero = datetime.fromisoformat("0001-01-01T00:00:00+14:00")
    with pytest.raises(InvalidTime):
        Memory.remember(scope=Scope("acme", "alice"), source={"kind": "chat", "id": "c"}, text="x", evidence=[],
                        valid_from=year_zero, valid_to=None, actor="alice", at=datetime.now(UTC))


def _store_unreadable_memory(engram, company: str = "acme", person: str = "alice") -> str:
    """Bypass every check, as an event written by an older version could: valid_from in year 0 UTC."""
    from engram.domain.memory import Memory

    bad = datetime.fromisoformat("0001-01-01T00:00:00+14:00")
    memory = Memory._create(
        Memory.Remembered, id=uuid4(), timestamp=datetime.now(UTC), actor=person, company=company,
        person=person, visibility="general", team=None, source={"kind": "chat", "id": "c-9", "message_id": None},
        text="a memory no projector can read back", evidence=[], valid_from=bad, valid_to=None, tags=None,
    )
    engram.store.keys.create(memory.id, company)
    engram.ledger.save(memory)
    return str(memory.id)


def test_an_event_no_projector_can_apply_is_quarantined_and_the_rest_flows(engram, client, settings, database) -> None:
    bad_id = _store_unreadable_memory(engram)
    quarantined = engram.operations.quarantined()
    assert quarantined["recall"] == 1
    # every other company's (and the same person's) writes and reads still work
    for company, person in (("globex", "gina"), ("acme", "alice")):
        h = auth(company=company, user=person)
        r = client.post("/v1/memories", json=remember_body(f"{person} drinks rooibos"), headers=h)
        assert r.status_code == 201, r.text
        items = client.post("/v1/recall", json={"query": "rooibos"}, headers=h).json()["items"]
        assert [i["text"] for i in items] == [f"{person} drinks rooibos"]
    assert client.get("/v1/memories?q=projector", headers=auth()).status_code == 200
    # the operator sees it, without its text
    status = client.get("/v1/admin/status", headers=auth(role="admin", user="root")).json()
    assert status["quarantined_events"]["recall"] == 1
    assert "projector can read" not in str(status)
    metrics = client.get("/metrics").text
    assert 'engram_quarantined_events{projection="recall"} 1' in metrics
    with engram.store.datastore.get_connection() as conn:
        rows = conn.execute("SELECT * FROM engram_quarantine WHERE projection = 'recall'").fetchall()
    assert [str(r["originator_id"]) for r in rows] == [bad_id]
    # the kind of error only: the time cannot be loaded (read back from the view, or checked before writing)
    assert "projector can read" not in str(rows) and rows[0]["error"].startswith(("DataError", "OverflowError"))
    # status, a restart's catch-up and a rebuild all get past it
    assert all(r["lag"] == 0 for r in engram.operations.status())
    from engram.api.bootstrap import Engram

    again = Engram.open(settings, database=database, background=False)
    try:
        assert all(r["lag"] == 0 for r in again.operations.status())
        assert again.operations.rebuild("recall") >= 2
        assert again.operations.quarantined()["recall"] == 1
    finally:
        again.close()


def test_an_event_that_cannot_be_decoded_is_quarantined_by_every_projection(engram, client) -> None:
    from eventsourcing.persistence import StoredEvent

    engram.store.recorder.insert_events([StoredEvent(originator_id=uuid4(), originator_version=1,
                                                   topic="nowhere.module:Gone", state=b"{}")])
    engram.runner.catch_up_all()
    assert set(engram.operations.quarantined().values()) == {1}
    r = client.post("/v1/memories", json=remember_body("still remembered"), headers=auth())
    assert r.status_code == 201
    assert client.get(f"/v1/memories/{r.json()['id']}", headers=auth()).json()["text"] == "still remembered"


def test_a_database_error_is_not_mistaken_for_a_bad_event(engram) -> None:
    """A broken connection is retried, never quarantined: nothing is set aside for an outage."""
    import psycopg

    from engram.domain.scope import Caller
    from engram.projections.base import TRANSIENT

    assert issubclass(psycopg.OperationalError, TRANSIENT)
    assert not issubclass(psycopg.DataError, TRANSIENT)
    projection = engram.projections["review"]
    calls = {"n": 0}
    original = projection.apply

    def flaky(curs, event, tracking):
        calls["n"] += 1
        raise psycopg.OperationalError("connection lost")

    projection.apply = flaky  # type: ignore[method-assign]
    try:
        with pytest.raises(TRANSIENT):
            engram.memories.remember(Caller("acme", "alice", "user"),
                                    text="an outage", source={"kind": "chat", "id": "c"}, occurred_at=None,
                                    visibility="general", team=None, valid_from=None, valid_to=None)
    finally:
        projection.apply = original  # type: ignore[method-assign]
    assert calls["n"] >= 1
    assert engram.operations.quarantined()["review"] == 0
    engram.runner.catch_up_all()  # the stored event applies once the database is back
    assert all(r["lag"] == 0 for r in engram.operations.status())
