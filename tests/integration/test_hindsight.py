"""Hindsight as the semantic index: isolated banks, idempotent sync, purge evidence (real Hindsight 1.1.0)."""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from engram.adapters.crypto import MasterKey
from engram.adapters.hindsight import HindsightClient, bank_for
from engram.adapters.insight_hindsight import HindsightObservationProposer, text_hash
from engram.api.bootstrap import Engram
from engram.domain.insight import Fact, Group, Proposal
from engram.domain.memory import Memory
from engram.domain.scope import Caller, Scope
from engram.hindsight_guard import tokens
from engram.hindsight_guard.tokens import public_key_text

from tests.support.hindsight_server import HindsightServer, hindsight_binary, start_with_fake_llm

pytestmark = pytest.mark.skipif(hindsight_binary() is None, reason="Hindsight not installed (make hindsight)")

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}
MASTER = base64.urlsafe_b64encode(os.urandom(32)).decode()  # one Engram, so one service-token signing key
SIGNING_KEY = MasterKey.from_text(MASTER).hindsight_signing_key()


def client(server: HindsightServer, **kwargs: Any) -> HindsightClient:
    return HindsightClient(server.url, signing_key=SIGNING_KEY, **kwargs)


def signed(*banks: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens.sign(SIGNING_KEY, list(banks))}"}


def _own_database(postgres, name: str):
    from engram.adapters.database import Database

    info = postgres.server.get_postmaster_info()
    return Database(name, str(info.socket_dir), str(info.port or 5432), "postgres", "")


@pytest.fixture(scope="module")
def hindsight(postgres, tmp_path_factory) -> Iterator[HindsightServer]:
    server = start_with_fake_llm(_own_database(postgres, "hindsight_tests"),
                                 tmp_path_factory.mktemp("hindsight") / "hindsight.log",
                                 guard_public_key=public_key_text(SIGNING_KEY))
    yield server
    server.close()


def empty_banks(server: HindsightServer) -> None:
    """Delete every document the test banks hold, the way Engram does (the guard refuses bank deletion)."""
    import psycopg

    with psycopg.connect(server.database.conninfo) as conn:
        docs = conn.execute("SELECT bank_id, id FROM documents WHERE bank_id LIKE 'engram-%'").fetchall()
    hs = client(server)
    for bank_id, document_id in docs:
        hs.delete(bank_id, str(document_id))


@pytest.fixture
def system(settings, database, hindsight) -> Iterator[Engram]:
    empty_banks(hindsight)  # each test starts from empty banks: the Hindsight server is shared by the module
    engram = Engram.open(settings.replace(hindsight_url=hindsight.url, master_key=MASTER), database=database, background=False)
    yield engram
    engram.close()


def remember(engram: Engram, text: str, source: dict[str, str] = SOURCE) -> str:
    return engram.memories.remember(ALICE, text=text, source=source, occurred_at=None, visibility="general",
                                   team=None, valid_from=None, valid_to=None).id


def bank() -> str:
    return bank_for(Scope("acme", "alice"))


def test_banks_are_decided_by_the_adapter_and_isolate_scopes() -> None:
    general = bank_for(Scope("acme", "alice"))
    assert general == bank_for(Scope("acme", "alice")) and general.startswith("engram-g-")
    assert general != bank_for(Scope("globex", "alice")) != bank_for(Scope("acme", "bob"))
    restricted = bank_for(Scope("acme", "alice", "restricted", "t-risk", "s-jira"))
    assert restricted.startswith("engram-r-") and restricted != bank_for(Scope("acme", "alice", "restricted",
                                                                             "t-risk", "s-wiki"))


def test_retain_replace_and_delete_with_purge_evidence(system, hindsight) -> None:
    hs = client(hindsight)
    memory_id = remember(system, "I prefer weekly reports as short bullet points")
    assert system.syncer.sync() == 1
    assert hs.exists(bank(), memory_id)
    hints = hs.recall(bank(), "weekly reports", deadline=30)
    assert [h.document_id for h in hints] == [memory_id]
    assert system.syncer.sync() == 0  # nothing pending: idempotent

    system.memories.correct(ALICE, memory_id, text="I prefer monthly reports as long prose", valid_from=None,
                           valid_to=None, reason=None)
    assert system.syncer.sync() == 1
    hints = hs.recall(bank(), "monthly prose", deadline=30)
    assert {h.document_id for h in hints} == {memory_id}
    # what the observation proposer reads passes the guard: the bank's units, and a document's record
    # whose hash tells which text it holds now (ADR 0022)
    assert {u.document_id for u in hs.units(bank(), deadline=30)} == {memory_id}
    document = hs.document(bank(), memory_id, deadline=30)
    assert document is not None and document["content_hash"] == text_hash("I prefer monthly reports as long prose")

    forget_id = system.memories.forget(ALICE, memory_id).forget_id
    status = system.memories.forget_status(ALICE, forget_id)
    assert status["status"] == "stopped_using"
    assert {c["copy"]: c["state"] for c in status["copies"]}["hindsight"] == "pending"
    assert system.syncer.sync() == 1
    assert not hs.exists(bank(), memory_id)
    assert hs.recall(bank(), "monthly prose reports", deadline=30) == []
    status = system.memories.forget_status(ALICE, forget_id)
    assert status["status"] == "purge_complete"
    copy = {c["copy"]: c for c in status["copies"]}["hindsight"]
    assert copy["state"] == "purged" and "404" in copy["evidence"]


def test_hindsight_down_then_back_converges(system, hindsight) -> None:
    memory_id = remember(system, "The deploy freeze starts on Thursday")
    live = system.syncer.client
    system.syncer.client = HindsightClient("http://127.0.0.1:9", timeout=1)  # nothing listens there
    assert system.syncer.sync() == 0
    backlog = system.syncer.backlog()
    assert backlog == {"pending": 1}
    with system.store.datastore.get_connection() as conn:
        row = conn.execute("SELECT attempts, next_attempt_at FROM engram_hindsight_sync WHERE memory_id = %s",
                           (memory_id,)).fetchone()
    assert row["attempts"] == 1 and row["next_attempt_at"] is not None
    system.syncer.client = live
    system.ledger.clock = type("Later", (), {"now": lambda self: row["next_attempt_at"]})()
    assert system.syncer.sync() == 1 and system.syncer.backlog() == {"done": 1}
    assert system.operations.admin_status(Caller("acme", "root", "operator")).backlogs.hindsight_sync == {"done": 1}
    assert live.exists(bank(), memory_id)
    # a rebuilt wish list (duplicate, out-of-order jobs) converges on the same document
    system.operations.rebuild("hindsight_sync")
    assert system.syncer.backlog() == {"pending": 1}
    assert system.syncer.sync() == 1 and system.syncer.sync() == 0
    assert [h.document_id for h in live.recall(bank(), "deploy freeze", deadline=30)] == [memory_id]


def test_wishes_parked_by_an_outage_are_due_as_soon_as_hindsight_answers_again(system, hindsight) -> None:
    """A wish that failed because Hindsight gave no answer backs off, but does not wait that backoff out
    once Hindsight's health check answers again (a purge waits on its Hindsight copy)."""
    memory_id = remember(system, "The quarterly review moves to Friday")
    live = system.syncer.client
    system.syncer.outage_probe_seconds = 0  # ask Hindsight's health at every pass
    system.syncer.client = HindsightClient("http://127.0.0.1:9", timeout=1)  # nothing listens there
    assert system.syncer.sync() == 0
    with system.store.datastore.get_connection() as conn:
        row = conn.execute("SELECT attempts, next_attempt_at, last_error FROM engram_hindsight_sync "
                           "WHERE memory_id = %s", (memory_id,)).fetchone()
    assert row["attempts"] == 1 and row["next_attempt_at"] > system.ledger.clock.now()
    assert row["last_error"] == "unreachable: ConnectError"
    assert system.syncer.sync() == 0 and system.syncer.backlog() == {"pending": 1}  # still down: still waiting
    system.syncer.client = live  # back: due at once, not at next_attempt_at
    assert system.syncer.sync() == 1 and system.syncer.backlog() == {"done": 1}
    assert live.exists(bank(), memory_id)


def test_recall_uses_hindsight_hints_and_degrades_within_the_deadline(system, hindsight) -> None:
    import time

    # the fake embedding model says the invoices note means what "tea" means: only Hindsight can know
    same = [1.0] + [0.0] * 63
    hindsight.llm.vectors.update({"tea": same, "Send the invoices on Fridays": same})
    tea = remember(system, "I prefer green tea in the afternoon")
    invoices = remember(system, "Send the invoices on Fridays")
    system.syncer.sync()
    semantic, system.recall.semantic = system.recall.semantic, None
    sql_only = system.recall.recall(ALICE, query="tea", as_of=None, max_bytes=17500, limit=10)
    assert [i.id for i in sql_only.items] == [tea] and sql_only.degraded is False  # unconfigured: SQL is the design
    system.recall.semantic = semantic
    system.recall.semantic.deadline = 30  # generous: the first query warms Hindsight up
    body = system.recall.recall(ALICE, query="tea", as_of=None, max_bytes=17500, limit=10)
    assert body.degraded is False
    ids = [i.id for i in body.items]
    assert set(ids) == {tea, invoices}  # the semantic neighbour no word of the query matches is recalled too
    assert all(i.text in ("I prefer green tea in the afternoon", "Send the invoices on Fridays")
               for i in body.items)  # Engram's own text, unsealed and re-authorized
    # another person's bank is never asked and never leaks
    bob = Caller("acme", "bob", "user")
    assert system.recall.recall(bob, query="tea", as_of=None, max_bytes=17500, limit=10).items == []
    # forgotten memories never come back through a stale hint
    system.memories.forget(ALICE, invoices)
    ids = [i.id for i in system.recall.recall(ALICE, query="tea", as_of=None, max_bytes=17500, limit=10).items]
    assert invoices not in ids and tea in ids

    # Hindsight down: SQL ranks, degraded, and within the deadline
    system.recall.semantic.client = HindsightClient("http://127.0.0.1:9", timeout=1)
    system.recall.semantic.deadline = 0.15
    started = time.monotonic()
    body = system.recall.recall(ALICE, query="tea", as_of=None, max_bytes=17500, limit=10)
    assert time.monotonic() - started < 1.0
    assert body.degraded is True and [i.id for i in body.items] == [tea]


def test_the_guard_accepts_only_engram_tokens_for_the_banks_they_name(system, hindsight) -> None:
    import httpx
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    memory_id = remember(system, "The quarterly review is in March")
    assert system.syncer.sync() == 1
    mine, theirs = bank(), bank_for(Scope("acme", "bob"))
    base = hindsight.url + "/v1/default/banks"
    doc = f"{base}/{mine}/documents/{memory_id}"

    def get(url: str, token: str | None) -> httpx.Response:
        return httpx.get(url, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=30)

    assert get(doc, tokens.sign(SIGNING_KEY, [mine])).status_code == 200
    assert get(doc, None).status_code == 401
    assert get(doc, tokens.sign(Ed25519PrivateKey.generate(), [mine])).status_code == 401  # foreign signer
    assert get(doc, tokens.sign(SIGNING_KEY, [mine], now=0)).status_code == 401  # long expired
    assert get(doc, "not-a-token").status_code == 401
    other = tokens.sign(SIGNING_KEY, [theirs])
    assert get(doc, other).status_code == 403  # a valid token, for another bank
    recall = httpx.post(f"{base}/{mine}/memories/recall", json={"query": "quarterly review"},
                        headers={"Authorization": f"Bearer {other}"}, timeout=30)
    assert recall.status_code == 403
    delete = httpx.delete(doc, headers={"Authorization": f"Bearer {other}"}, timeout=30)
    assert delete.status_code == 403 and client(hindsight).exists(mine, memory_id)
    listed = httpx.get(base, headers={"Authorization": f"Bearer {other}"}, timeout=30)
    assert listed.status_code == 200 and mine not in listed.text
    reflect = httpx.post(f"{base}/{mine}/reflect", json={"query": "what is planned"},
                         headers=signed(mine), timeout=30)
    assert reflect.status_code == 403
    # Engram's own client signs per bank, so it reads its document and nothing else
    assert client(hindsight).exists(mine, memory_id)


def test_losing_scope_withdraws_the_document_and_regaining_it_retains_it(system, hindsight) -> None:
    admin = Caller("acme", "root", "admin")
    directory = {"teams": {"t-risk": {"members": ["alice"]}, "t-ops": {"members": ["alice"]}},
                 "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]},
                             "s-wiki": {"team": "t-ops", "members": ["alice"]}}}
    system.governance.put_directory(admin, directory)
    restricted = system.memories.remember(
        ALICE, text="The audit finding on vendor payments is still open", occurred_at=None,
        source={"kind": "ticket", "id": "s-jira", "message_id": "J-1"}, visibility="restricted", team="t-risk",
        valid_from=None, valid_to=None).id
    wiki = remember(system, "The runbook lives in the wiki", source={"kind": "page", "id": "s-wiki", "message_id": "W-1"})
    general = remember(system, "I like short meetings")
    assert system.syncer.sync() == 3
    hs = client(hindsight)
    risk_bank = bank_for(Scope("acme", "alice", "restricted", "t-risk", "s-jira"))
    assert hs.exists(risk_bank, restricted) and hs.exists(bank(), wiki) and hs.exists(bank(), general)

    # the source moves to another team: the memory's scope is gone, and so is its document
    moved = {**directory, "sources": {**directory["sources"], "s-jira": {"team": "t-ops", "members": ["alice"]}}}
    system.governance.put_directory(admin, moved)
    assert system.syncer.backlog() == {"pending": 1, "done": 2}
    assert system.syncer.sync() == 1
    assert not hs.exists(risk_bank, restricted) and hs.exists(bank(), general)
    # the directory is put back: the memory is usable again, so it is indexed again
    system.governance.put_directory(admin, directory)
    assert system.syncer.sync() == 1 and hs.exists(risk_bank, restricted)
    # alice leaves the team: withdrawn again
    system.governance.put_directory(admin, {**directory, "teams": {**directory["teams"], "t-risk": {"members": []}}})
    assert system.syncer.sync() == 1 and not hs.exists(risk_bank, restricted)

    # a revocation withdraws every memory from that source, general ones too, and nothing else
    system.governance.revoke_source(admin, "s-wiki")
    assert system.syncer.sync() == 1
    assert not hs.exists(bank(), wiki) and hs.exists(bank(), general)
    system.governance.put_directory(admin, directory)  # the revocation outlives directory changes
    assert system.syncer.sync() == 1
    assert hs.exists(risk_bank, restricted) and not hs.exists(bank(), wiki)
    # and a rebuild of the wish list reaches the same state
    system.operations.rebuild("hindsight_sync")
    system.syncer.sync()
    assert hs.exists(risk_bank, restricted) and not hs.exists(bank(), wiki) and hs.exists(bank(), general)
    with system.store.datastore.get_connection() as conn:
        actions = {str(r["memory_id"]): r["action"] for r in conn.execute(
            "SELECT memory_id, action FROM engram_hindsight_sync").fetchall()}
    assert actions == {restricted: "retain", wiki: "withdraw", general: "retain"}


@pytest.fixture(scope="module")
def observing(postgres, tmp_path_factory) -> Iterator[HindsightServer]:
    """A second Hindsight, with observations on: its consolidation turns each batch of new facts
    into one observation citing all of them. Without the guard: the test runs consolidation itself,
    which the guard refuses to every token (Hindsight runs it for itself in production)."""
    server = start_with_fake_llm(
        _own_database(postgres, "hindsight_observing"), tmp_path_factory.mktemp("observing") / "hindsight.log",
        guard_public_key=None, observations=True,
        observe=lambda facts: [{"text": "Commute habits: " + "; ".join(t for _, t in facts),
                                "source_fact_ids": [f for f, _ in facts]}])
    yield server
    server.close()


def _observations(server: HindsightServer, query: str) -> list[set[str | None]]:
    """The source documents of each observation Hindsight recalls for this query."""
    return [set(h.source_document_ids) for h in client(server).recall(bank(), query, deadline=30, budget="mid")
            if h.kind == "observation"]


def _wait(predicate, timeout: float = 60) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "Hindsight did not get there in time"
        time.sleep(0.3)


def test_observations_map_through_their_source_facts_and_die_with_them(settings, database, observing) -> None:
    import httpx

    system = Engram.open(settings.replace(hindsight_url=observing.url, master_key=MASTER), database=database,
                         background=False)
    try:
        system.recall.semantic.deadline = 30
        train = remember(system, "I take the train on Mondays")
        bike = remember(system, "I cycle on Fridays")
        assert system.syncer.sync() == 2
        r = httpx.post(f"{observing.url}/v1/default/banks/{bank()}/consolidate", json={}, timeout=30,
                       headers=signed(bank()))
        assert r.status_code == 200, r.text
        _wait(lambda: {train, bike} in _observations(observing, "commute"))

        # the observation is mapped to both memories through its source facts; no Hindsight text is kept
        hints = system.recall.semantic.hints([Scope("acme", "alice")], "commute")
        assert (frozenset({train, bike}) in {sources for _, sources in hints.observations})
        assert "Commute habits" not in repr(hints)
        body = system.recall.recall(ALICE, query="commute", as_of=None, max_bytes=17500, limit=10)
        assert body.degraded is False and {i.id for i in body.items} == {train, bike}
        assert all("Commute habits" not in i.text for i in body.items)

        # Engram forgets one source before Hindsight hears of it: the stale observation is not used,
        # and the forgotten memory never comes back through it
        forget_id = system.memories.forget(ALICE, bike).forget_id
        assert frozenset({train, bike}) in {s for _, s in system.recall.semantic.hints(
            [Scope("acme", "alice")], "commute").observations}
        body = system.recall.recall(ALICE, query="commute", as_of=None, max_bytes=17500, limit=10)
        assert bike not in {i.id for i in body.items}

        # the delete reaches Hindsight: the document and every observation derived from it are gone
        assert system.syncer.sync() == 1
        assert not client(observing).exists(bank(), bike)
        assert all(bike not in sources for sources in _observations(observing, "commute"))
        status = system.memories.forget_status(ALICE, forget_id)
        assert status["status"] == "purge_complete"
        evidence = {c["copy"]: c["evidence"] for c in status["copies"]}["hindsight"]
        assert "1 fact(s) before, 0 after" in evidence and "1 recall probe(s) found no result" in evidence
    finally:
        system.close()


ROOIBOS = "A cup of rooibos, most days, in the office kitchen after a long lunch break"


def test_hindsight_ranking_is_fused_with_sqls(system, hindsight) -> None:
    # SQL ranks the notes first (more of the query's words); the embedding model says the rooibos
    # memory means what the query means, and Hindsight's ranking puts it first
    same = [0.0, 1.0] + [0.0] * 62
    hindsight.llm.vectors.update({"what do I drink after lunch": same, ROOIBOS: same})
    notes = remember(system, "Lunch notes: what I drink after lunch, drinks menus, lunch at noon")
    rooibos = remember(system, ROOIBOS)
    assert system.syncer.sync() == 2
    system.recall.meaning = None  # ENGRAM_EMBEDDINGS=off: SQL and Hindsight fused by reciprocal rank
    semantic, system.recall.semantic = system.recall.semantic, None
    sql_only = system.recall.recall(ALICE, query="what do I drink after lunch", as_of=None, max_bytes=17500, limit=10)
    assert [i.id for i in sql_only.items] == [notes, rooibos]
    system.recall.semantic = semantic
    semantic.deadline = 30
    ranked = system.recall.recall(ALICE, query="what do I drink after lunch", as_of=None, max_bytes=17500, limit=10)
    assert ranked.degraded is False
    # fused by reciprocal rank, the index's vote weighing half of SQL's: each is first in one list, so
    # SQL's first stays first, and the index's first closes most of the gap
    assert [i.id for i in ranked.items] == [notes, rooibos]
    first, second = (i.score for i in ranked.items)
    assert 1.0 > first > second > 0.9 * first


def test_hindsight_hung_then_stopped_mid_run(system, hindsight) -> None:
    import signal
    import time

    system.recall.semantic.deadline = 30
    before = remember(system, "The office plants need water on Tuesdays")
    assert system.syncer.sync() == 1
    assert [i.id for i in system.recall.recall(ALICE, query="plants water", as_of=None, max_bytes=17500,
                                                limit=10).items] == [before]
    system.syncer.client = client(hindsight, timeout=1)
    system.recall.semantic.deadline = 0.15

    def answers_within_the_deadline(expected: set[str]) -> None:
        started = time.monotonic()
        body = system.recall.recall(ALICE, query="plants water", as_of=None, max_bytes=17500, limit=10)
        assert time.monotonic() - started < 0.6
        assert body.degraded is True and {i.id for i in body.items} == expected  # SQL ranks alone

    assert hindsight.proc is not None
    hindsight.proc.send_signal(signal.SIGSTOP)  # hung: accepts connections, answers nothing
    try:
        answers_within_the_deadline({before})
        during = remember(system, "The plants by the window need less water")
        assert system.syncer.sync() == 0 and system.syncer.backlog() == {"done": 1, "pending": 1}
    finally:
        hindsight.proc.send_signal(signal.SIGCONT)
    hindsight.stop()  # down: connections refused
    answers_within_the_deadline({before, during})
    hindsight.start()
    # back to the usual client: the 1 s bound was for the hung server, and a retain on a freshly started
    # Hindsight under load (fact extraction, embeddings) can take longer than that every time
    system.syncer.client = client(hindsight)
    system.ledger.clock = type(
        "Later", (), {"now": lambda self: datetime.now(UTC) + timedelta(hours=1)})()
    # as the sweeper would: retry (with backoff) until the restarted Hindsight takes the retain
    deadline = time.monotonic() + 90
    while system.syncer.sync() == 0:
        if time.monotonic() > deadline:
            with system.store.datastore.get_connection() as conn:
                rows = conn.execute("SELECT s.action, s.state, s.attempts, s.last_error, s.next_attempt_at, "
                                    "l.lease_until, l.retain_in_doubt_until FROM engram_hindsight_sync s "
                                    "LEFT JOIN engram_hindsight_leases l USING (memory_id)").fetchall()
            raise AssertionError(f"no sync after Hindsight restarted (now {system.ledger.clock.now()}): {rows}")
        time.sleep(1)
    assert system.syncer.backlog() == {"done": 2}
    system.recall.semantic.deadline = 30
    body = system.recall.recall(ALICE, query="plants by the window", as_of=None, max_bytes=17500, limit=10)
    assert body.degraded is False and {i.id for i in body.items} == {before, during}


def test_duplicate_stale_and_concurrent_sync_jobs_converge(system, hindsight) -> None:
    import threading

    from engram.service.hindsight_sync import HindsightSyncer

    hs = client(hindsight)
    memory_id = remember(system, "Standup is at nine")
    for text in ("Standup is at ten", "Standup is at half past ten in room Lisbon"):
        system.memories.correct(ALICE, memory_id, text=text, valid_from=None, valid_to=None, reason=None)
    assert system.syncer.sync() == 1  # one job for three revisions: the current one
    assert {h.document_id for h in hs.recall(bank(), "room Lisbon", deadline=30)} == {memory_id}
    facts = hs.document_facts(bank(), memory_id)
    assert [t for _, t in facts] == ["Standup is at half past ten in room Lisbon"]
    # a stale job (revision 1) delivered late retains the current text, not the old one
    with system.store.datastore.transaction(commit=True) as curs:
        curs.execute("UPDATE engram_hindsight_sync SET revision = 1, state = 'pending' WHERE memory_id = %s",
                     (memory_id,))
    assert system.syncer.sync() == 1
    assert [t for _, t in hs.document_facts(bank(), memory_id)] == ["Standup is at half past ten in room Lisbon"]

    # two syncers at once share the backlog without doing any job twice
    ids = [remember(system, f"Parking spot {n} is reserved on Wednesdays") for n in range(6)]
    other = HindsightSyncer(system.ledger, client(hindsight), system.syncer.purge)
    done: list[int] = []
    threads = [threading.Thread(target=lambda s=s: done.append(s.sync())) for s in (system.syncer, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(done) == 6 and system.syncer.backlog() == {"done": 7}
    assert all(len(hs.document_facts(bank(), m)) == 1 for m in ids)


def test_a_forgotten_restricted_memory_is_deleted_from_its_bank_though_its_source_is_shredded(
        system, hindsight) -> None:
    """A restricted bank is named from the memory's source, which the forget shreds (ADR 0019): the bank
    noted at the memory's creation (`engram_hindsight_banks`) is where the delete and the audit look."""
    admin = Caller("acme", "root", "admin")
    system.governance.put_directory(admin, {"teams": {"t-risk": {"members": ["alice"]}},
                                            "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}}})
    restricted = system.memories.remember(
        ALICE, text="The audit finding on vendor payments is still open", occurred_at=None,
        source={"kind": "ticket", "id": "s-jira", "message_id": "J-9"}, visibility="restricted", team="t-risk",
        valid_from=None, valid_to=None).id
    assert system.syncer.sync() == 1
    hs = client(hindsight)
    risk_bank = bank_for(Scope("acme", "alice", "restricted", "t-risk", "s-jira"))
    assert hs.exists(risk_bank, restricted)

    forget_id = system.memories.forget(ALICE, restricted).forget_id
    assert system.ledger.get(UUID(restricted), Memory).source is None
    assert system.syncer.sync() == 1
    assert not hs.exists(risk_bank, restricted)
    status = system.memories.forget_status(ALICE, forget_id)
    assert status["status"] == "purge_complete"
    assert {c["copy"]: c["state"] for c in status["copies"]}["hindsight"] == "purged"

    # a rebuild cannot learn the bank from the events any more, and need not: the note outlives it
    system.operations.rebuild("hindsight_sync")
    system.syncer.sync()
    hs.retain(risk_bank, restricted, "The audit finding on vendor payments is still open", None)  # it came back
    assert system.syncer.audit(limit=None)["found_again"] == 1
    assert not hs.exists(risk_bank, restricted)


def test_hindsight_enabled_after_a_restricted_memory_was_forgotten_says_it_was_never_retained(
        settings, database, hindsight) -> None:
    admin = Caller("acme", "root", "admin")
    before = Engram.open(settings.replace(master_key=MASTER), database=database, background=False)
    try:
        before.governance.put_directory(admin, {"teams": {"t-risk": {"members": ["alice"]}},
                                                "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}}})
        restricted = before.memories.remember(
            ALICE, text="The vendor audit is still open", occurred_at=None, visibility="restricted",
            source={"kind": "ticket", "id": "s-jira", "message_id": "J-3"}, team="t-risk",
            valid_from=None, valid_to=None).id
        before.memories.forget(ALICE, restricted)
    finally:
        before.close()
    after = Engram.open(settings.replace(hindsight_url=hindsight.url, master_key=MASTER), database=database,
                        background=False)
    try:
        assert after.syncer.sync() == 1  # no bank, no source to name one: nothing was ever retained
        assert after.syncer.backlog() == {"done": 1}
        with after.store.datastore.get_connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM engram_hindsight_banks").fetchone()["n"] == 0
    finally:
        after.close()


def _by_topic(facts: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Consolidation as a model might do it: one observation per topic, citing every fact about it."""
    topics = {"risk": "Puts risks first", "bullet": "Likes short bullet points"}
    found = [(text, [f for f, t in facts if word in t.lower()]) for word, text in topics.items()]
    return [{"text": text, "source_fact_ids": ids} for text, ids in found if ids]


def _consolidated(server: HindsightServer, bank_id: str, observations: int) -> None:
    import httpx

    r = httpx.post(f"{server.url}/v1/default/banks/{bank_id}/consolidate", json={}, timeout=30, headers=signed(bank_id))
    assert r.status_code == 200, r.text
    _wait(lambda: sum(u.kind == "observation" for u in client(server).units(bank_id, deadline=30)) >= observations)


def _group(engram: Engram, scope: Scope, *memory_ids: str) -> Group:
    """What the insight service hands a proposer: each memory's current revision and text."""
    memories = {m: engram.ledger.get(UUID(m), Memory) for m in memory_ids}
    return Group(scope, tuple(Fact(m, memory.revision, memory.current["text"]) for m, memory in memories.items()))


def test_observations_are_proposed_only_when_every_source_is_a_current_memory_of_the_group(
        settings, database, observing, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    system = Engram.open(settings.replace(hindsight_url=observing.url, master_key=MASTER), database=database,
                         background=False)
    observing.llm.observe = _by_topic
    try:
        system.governance.put_directory(Caller("acme", "root", "admin"), {
            "teams": {"t-risk": {"members": ["alice"]}},
            "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}}})
        first = remember(system, "Risks come first in the weekly report")
        second = remember(system, "Put the risks first when you summarise")
        bullets = remember(system, "I like short bullet points")
        reports = remember(system, "Weekly reports should be bullet points")
        jira = {"kind": "ticket", "id": "s-jira", "message_id": "J-1"}
        restricted = [system.memories.remember(ALICE, text=text, source=jira, occurred_at=None,
                                               visibility="restricted", team="t-risk", valid_from=None,
                                               valid_to=None).id
                      for text in ("Audit risks go first", "List the open risks first in audits")]
        assert system.syncer.sync() == 6
        general, risk = Scope("acme", "alice"), Scope("acme", "alice", "restricted", "t-risk", "s-jira")
        _consolidated(observing, bank(), 2)
        _consolidated(observing, bank_for(risk), 1)
        proposer = HindsightObservationProposer(client(observing))

        # Engram forgets one memory before Hindsight hears of it: the group no longer holds it, and
        # the observation resting on its document is not proposed; the other one is, with both ids
        system.memories.forget(ALICE, bullets)
        assert proposer.propose(_group(system, general, first, second, reports)) == [
            Proposal("Puts risks first", (first, second), "hindsight")]
        # each group reads its own bank only: the restricted memories' observation is theirs alone
        assert proposer.propose(_group(system, risk, *restricted)) == [
            Proposal("Puts risks first", tuple(restricted), "hindsight")]
        assert proposer.propose(Group(Scope("acme", "bob"), _group(system, general, first, second).facts)) == []
        # a group without one of its sources (a memory the service left out) gets nothing from it
        assert proposer.propose(_group(system, general, first, reports)) == []

        # corrected in Engram, not yet in Hindsight: the observation rests on the older text, so it waits
        system.memories.correct(ALICE, first, text="Risks always come first in the weekly report",
                                valid_from=None, valid_to=None, reason=None)
        corrected = _group(system, general, first, second, reports)
        assert corrected.facts[0].revision == 2 and proposer.propose(corrected) == []
        # the sync replaces the document (and the facts of the old text), consolidation observes the new
        # text: proposed again, now on the current revision
        assert system.syncer.sync() >= 1
        _consolidated(observing, bank(), 1)
        _wait(lambda: proposer.propose(corrected) == [Proposal("Puts risks first", (first, second), "hindsight")])

        # the insight service runs it beside the local proposer, one group at a time
        assert system.insights is not None and system.insights.propose_due() >= 2
        proposed = system.insights.list_insights(ALICE, status="proposed").items
        assert {(i.text, frozenset(i.evidence_memory_ids)) for i in proposed if i.proposer == "hindsight"} \
            == {("Puts risks first", frozenset((first, second))), ("Puts risks first", frozenset(restricted))}
        assert not [r for r in caplog.records if "risks" in r.getMessage().lower()]
    finally:
        observing.llm.observe = None
        system.close()


def test_the_observation_proposer_answers_nothing_quickly_when_hindsight_is_down_or_hung(caplog) -> None:
    import socket
    import time

    caplog.set_level(logging.DEBUG)
    facts = (Fact(str(UUID(int=1)), 1, "Risks come first"), Fact(str(UUID(int=2)), 1, "Risks first again"))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()
    assert HindsightObservationProposer(HindsightClient(f"http://127.0.0.1:{port}")).propose(
        Group(Scope("acme", "alice"), facts)) == []
    assert time.monotonic() - started < 1
    with socket.socket() as hung:  # accepts connections, answers nothing
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        started = time.monotonic()
        proposer = HindsightObservationProposer(HindsightClient(f"http://127.0.0.1:{hung.getsockname()[1]}"),
                                                deadline=0.5)
        assert proposer.propose(Group(Scope("acme", "alice"), facts)) == []
        assert time.monotonic() - started < 1.5
    assert caplog.records and not [r for r in caplog.records if "risks" in r.getMessage().lower()]


def test_the_observation_proposer_logs_once_when_hindsight_goes_and_once_when_it_is_back(hindsight, caplog) -> None:
    """It logged a warning for every group on every round: a stopped Hindsight under bench/faults.py's
    load wrote 191 of them in 85 s."""
    from urllib.parse import urlsplit

    from tests.support.slow_proxy import SlowProxy

    upstream = urlsplit(hindsight.url)
    proxy = SlowProxy((upstream.hostname or "127.0.0.1", upstream.port or 80), mode="stall")
    caplog.set_level(logging.WARNING, logger="engram.insights")
    facts = (Fact(str(UUID(int=1)), 1, "Risks come first"), Fact(str(UUID(int=2)), 1, "Risks first again"))
    try:
        proposer = HindsightObservationProposer(HindsightClient(proxy.url, signing_key=SIGNING_KEY, timeout=1),
                                                deadline=0.3)
        for person in ("alice", "bob", "alice", "carol"):
            assert proposer.propose(Group(Scope("acme", person), facts)) == []
        proxy.mode = "pass"
        for person in ("alice", "bob"):
            assert proposer.propose(Group(Scope("acme", person), facts)) == []  # empty banks: nothing observed
    finally:
        proxy.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "engram.insights"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("hindsight observations unavailable (") and "risks" not in lines[0].lower()
    assert lines[1].startswith("hindsight observations available again after ")


def test_the_sync_backlog_is_counted_per_company(system, hindsight) -> None:
    from fastapi.testclient import TestClient

    from engram.api.http import create_app

    from tests.support.helpers import SECRET, auth

    remember(system, "The printer on floor 2 jams on Mondays")
    system.memories.remember(Caller("globex", "bob", "user"), text="The globex office closes at six", source=SOURCE,
                             occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None)
    assert system.syncer.sync() == 2
    system.syncer.client = HindsightClient("http://127.0.0.1:9", timeout=1)  # down: the next wish waits
    remember(system, "Badges are renewed in May")
    assert system.syncer.sync() == 0
    with TestClient(create_app(system, SECRET)) as client:
        def backlog(company: str) -> dict[str, int]:
            r = client.get("/v1/admin/status", headers=auth(company=company, user="root", role="admin"))
            assert r.status_code == 200, r.text
            return r.json()["backlogs"]["hindsight_sync"]

        assert backlog("acme") == {"done": 1, "pending": 1}
        assert backlog("globex") == {"done": 1}  # another company's wishes are not counted, nor shown
        assert backlog("initech") == {}
        metrics = client.get("/metrics").text
    assert 'engram_hindsight_sync{state="pending"} 1' in metrics and 'engram_hindsight_sync{state="done"} 2' in metrics
    assert system.operations.hindsight_backlogs() == {"acme": {"done": 1, "pending": 1}, "globex": {"done": 1}}
    assert system.syncer.backlog() == {"done": 2, "pending": 1}  # every company's, as the syncer sees them
