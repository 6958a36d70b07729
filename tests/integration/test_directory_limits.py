"""A large directory is written without stopping anyone else; a too large one is refused before anything
is stored; no request holds the event table for long, rebuilds are exempt from the request timeouts,
and a lost database fails calls fast until the probe sees it again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from engram.adapters.availability import DatabaseTimeout

from tests.support.helpers import auth, remember_body

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ADMIN = {"company": "acme", "user": "root", "role": "admin"}
ANSWER_WITHIN = 60.0  # seconds; far above any normal answer, far below "never"


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small bounds so the tests that run into them are quick; read when the engram fixture opens."""
    monkeypatch.setenv("ENGRAM_DB_LOCK_TIMEOUT", "1")
    monkeypatch.setenv("ENGRAM_DB_IDLE_TIMEOUT", "1")


def people(n: int, width: int = 12, prefix: str = "p-") -> list[str]:
    return [f"{prefix}{i:0{width - len(prefix)}d}" for i in range(n)]


def in_thread(call: Callable[[], Any]) -> Callable[[float], Any]:
    """Start `call` now; the returned function waits for its result, failing if it never answers."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - reported to the waiting test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait(timeout: float = ANSWER_WITHIN) -> Any:
        thread.join(timeout)
        assert not thread.is_alive(), f"no answer within {timeout} s"
        if "error" in box:
            raise box["error"]
        return box["result"]

    return wait


def event_count(engram: Any) -> int:
    return engram.store.recorder.max_notification_id() or 0


def test_a_directory_of_10000_people_near_the_body_limit_is_stored_and_answers(client: Any, engram: Any) -> None:
    # ~950 KB of JSON: an event this large used to stop half-way in psycopg's pipeline and never commit
    members = people(10_000, width=92)
    document = {"teams": {"t-all": {"members": members}},
                "sources": {"s-all": {"team": "t-all", "members": members[:500]}}, "bots": {}}
    answer = in_thread(lambda: client.put("/v1/admin/directory", json=document, headers=auth(**ADMIN)))()
    assert answer.status_code == 200, answer.text[:300]
    stored = client.get("/v1/admin/directory", headers=auth(**ADMIN)).json()
    assert len(stored["teams"]["t-all"]["members"]) == 10_000
    assert len(stored["sources"]["s-all"]["members"]) == 500


def test_10001_distinct_people_across_teams_and_sources_get_413_and_nothing_is_stored(
        client: Any, engram: Any) -> None:
    small = {"teams": {"t-risk": {"members": ["u-alice"]}}, "sources": {}, "bots": {}}
    assert client.put("/v1/admin/directory", json=small, headers=auth(**ADMIN)).status_code == 200
    before = event_count(engram)
    everyone = people(10_001)
    too_large = {"teams": {"t-a": {"members": everyone[:6000]}, "t-b": {"members": everyone[:3000]}},
                 "sources": {"s-a": {"team": "t-a", "members": everyone[6000:]}}, "bots": {}}
    r = client.put("/v1/admin/directory", json=too_large, headers=auth(**ADMIN))
    assert r.status_code == 413, r.text[:300]
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "directory_too_large"
    assert event_count(engram) == before
    assert client.get("/v1/admin/directory", headers=auth(**ADMIN)).json()["teams"] == {
        "t-risk": {"members": ["u-alice"]}}
    # the same 10,000 people named twice (teams and sources overlap) are 10,000, not 20,000
    exactly = {"teams": {"t-a": {"members": everyone[:10_000]}},
               "sources": {"s-a": {"team": "t-a", "members": everyone[:10_000]}}, "bots": {}}
    assert client.put("/v1/admin/directory", json=exactly, headers=auth(**ADMIN)).status_code == 200


def test_other_companies_write_while_and_after_a_big_directory_is_written(client: Any, engram: Any) -> None:
    members = people(10_000, width=92)
    start = threading.Barrier(2)

    def big() -> Any:
        start.wait()
        return client.put("/v1/admin/directory", json={"teams": {"t-all": {"members": members}}},
                          headers=auth(**ADMIN))

    def others() -> list[int]:
        start.wait()
        return [client.post("/v1/memories", json=remember_body(f"I prefer tea number {i}"),
                            headers=auth(company="globex", user="gina")).status_code for i in range(5)]

    wait_big, wait_others = in_thread(big), in_thread(others)
    assert wait_others() == [201] * 5
    assert wait_big().status_code == 200
    after = client.post("/v1/memories", json=remember_body("I prefer coffee"), headers=auth(company="globex"))
    assert after.status_code == 201, after.text


@pytest.fixture
def event_table_locker(engram: Any, database: Any) -> Iterator[Callable[[], None]]:
    """A session outside Engram (no timeouts of ours) that holds the event table's write lock."""
    conn = psycopg.connect(database.conninfo)
    yield lambda: conn.execute(f"LOCK TABLE {engram.store.recorder.events_table_name} IN EXCLUSIVE MODE")
    conn.rollback()
    conn.close()


def test_a_write_waiting_on_a_held_event_table_lock_answers_503_then_writes_resume(
        client: Any, engram: Any, event_table_locker: Callable[[], None]) -> None:
    event_table_locker()
    r = in_thread(lambda: client.post("/v1/memories", json=remember_body("I prefer short meetings"),
                                      headers=auth()))()
    assert r.status_code == 503, r.text
    assert r.json()["code"] == "unavailable" and int(r.headers["retry-after"]) > 0
    assert "short meetings" not in r.text


def test_a_request_session_idle_in_a_transaction_loses_its_locks(client: Any, engram: Any) -> None:
    """What the idle-in-transaction bound gives: a session that stops talking mid-transaction (a stuck
    client, a hung thread) cannot keep the event table locked; the server ends it."""
    datastore = engram.store.datastore
    with datastore.get_connection() as conn:
        conn.execute("BEGIN")
        conn.execute(f"LOCK TABLE {engram.store.recorder.events_table_name} IN EXCLUSIVE MODE")
        time.sleep(2.5)  # idle in transaction past ENGRAM_DB_IDLE_TIMEOUT=1
        with pytest.raises(psycopg.Error):
            conn.execute("SELECT 1")
    r = client.post("/v1/memories", json=remember_body("I prefer window seats"), headers=auth())
    assert r.status_code == 201, r.text


def test_rebuilds_run_without_the_request_timeouts(client: Any, engram: Any) -> None:
    for i in range(3):
        assert client.post("/v1/memories", json=remember_body(f"I prefer plan {i}"), headers=auth()).status_code == 201
    datastore = engram.store.datastore
    with datastore.get_connection() as conn:
        bounded = conn.execute("SHOW statement_timeout").fetchone()["statement_timeout"]
    assert bounded not in ("0", "")

    def slow_progress(position: int, head: int) -> None:
        time.sleep(2.5)  # the rebuild's transaction waits meanwhile, idle, past ENGRAM_DB_IDLE_TIMEOUT=1

    assert engram.operations.rebuild("recall", slow_progress) >= 3
    with datastore.get_connection() as conn:  # and the pooled connection came back bounded
        assert conn.execute("SHOW statement_timeout").fetchone()["statement_timeout"] == bounded
    items = client.post("/v1/recall", json={"query": "plan"}, headers=auth()).json()["items"]
    assert len(items) == 3


@pytest.fixture
def one_second_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DB_STATEMENT_TIMEOUT", "1")


def test_a_statement_past_its_timeout_is_cancelled_except_in_a_rebuild(one_second_statements: None,
                                                                        engram: Any) -> None:
    datastore = engram.store.datastore
    with pytest.raises(DatabaseTimeout), datastore.get_connection() as conn:
        conn.execute("SELECT pg_sleep(3)")
    with datastore.long_running(), datastore.get_connection() as conn:
        conn.execute("SELECT pg_sleep(1.5)")
    assert engram.operations.availability.up  # a slow statement is not an outage


def test_while_the_database_is_lost_calls_fail_fast_and_the_probe_brings_service_back(
        client: Any, engram: Any) -> None:
    assert client.get("/readyz").status_code == 200
    engram.operations.availability.lost(None)  # as if a call had found the database gone
    for r in (client.get("/v1/memories", headers=auth()), client.get("/readyz")):
        assert r.status_code == 503 and r.json()["code"] == "unavailable" and "retry-after" in r.headers
    assert client.get("/livez").status_code == 200 and client.get("/healthz").status_code == 200
    deadline = time.monotonic() + 30
    while not engram.operations.availability.up and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engram.operations.availability.up, "the probe did not notice the database answering"
    assert client.get("/readyz").status_code == 200
    assert client.get("/v1/memories", headers=auth()).status_code == 200


def test_a_directory_is_parsed_once_a_version_and_every_change_is_seen_at_once(
        client: Any, engram: Any, settings: Any, database: Any) -> None:
    """Each process keeps the parsed directory for as long as its row is unchanged; a replacement, even
    one stored by another process, is used by the very next request of every process."""
    from engram.api.bootstrap import Engram
    from engram.domain.scope import Caller

    from tests.support.helpers import put_directory

    alice = Caller(company="acme", person="alice", role="user", bot=None, entry="api")
    big = {"teams": {f"t-{i}": {"members": people(50, prefix=f"p{i}-")} for i in range(199)}}
    big["teams"]["t-risk"] = {"members": ["alice"]}
    put_directory(client, big)
    first = engram.ledger.access(alice)
    assert "t-risk" in first.grants.teams
    assert engram.ledger.access(alice).directory is first.directory  # unchanged: not read or parsed again

    other = Engram.open(settings, database=database, background=False)  # a second process on the database
    try:
        assert "t-risk" in other.ledger.access(alice).grants.teams
        for round in range(3):  # replaced by the other process, back and forth
            without = {"teams": {**big["teams"], "t-risk": {"members": ["bob"]}}}
            other.governance.put_directory(Caller(company="acme", person="root", role="admin", bot=None,
                                                  entry="api"), without if round % 2 == 0 else big)
            expected = round % 2 == 1
            assert ("t-risk" in engram.ledger.access(alice).grants.teams) is expected, round
            assert ("t-risk" in other.ledger.access(alice).grants.teams) is expected, round
    finally:
        other.close()


def test_a_process_keeps_a_bounded_number_of_parsed_directories(client: Any, engram: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed directories are kept for the companies asked about most recently, up to `KEPT`; one that
    fell out is read and parsed again, with its teams as stored."""
    from engram.domain.scope import Caller

    from tests.support.helpers import put_directory

    queries = engram.ledger.standings
    monkeypatch.setattr(queries, "KEPT", 2)
    companies = ["acme", "beta", "gamma"]
    for company in companies:
        put_directory(client, {"teams": {f"t-{company}": {"members": ["alice"]}}}, company=company)
    for _ in range(2):
        for company in companies:
            alice = Caller(company=company, person="alice", role="user", bot=None, entry="api")
            assert engram.ledger.access(alice).grants.teams == {f"t-{company}"}
            assert len(queries._directories) <= 2
    assert list(queries._directories) == ["beta", "gamma"]
