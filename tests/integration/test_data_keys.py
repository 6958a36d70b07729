"""A new aggregate's data key is made in memory, seals its first events as made and is stored in their
transaction (ADR 0033): one commit, no key without its events, no fetch of what was just made; saves
arriving while another commits share the next transaction, and each keeps its own outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from engram.contract.responses import CandidateOut, MemoryOut
from engram.domain.errors import Conflict, MemoryForgotten
from engram.domain.memory import Memory
from engram.domain.scope import Caller, Scope

from tests.support.helpers import counted_exchange

ALICE = Caller("acme", "alice", "bot", bot="b-1")


def rows(engram: Any, query: str, *params: Any) -> list[dict[str, Any]]:
    with engram.store.datastore.get_connection() as conn:
        return list(conn.execute(query, params).fetchall())


def remember(engram: Any, text: str, message: str = "m-1") -> MemoryOut | CandidateOut:
    result: MemoryOut | CandidateOut = engram.memories.remember(
        ALICE, text=text, source={"kind": "chat", "id": "chat-7", "message_id": message}, occurred_at=None,
        visibility="general", team=None, valid_from=None, valid_to=None)
    return result


def new_memory(text: str, id: UUID | None = None) -> Memory:
    return Memory.remember(id=id or uuid4(), scope=Scope("acme", "alice"), source={"kind": "chat", "id": "chat-7"},
                           text=text, evidence=[{"quote": text}], valid_from=None, valid_to=None, actor="alice",
                           at=datetime(2026, 11, 2, 9, 0, tzinfo=UTC))


@contextmanager
def round_trips() -> Iterator[list[int]]:
    """Counts the exchanges with the server, as bench/writes.py does."""
    count = [0]
    original = psycopg.Connection.wait

    def wait(conn: Any, gen: Any, *a: Any, **k: Any) -> Any:
        return original(conn, counted_exchange(gen, lambda: count.__setitem__(0, count[0] + 1)), *a, **k)

    psycopg.Connection.wait = wait  # type: ignore[method-assign]
    try:
        yield count
    finally:
        psycopg.Connection.wait = original  # type: ignore[method-assign]


@pytest.fixture
def acme(engram: Any) -> Any:
    engram.governance.put_directory(Caller("acme", "root", "admin"), {"bots": {"b-1": {}}})
    return engram


def test_a_remembered_memory_and_its_key_commit_in_one_transaction(acme: Any) -> None:
    memory = remember(acme, "I keep my bicycle, kestrel-5521, in the shed")
    key = rows(acme, "SELECT xmin::text AS tx, master_id FROM engram_data_keys WHERE key_id = %s", memory.id)
    event = rows(acme, "SELECT xmin::text AS tx FROM engram_events WHERE originator_id = %s", memory.id)
    assert len(key) == 1 and len(event) == 1
    assert key[0]["tx"] == event[0]["tx"]  # written by the same transaction
    assert key[0]["master_id"] == acme.master.id  # wrapped by the current master key


def test_a_batch_of_receipts_and_their_keys_commit_together(acme: Any) -> None:
    messages = [{"receipt_id": f"k-{i}", "author": "user", "kind": "message", "text": f"note {i} about the wren",
                 "occurred_at": None, "source": {"kind": "chat", "id": "chat-7", "message_id": f"k-{i}"},
                 "visibility": "general", "team": None} for i in range(5)]
    acme.learning.receive_many(ALICE, messages)
    found = rows(acme, "SELECT DISTINCT k.xmin::text AS key_tx, e.xmin::text AS event_tx FROM engram_data_keys k "
                       "JOIN engram_events e ON e.originator_id = k.key_id WHERE e.topic LIKE %s", "%Receipt%")
    assert len(found) == 1 and found[0]["key_tx"] == found[0]["event_tx"]
    assert rows(acme, "SELECT count(*) AS n FROM engram_data_keys")[0]["n"] == 5


def test_a_save_that_fails_leaves_no_key_and_keeps_the_first_key(acme: Any) -> None:
    first = remember(acme, "I water the ferns, plover-2207, on Sundays")
    key_before = acme.store.keys.get(first.id)
    fresh = new_memory("a memory that must not be stored")
    again = new_memory("the same id again", id=UUID(first.id))  # its version 1 is taken: the save is refused
    with pytest.raises(Conflict):
        acme.ledger.create(fresh, again, company="acme")
    assert rows(acme, "SELECT 1 FROM engram_data_keys WHERE key_id = %s", fresh.id) == []
    assert acme.store.keys.get(first.id) == key_before  # not replaced by the refused save's key
    stored = acme.ledger.get(UUID(first.id), Memory)
    assert stored is not None and stored.current["text"] == "I water the ferns, plover-2207, on Sundays"


def test_an_id_whose_key_was_destroyed_gets_no_key_and_no_event(acme: Any) -> None:
    gone = uuid4()  # destroyed, not in this process's fence: the database refuses it
    with acme.store.datastore.transaction(commit=True) as curs:
        curs.execute("INSERT INTO engram_destroyed_keys (key_id, company, destroyed_at) VALUES (%s, 'acme', now())",
                     (gone,))
    events = acme.store.recorder.max_notification_id()
    with pytest.raises(MemoryForgotten):
        acme.ledger.create(new_memory("never stored", id=gone), company="acme")
    assert rows(acme, "SELECT 1 FROM engram_data_keys WHERE key_id = %s", gone) == []
    assert acme.store.recorder.max_notification_id() == events


def test_a_key_left_without_events_by_an_older_version_is_replaced(acme: Any) -> None:
    """Before keys were stored with their events, a key committed on its own and a save failing after it
    left the key behind; the same remember again (same id) is stored, readable, under a new key."""
    memory = new_memory("I take the 8:15 train, avocet-3319")
    orphan = acme.store.keys.create(memory.id, "acme")
    assert orphan is not None
    acme.ledger.create(memory, company="acme")
    key = acme.store.keys.get(memory.id)
    assert key is not None and key != orphan
    stored = acme.ledger.get(memory.id, Memory)
    assert stored is not None and stored.current["text"] == "I take the 8:15 train, avocet-3319"


def test_a_new_key_is_not_fetched_back_and_a_fetch_is_one_round_trip(acme: Any) -> None:
    keys = acme.store.keys
    memory = new_memory("I read before sleeping, grebe-6640")
    made = keys.new(memory.id, "acme")
    fetched: list[Any] = []
    original = keys.get_many
    keys.get_many = lambda ids: fetched.append(ids) or original(ids)
    try:
        acme.store.save(memory, keys=[made])
    finally:
        keys.get_many = original
    assert fetched == []  # sealed with the key as made
    with round_trips() as count:
        assert keys.get_many([memory.id]) == {str(memory.id): made.secret}
    assert count[0] == 1  # one statement, no BEGIN/ROLLBACK around it


def _held_commit(acme: Any) -> tuple[threading.Event, threading.Event, Any]:
    """The next lone insert waits inside its transaction until released: writes arriving meanwhile queue
    for the group commit. Returns (entered, release, restore)."""
    group = acme.store.recorder.group_commit
    alone, entered, release = group._alone, threading.Event(), threading.Event()

    def held(write: Any) -> Any:
        group._alone = alone
        entered.set()
        release.wait(10)
        return alone(write)

    group._alone = held
    return entered, release, lambda: setattr(group, "_alone", alone)


def _queue_behind_a_held_commit(acme: Any, first: Any, others: list[Any]) -> list[Any]:
    """Run `first` (its commit held), then `others` in threads until all have queued, then release;
    each call's result or exception, in order."""
    entered, release, restore = _held_commit(acme)
    results: list[Any] = [None] * (1 + len(others))

    def run(i: int, call: Any) -> None:
        try:
            results[i] = call()
        except Exception as e:  # noqa: BLE001 - the test looks at each
            results[i] = e

    threads = [threading.Thread(target=run, args=(0, first))]
    try:
        threads[0].start()
        assert entered.wait(10)
        threads += [threading.Thread(target=run, args=(i + 1, c)) for i, c in enumerate(others)]
        for t in threads[1:]:
            t.start()
        deadline = time.monotonic() + 10
        while acme.store.recorder.group_commit.queued() < len(others) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert acme.store.recorder.group_commit.queued() == len(others)
    finally:
        release.set()
        for t in threads:
            t.join(30)
        restore()
    return results


def test_writes_arriving_during_a_commit_share_the_next_transaction(acme: Any) -> None:
    texts = [f"I keep jar {i} of honey, bunting-41{i}, in the pantry" for i in range(7)]
    results = _queue_behind_a_held_commit(acme, lambda: remember(acme, "the first, alone", "m-0"),
                                          [lambda t=t, i=i: remember(acme, t, f"m-{i + 1}") for i, t in enumerate(texts)])
    assert all(isinstance(r, MemoryOut | CandidateOut) and not r.existing for r in results)
    ids = [r.id for r in results[1:]]
    events = rows(acme, "SELECT DISTINCT xmin::text AS tx FROM engram_events WHERE originator_id = ANY(%s::uuid[])", ids)
    keys = rows(acme, "SELECT DISTINCT xmin::text AS tx FROM engram_data_keys WHERE key_id = ANY(%s::uuid[])", ids)
    assert len(events) == 1 and keys == events  # seven saves, one transaction, keys with them
    assert rows(acme, "SELECT xmin::text AS tx FROM engram_events WHERE originator_id = %s", results[0].id) != events
    for r, text in zip(results[1:], texts, strict=True):  # each visible, with its own text, when it returned
        assert acme.memories.get(ALICE, r.id).text == text


def test_one_bad_write_in_a_shared_commit_fails_only_itself(acme: Any) -> None:
    taken = remember(acme, "I park on level 3, curlew-8812", "m-taken")
    gone = uuid4()
    with acme.store.datastore.transaction(commit=True) as curs:
        curs.execute("INSERT INTO engram_destroyed_keys (key_id, company, destroyed_at) VALUES (%s, 'acme', now())",
                     (gone,))
    good = [new_memory(f"a good memory {i}, dunlin-20{i}") for i in range(2)]
    results = _queue_behind_a_held_commit(acme, lambda: remember(acme, "the first, alone", "m-0"), [
        lambda: acme.ledger.create(good[0], company="acme"),
        lambda: acme.ledger.create(new_memory("lost a race", id=UUID(taken.id)), company="acme"),
        lambda: acme.ledger.create(new_memory("forgotten", id=gone), company="acme"),
        lambda: acme.ledger.create(good[1], company="acme"),
    ])
    assert isinstance(results[2], Conflict) and isinstance(results[3], MemoryForgotten)
    for memory in good:
        stored = acme.ledger.get(memory.id, Memory)
        assert stored is not None and stored.current["text"] == memory.current["text"]
    assert rows(acme, "SELECT 1 FROM engram_events WHERE originator_id = %s", gone) == []
    first = acme.ledger.get(UUID(taken.id), Memory)
    assert first is not None and first.current["text"] == "I park on level 3, curlew-8812"


def test_the_same_remember_twice_in_one_shared_commit_answers_the_first_memory(acme: Any) -> None:
    text = "I like my tea without sugar, godwit-5150"
    results = _queue_behind_a_held_commit(acme, lambda: remember(acme, "the first, alone", "m-0"),
                                          [lambda: remember(acme, text, "m-same"), lambda: remember(acme, text, "m-same")])
    a, b = results[1], results[2]
    assert isinstance(a, MemoryOut | CandidateOut) and isinstance(b, MemoryOut | CandidateOut) and a.id == b.id
    assert sorted(r.existing for r in (a, b)) == [False, True]
    assert len(rows(acme, "SELECT 1 FROM engram_events WHERE originator_id = %s", a.id)) == 1
