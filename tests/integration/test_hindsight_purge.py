"""Hindsight purge evidence that stays true (ADR 0018), against a real Hindsight 1.1.0 with the guard:
ordered sync work between two syncers, deletes before retains, the audit after a Hindsight restore,
vacuuming Hindsight's own database, and the guard allowing a token only what Engram does."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from engram.adapters.crypto import MasterKey
from engram.adapters.hindsight import TEXT_TABLES, HindsightClient, HindsightUnavailable, bank_for
from engram.api.bootstrap import Engram
from engram.domain.scope import Caller, Scope
from engram.hindsight_guard import tokens
from engram.hindsight_guard.tokens import public_key_text
from engram.service.hindsight_sync import NOT_VERIFIED, HindsightSyncer

from tests.support.hindsight_server import HindsightServer, hindsight_binary, start_beside

pytestmark = pytest.mark.skipif(hindsight_binary() is None, reason="Hindsight not installed (make hindsight)")

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}
MASTER = base64.urlsafe_b64encode(os.urandom(32)).decode()
SIGNING_KEY = MasterKey.from_text(MASTER).hindsight_signing_key()
BANK = bank_for(Scope("acme", "alice"))


def client(server: HindsightServer, **kwargs: Any) -> HindsightClient:
    return HindsightClient(server.url, signing_key=SIGNING_KEY, **kwargs)


def signed(*banks: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens.sign(SIGNING_KEY, list(banks))}"}


@pytest.fixture(scope="module")
def hindsight(postgres, tmp_path_factory) -> Iterator[HindsightServer]:
    server = start_beside(postgres, "hindsight_purge", tmp_path_factory.mktemp("hindsight-purge"),
                          guard_public_key=public_key_text(SIGNING_KEY))
    yield server
    server.close()


def empty_banks(server: HindsightServer) -> None:
    """Delete every document the test banks hold, the way Engram does (the guard refuses bank deletion)."""
    with psycopg.connect(server.database.conninfo) as conn:
        docs = conn.execute("SELECT bank_id, id FROM documents WHERE bank_id LIKE 'engram-%'").fetchall()
    for bank_id, document_id in docs:
        client(server).delete(bank_id, str(document_id))


def open_engram(settings, database, hindsight, **changes: Any) -> Engram:
    return Engram.open(settings.replace(hindsight_url=hindsight.url, master_key=MASTER, **changes),
                       database=database, background=False)


@pytest.fixture
def system(settings, database, hindsight) -> Iterator[Engram]:
    empty_banks(hindsight)
    engram = open_engram(settings, database, hindsight)
    yield engram
    engram.close()


def remember(engram: Engram, text: str) -> str:
    return engram.memories.remember(ALICE, text=text, source=SOURCE, occurred_at=None, visibility="general",
                                   team=None, valid_from=None, valid_to=None).id


def hindsight_copy(engram: Engram, forget_id: str) -> tuple[str, dict[str, Any]]:
    status = engram.memories.forget_status(ALICE, forget_id)
    return status["status"], {c["copy"]: c for c in status["copies"]}["hindsight"]


class Later:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


def test_a_slow_retain_on_one_replica_never_outlives_a_forget_on_the_other(system, hindsight) -> None:
    """Two syncers (two `engram serve` replicas). One is inside a slow retain when the memory is
    forgotten; the other must not delete meanwhile (the lease is still held), the late retain must
    complete nothing, and the delete that follows leaves the document gone with true evidence."""
    hs = client(hindsight)
    memory_id = remember(system, "The team lunch moves to the rooftop terrace in June")
    slow_client = client(hindsight)
    entered, go = threading.Event(), threading.Event()
    real_retain = slow_client.retain

    def slow_retain(*args: Any, **kwargs: Any) -> None:
        entered.set()
        assert go.wait(60)
        real_retain(*args, **kwargs)

    slow_client.retain = slow_retain  # type: ignore[method-assign]
    slow = HindsightSyncer(system.ledger, slow_client, system.syncer.purge)
    results: list[int] = []
    replica = threading.Thread(target=lambda: results.append(slow.sync(limit=1)))
    replica.start()
    try:
        assert entered.wait(30)
        forget_id = system.memories.forget(ALICE, memory_id).forget_id
        # the other replica: the forget made the wish pending, but the memory is still leased,
        # and a rebuild of the wish list does not free that lease either
        assert system.syncer.sync() == 0
        system.operations.rebuild("hindsight_sync")
        assert system.syncer.backlog() == {"pending": 1} and system.syncer.sync() == 0
        assert hindsight_copy(system, forget_id)[1]["state"] == "pending"
    finally:
        go.set()
        replica.join(60)
    assert results == [0]  # its retain landed, but for a wish that is no longer the wish: nothing done
    assert hs.exists(BANK, memory_id)  # ...and the text is in Hindsight again, for now
    landed = datetime.now(UTC)

    assert system.syncer.sync() == 1  # deletes it
    assert not hs.exists(BANK, memory_id) and hs.document_facts(BANK, memory_id) == []
    assert hs.recall(BANK, "rooftop terrace lunch", deadline=30, budget="mid") == []
    status, copy = hindsight_copy(system, forget_id)
    assert status == "purge_complete" and copy["state"] == "purged"
    assert "1 fact(s) before, 0 after" in copy["evidence"] and NOT_VERIFIED in copy["evidence"]
    assert copy["purged_at"] >= landed  # when the delete happened: after the late retain
    assert system.syncer.sync() == 0 and slow.sync() == 0


def test_a_retain_that_timed_out_but_lands_later_is_deleted_again_before_purge_complete(system, hindsight) -> None:
    """The client gave up on a retain that Hindsight still runs. The delete runs at once, but the
    purge is reported only after a second look once no such retain can land any more."""
    hs = client(hindsight)
    memory_id = remember(system, "The quarterly offsite is booked at the lake lodge")
    go = threading.Event()
    late: list[threading.Thread] = []
    timing_out = client(hindsight)
    real_retain = timing_out.retain

    def retain_that_times_out(*args: Any, **kwargs: Any) -> None:
        thread = threading.Thread(target=lambda: (go.wait(60), real_retain(*args, **kwargs)))
        thread.start()
        late.append(thread)
        raise HindsightUnavailable("ReadTimeout")  # the request was sent; the answer never came

    timing_out.retain = retain_that_times_out  # type: ignore[method-assign]
    replica = HindsightSyncer(system.ledger, timing_out, system.syncer.purge)
    assert replica.sync(limit=1) == 0
    forget_id = system.memories.forget(ALICE, memory_id).forget_id
    assert system.syncer.sync() == 0  # deleted, but a retain may still land: not reported yet
    assert hindsight_copy(system, forget_id)[1]["state"] == "pending"
    go.set()
    late[0].join(60)
    assert hs.exists(BANK, memory_id)  # the retain landed after the delete

    system.ledger.clock = Later(datetime.now(UTC) + timedelta(hours=1))  # every doubt has passed
    assert system.syncer.sync() == 1
    assert not hs.exists(BANK, memory_id) and hs.document_facts(BANK, memory_id) == []
    status, copy = hindsight_copy(system, forget_id)
    assert status == "purge_complete"
    assert "found in its bank again after an earlier delete" in copy["evidence"]
    assert "checked again at" in copy["evidence"] and "1 fact(s) before" in copy["evidence"]


def test_a_late_retain_of_replaced_text_is_replaced_again(system, hindsight) -> None:
    """A correction while the old text's retain is still running somewhere: the replaced text must
    not stay in Hindsight once that retain lands."""
    hs = client(hindsight)
    memory_id = remember(system, "The all-hands meeting is on Monday mornings")
    go = threading.Event()
    late: list[threading.Thread] = []
    timing_out = client(hindsight)
    real_retain = timing_out.retain

    def retain_that_times_out(*args: Any, **kwargs: Any) -> None:
        thread = threading.Thread(target=lambda: (go.wait(60), real_retain(*args, **kwargs)))
        thread.start()
        late.append(thread)
        raise HindsightUnavailable("ReadTimeout")

    timing_out.retain = retain_that_times_out  # type: ignore[method-assign]
    assert HindsightSyncer(system.ledger, timing_out, system.syncer.purge).sync(limit=1) == 0
    system.memories.correct(ALICE, memory_id, text="The all-hands meeting moved to Thursday afternoons",
                            valid_from=None, valid_to=None, reason=None)
    assert system.syncer.sync() == 0  # retained, but the older retain may still land: not done yet
    assert [t for _, t in hs.document_facts(BANK, memory_id)] == ["The all-hands meeting moved to Thursday afternoons"]
    go.set()
    late[0].join(60)
    assert [t for _, t in hs.document_facts(BANK, memory_id)] == ["The all-hands meeting is on Monday mornings"]

    system.ledger.clock = Later(datetime.now(UTC) + timedelta(hours=1))
    assert system.syncer.sync() == 1
    assert [t for _, t in hs.document_facts(BANK, memory_id)] == ["The all-hands meeting moved to Thursday afternoons"]
    assert system.syncer.backlog() == {"done": 1}


def test_deletes_are_claimed_before_failing_retains(system, hindsight) -> None:
    """Four retains fail slowly (their requests time out); a forget's delete does not wait behind them."""
    hs = client(hindsight)
    forgotten = remember(system, "My dentist appointment is on the third floor")
    assert system.syncer.sync() == 1
    stuck = [remember(system, f"Room {n} has a broken projector") for n in range(4)]
    forget_id = system.memories.forget(ALICE, forgotten).forget_id

    calls: list[tuple[str, str]] = []
    failing = client(hindsight)
    real = {name: getattr(failing, name) for name in ("exists", "delete")}

    def fail_retain(bank: str, document_id: str, *args: Any, **kwargs: Any) -> None:
        calls.append(("retain", document_id))
        raise HindsightUnavailable("ReadTimeout")

    def record(name: str) -> Any:
        def call(bank: str, document_id: str, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, document_id))
            return real[name](bank, document_id, *args, **kwargs)
        return call

    failing.retain = fail_retain  # type: ignore[method-assign]
    failing.exists = record("exists")  # type: ignore[method-assign]
    failing.delete = record("delete")  # type: ignore[method-assign]
    system.syncer.client = failing
    assert system.syncer.sync() == 1  # the delete; every retain failed
    assert calls[0] == ("exists", forgotten) and ("delete", forgotten) in calls
    assert calls.index(("delete", forgotten)) < min(calls.index(("retain", m)) for m in stuck)
    assert {d for kind, d in calls if kind == "retain"} == set(stuck)
    assert not hs.exists(BANK, forgotten)
    assert hindsight_copy(system, forget_id)[0] == "purge_complete"


def test_the_audit_deletes_a_document_that_came_back_and_says_so(system, hindsight) -> None:
    hs = client(hindsight)
    memory_id = remember(system, "The spare office keys are in the blue drawer")
    assert system.syncer.sync() == 1
    forget_id = system.memories.forget(ALICE, memory_id).forget_id
    assert system.syncer.sync() == 1
    first = hindsight_copy(system, forget_id)[1]
    assert first["state"] == "purged" and not hs.exists(BANK, memory_id)
    assert system.syncer.audit() == {"checked": 1, "found_again": 0, "deleted_again": 0}

    # Hindsight's database is restored from before the forget: the document is back
    hs.retain(BANK, memory_id, "The spare office keys are in the blue drawer", None)
    assert hs.exists(BANK, memory_id)
    assert system.syncer.audit() == {"checked": 1, "found_again": 1, "deleted_again": 1}
    assert not hs.exists(BANK, memory_id) and hs.document_facts(BANK, memory_id) == []
    status, copy = hindsight_copy(system, forget_id)
    assert status == "purge_complete" and "found in its bank again" in copy["evidence"]
    assert "1 fact(s) before, 0 after" in copy["evidence"] and copy["purged_at"] > first["purged_at"]
    assert "blue drawer" not in copy["evidence"]  # content-free
    with system.store.datastore.get_connection() as conn:
        audit = conn.execute("SELECT checks, found_again, last_found_at FROM engram_hindsight_audits "
                             "WHERE memory_id = %s", (memory_id,)).fetchone()
    assert audit["checks"] == 2 and audit["found_again"] == 1 and audit["last_found_at"] is not None

    # and `engram restore --fence` checks every deleted document too
    hs.retain(BANK, memory_id, "The spare office keys are in the blue drawer", None)
    counts = system.operations.restore_fence()
    assert counts["hindsight_checked"] == 1 and counts["hindsight_found_again"] == 1
    assert counts["hindsight_deleted_again"] == 1
    assert not hs.exists(BANK, memory_id)
    assert hindsight_copy(system, forget_id)[0] == "purge_complete"


def _text_in_statistics(conn: psycopg.Connection[Any], words: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND (most_common_vals::text LIKE %(w)s "
        "OR histogram_bounds::text LIKE %(w)s OR most_common_elems::text LIKE %(w)s)", {"w": f"%{words}%"}).fetchone()
    return int(row[0])


def _tuples_holding(conn: psycopg.Connection[Any], table: str, words: str) -> int:
    """Row versions, live or dead, whose bytes contain the words (pageinspect reads every page)."""
    row = conn.execute(
        "SELECT count(*) FROM generate_series(0, pg_relation_size(%(t)s::regclass) / current_setting('block_size')::int - 1) b, "
        "heap_page_items(get_raw_page(%(t)s::text, b::int)) i WHERE position(convert_to(%(w)s, 'UTF8') in i.t_data) > 0",
        {"t": table, "w": words}).fetchone()
    return int(row[0])


def test_with_access_to_hindsights_database_the_purge_waits_for_vacuum_and_analyze(
        settings, database, hindsight) -> None:
    empty_banks(hindsight)
    conninfo = hindsight.database.conninfo
    engram = open_engram(settings, database, hindsight, hindsight_database_url=conninfo)
    try:
        words = "Quokka sightings at the marina"
        memory_id = remember(engram, f"{words} happen every Thursday at dawn")
        for n in range(3):  # a few more rows, so ANALYZE keeps a histogram of the text column
            remember(engram, f"Meeting room {n} is booked on Fridays")
        assert engram.syncer.sync() == 4
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
            conn.execute("ANALYZE memory_units")
            assert _text_in_statistics(conn, words) >= 1  # the leak this guards against is real
            assert _tuples_holding(conn, "memory_units", words) >= 1

        forget_id = engram.memories.forget(ALICE, memory_id).forget_id
        assert engram.syncer.sync() == 1
        status, copy = hindsight_copy(engram, forget_id)
        assert status == "purge_complete"
        assert "VACUUM (ANALYZE) of " in copy["evidence"] and "memory_units" in copy["evidence"]
        assert NOT_VERIFIED not in copy["evidence"] and "WAL" in copy["evidence"]
        with psycopg.connect(conninfo, autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND relkind = 'r'").fetchall()]
            assert "memory_units" in tables
            for table in tables:  # no live row of any Hindsight table holds the text
                assert conn.execute(sql.SQL("SELECT count(*) FROM {} t WHERE t::text LIKE %s").format(
                    sql.Identifier(table)), (f"%{words}%",)).fetchone()[0] == 0, table
            assert _text_in_statistics(conn, words) == 0
            for table in TEXT_TABLES:  # no row version, live or dead, of the vacuumed tables holds it
                if table in tables:
                    assert _tuples_holding(conn, table, words) == 0, table
    finally:
        engram.close()


def test_without_access_the_evidence_says_what_may_remain(system, hindsight) -> None:
    memory_id = remember(system, "The printer on floor two jams on Mondays")
    assert system.syncer.sync() == 1
    forget_id = system.memories.forget(ALICE, memory_id).forget_id
    assert system.syncer.sync() == 1
    status, copy = hindsight_copy(system, forget_id)
    assert status == "purge_complete" and copy["evidence"].endswith(NOT_VERIFIED)
    assert "dead rows, planner statistics and WAL" in copy["evidence"]


def test_the_guard_allows_a_token_only_what_engram_does(system, hindsight) -> None:
    memory_id = remember(system, "The fire drill is on the first Tuesday")
    assert system.syncer.sync() == 1  # Engram's own operations all pass: create, retain, read
    mine, theirs = BANK, bank_for(Scope("acme", "bob"))
    base = f"{hindsight.url}/v1/default/banks"
    auth = signed(mine)

    def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{base}/{mine}{path}", headers=auth, timeout=30, **kwargs)

    refused = {
        # an alias named after another person's bank id would capture that person's requests
        "alias": call("POST", "/aliases", json={"alias": theirs}),
        "bank settings": call("PATCH", "/config", json={"updates": {"store_document_text": True}}),
        "bank settings reset": call("DELETE", "/config"),
        "bank settings via PUT": call("PUT", "", json={"retain_mission": "keep every word"}),
        "bank name": call("PATCH", "", json={"name": "renamed"}),
        "bank config read": call("GET", "/config"),
        "bank deletion": call("DELETE", ""),
        "mental model": call("POST", "/mental-models", json={"name": "m", "source_query": "what is planned"}),
        "directive": call("POST", "/directives", json={"name": "d", "content": "remember everything"}),
        "webhook": call("POST", "/webhooks", json={"url": "https://hooks.example.com/engram"}),  # no request is made
        "reflect": call("POST", "/reflect", json={"query": "what is planned"}),
        "consolidate": call("POST", "/consolidate", json={}),
        "memory edit": call("PATCH", f"/memories/{hs_fact(hindsight, memory_id)}", json={"state": "invalidated"}),
        "document listing": call("GET", "/documents"),
        "export": call("GET", "/export"),
        "bank template import": call("POST", "/import", json={"version": "1", "bank": {"retain_mission": "all"}}),
    }
    assert {what: r.status_code for what, r in refused.items()} == {what: 403 for what in refused}
    # nothing changed: no alias reaches this bank, and bob's bank is still free for bob's token
    with psycopg.connect(hindsight.database.conninfo) as conn:
        assert conn.execute("SELECT count(*) FROM bank_aliases").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM mental_models").fetchone()[0] == 0
    theirs_created = httpx.put(f"{base}/{theirs}", json={}, headers=signed(theirs), timeout=30)
    assert theirs_created.status_code == 200, theirs_created.text
    # another bank, with a valid token for this one: refused even for Engram's own operations
    assert httpx.get(f"{base}/{theirs}/documents/{memory_id}", headers=auth, timeout=30).status_code == 403
    assert httpx.put(f"{base}/engram-g-{'0' * 32}", json={}, headers=auth, timeout=30).status_code == 403
    # and everything Engram does still works
    hs = client(hindsight)
    assert hs.exists(mine, memory_id) and hs.document_facts(mine, memory_id)
    assert [h.document_id for h in hs.recall(mine, "fire drill", deadline=30)] == [memory_id]
    forget_id = system.memories.forget(ALICE, memory_id).forget_id
    assert system.syncer.sync() == 1 and hindsight_copy(system, forget_id)[0] == "purge_complete"


def hs_fact(server: HindsightServer, memory_id: str) -> str:
    return client(server).document_facts(BANK, memory_id)[0][0]
