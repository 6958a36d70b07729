"""A new aggregate's data key is made in memory, seals its first events as made and is stored in their
transaction (ADR 0033): one commit, no key without its events, no fetch of what was just made."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from engram.domain.errors import Conflict, MemoryForgotten
from engram.domain.memory import Memory
from engram.domain.scope import Caller, Scope

from helpers import counted_exchange

ALICE = Caller("acme", "alice", "bot", bot="b-1")


def rows(engram: Any, query: str, *params: Any) -> list[dict[str, Any]]:
    with engram.store.datastore.get_connection() as conn:
        return list(conn.execute(query, params).fetchall())


def remember(engram: Any, text: str, message: str = "m-1") -> dict[str, Any]:
    result: dict[str, Any] = engram.memories.remember(
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
    key = rows(acme, "SELECT xmin::text AS tx, master_id FROM engram_data_keys WHERE key_id = %s", memory["id"])
    event = rows(acme, "SELECT xmin::text AS tx FROM engram_events WHERE originator_id = %s", memory["id"])
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
    key_before = acme.store.keys.get(first["id"])
    fresh = new_memory("a memory that must not be stored")
    again = new_memory("the same id again", id=UUID(first["id"]))  # its version 1 is taken: the save is refused
    with pytest.raises(Conflict):
        acme.ledger.create(fresh, again, company="acme")
    assert rows(acme, "SELECT 1 FROM engram_data_keys WHERE key_id = %s", fresh.id) == []
    assert acme.store.keys.get(first["id"]) == key_before  # not replaced by the refused save's key
    stored = acme.ledger.get(UUID(first["id"]), Memory)
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
