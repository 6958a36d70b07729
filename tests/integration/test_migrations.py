"""Numbered schema migrations on a real PostgreSQL: fresh, upgraded from the unversioned schema, repeated,
concurrent, refused when the database is newer than the code, and through `engram migrate`."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.rows import dict_row

from engram.adapters.crypto import MasterKey, new_data_key
from engram.adapters.kafka_relay import Relay
from engram.adapters.migrations import Migration, SchemaTooNew, migrate, migrate_database, schema_lock, shipped
from engram.api.bootstrap import Engram
from engram.api.cli import main
from engram.api.http import create_app

from tests.support.helpers import SECRET, auth, remember_body

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BEFORE_VERSIONS = Path(__file__).parent / "fixtures" / "schema_before_versions.sql"
LATEST = shipped()[-1].version


def rows(database: Any, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with psycopg.connect(database.conninfo, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(query, params).fetchall()


def execute(database: Any, statement: str | bytes, params: tuple[Any, ...] | None = None) -> None:
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        conn.execute(statement, params)  # type: ignore[arg-type]


def versions(database: Any) -> list[tuple[int, str]]:
    return [(r["version"], r["name"]) for r in rows(database, "SELECT version, name FROM engram_schema_version "
                                                              "ORDER BY version")]


def exists(database: Any, table: str) -> bool:
    return bool(rows(database, "SELECT to_regclass(%s) IS NOT NULL AS found", (table,))[0]["found"])


def test_a_fresh_database_migrates_to_the_latest_version_once_each(database: Any) -> None:
    done = migrate_database(database.conninfo)

    assert (done.before, done.after) == (0, LATEST)
    assert versions(database) == [(m.version, m.name) for m in shipped()]
    assert [m.label for m in shipped()][:2] == ["0001_baseline", "0002_relay_row"]
    for table in ("engram_data_keys", "engram_destroyed_keys", "engram_budget_days", "engram_budget_reservations",
                  "engram_usage_ledger", "engram_relay", "engram_inbox_leases", "engram_partition_tracking",
                  "engram_quarantine"):
        assert exists(database, table), table
    assert rows(database, "SELECT relay, position, epoch FROM engram_relay") == [
        {"relay": "main", "position": 0, "epoch": 1}]
    assert not exists(database, "engram_memories")  # projection views stay with their projections


def test_a_database_made_before_versions_is_adopted_with_its_rows(database: Any, settings: Any) -> None:
    execute(database, BEFORE_VERSIONS.read_bytes())
    master = MasterKey.from_text(settings.master_key)
    key_id, gone_id, data_key = uuid.uuid4(), uuid.uuid4(), new_data_key()
    day = date(2026, 11, 2)
    execute(database, "INSERT INTO engram_data_keys (key_id, company, wrapped) VALUES (%s, 'acme', %s)",
            (key_id, master.wrap(data_key, str(key_id))))
    execute(database, "INSERT INTO engram_destroyed_keys VALUES (%s, 'acme', %s)",
            (gone_id, datetime(2026, 11, 1, tzinfo=UTC)))
    execute(database, "INSERT INTO engram_budget_days VALUES ('acme', '', %s, 1200, 3), ('acme', 'alice', %s, 400, 1)",
            (day, day))
    execute(database, "UPDATE engram_relay SET position = 42, epoch = 3 WHERE relay = 'main'")
    execute(database, "INSERT INTO engram_partition_tracking VALUES ('recall', 0, 40), ('recall', 1, 41)")
    execute(database, "INSERT INTO engram_purge_copies VALUES ('fg-1', 'hindsight', 'purged', 'document gone', now())")
    assert not exists(database, "engram_schema_version")

    engram = Engram.open(settings, database=database, background=False)
    try:
        assert versions(database) == [(m.version, m.name) for m in shipped()]
        assert engram.store.keys.get(key_id) == data_key
        engram.store.keys.create(gone_id, "acme")  # a destroyed key stays destroyed
        assert engram.store.keys.get(gone_id) is None
        assert engram.learning.budget.today("acme", day) == {"tokens": 1200, "calls": 3, "failed_calls": 0}
        assert rows(database, "SELECT position, epoch FROM engram_relay WHERE relay = 'main'") == [
            {"position": 42, "epoch": 3}]
        assert rows(database, "SELECT count(*) AS n FROM engram_partition_tracking")[0]["n"] == 2
        # Hindsight's purge evidence is not rebuilt from events: it survives the upgrade
        assert rows(database, "SELECT copy, evidence FROM engram_purge_copies") == [
            {"copy": "hindsight", "evidence": "document gone"}]

        with TestClient(create_app(engram, SECRET)) as client:  # and it serves on the adopted schema
            assert client.post("/v1/memories", json=remember_body("I like tea"), headers=auth()).status_code == 201
    finally:
        engram.close()


def test_migrating_again_changes_nothing(database: Any) -> None:
    migrate_database(database.conninfo)
    first = rows(database, "SELECT version, applied_at FROM engram_schema_version ORDER BY version")

    again = migrate_database(database.conninfo)

    assert (again.before, again.after, again.applied) == (LATEST, LATEST, ())
    assert rows(database, "SELECT version, applied_at FROM engram_schema_version ORDER BY version") == first


def test_two_migrators_at_once_apply_each_migration_once(database: Any) -> None:
    start = threading.Barrier(2)
    applied: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            start.wait()
            applied.append([m.label for m in migrate_database(database.conninfo).applied])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert errors == []
    assert sorted(applied, key=len) == [[], [m.label for m in shipped()]]
    assert versions(database) == [(m.version, m.name) for m in shipped()]


def test_the_migrator_waits_for_the_lock_every_starting_process_takes(database: Any) -> None:
    done: list[int] = []
    with schema_lock(database.conninfo):
        waiter = threading.Thread(target=lambda: done.append(migrate_database(database.conninfo).after))
        waiter.start()
        deadline = time.monotonic() + 30
        while not rows(database, "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                                 "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"):
            assert time.monotonic() < deadline, "the migrator never waited for the schema lock"
            time.sleep(0.05)
        assert done == [] and not exists(database, "engram_schema_version")
    waiter.join(timeout=60)
    assert done == [LATEST]


def test_a_failing_migration_leaves_neither_its_changes_nor_its_version(database: Any) -> None:
    baseline = shipped()[0]
    broken = Migration(2, "broken", "CREATE TABLE engram_half_done (x int); SELECT 1 / 0;")
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            migrate(conn, [baseline, broken])
    assert versions(database) == [(1, "baseline")]
    assert not exists(database, "engram_half_done")

    assert migrate_database(database.conninfo).applied == shipped()[1:]


def test_a_database_newer_than_the_code_is_refused(database: Any, settings: Any) -> None:
    migrate_database(database.conninfo)
    execute(database, "INSERT INTO engram_schema_version (version, name) VALUES (%s, 'from_a_newer_release')",
            (LATEST + 1,))

    with pytest.raises(SchemaTooNew, match=f"version {LATEST + 1}, newer than this Engram knows"):
        Engram.open(settings, database=database, background=False)
    assert not exists(database, "engram_memories")  # refused before anything else was created
    with pytest.raises(SchemaTooNew):
        migrate_database(database.conninfo)


def test_the_relay_gets_its_table_and_row_through_the_migrator(engram: Any, database: Any) -> None:
    execute(database, "DELETE FROM engram_schema_version WHERE version = 2; DELETE FROM engram_relay")
    relay = Relay(engram.store.recorder, engram.store.datastore, "127.0.0.1:9", 2, ["recall"])

    relay.ensure_schema()

    assert (2, "relay_row") in versions(database) and len(versions(database)) == LATEST
    assert (relay.position(), relay.epoch()) == (0, 1)


def test_engram_migrate_on_the_command_line(database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", database.conninfo)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path))
    labels = [m.label for m in shipped()]

    assert main(["migrate", "--status"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"schema version 0 (this Engram knows up to {LATEST})",
                                                    *(f"pending {label}" for label in labels)]
    assert not exists(database, "engram_schema_version")  # --status changes nothing

    assert main(["migrate"]) == 0
    assert capsys.readouterr().out.splitlines() == ["schema version before: 0", *(f"applied {label}" for label in labels),
                                                    f"schema version after: {LATEST}"]
    assert main(["migrate"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"schema version before: {LATEST}",
                                                    f"schema version after: {LATEST}"]
    assert main(["migrate", "--status"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"schema version {LATEST} (this Engram knows up to {LATEST})"]

    execute(database, "INSERT INTO engram_schema_version (version, name) VALUES (%s, 'from_a_newer_release')",
            (LATEST + 1,))
    assert main(["migrate"]) == 2
    err = capsys.readouterr().err
    assert f"engram: the database schema is at version {LATEST + 1}, newer than this Engram knows" in err
    assert "Traceback" not in err
    assert main(["migrate", "--status"]) == 2
    assert f"at version {LATEST + 1}" in capsys.readouterr().err


def test_the_recall_terms_key_comes_to_cover_its_rows_in_place(database: Any) -> None:
    """0013 rebuilds the recall terms' key with the rest of the row in it, keeping the rows (no replay)."""
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        migrate(conn, [m for m in shipped() if m.version < 13])
        conn.execute("""CREATE TABLE engram_recall_terms (
            company text NOT NULL, person text NOT NULL, term bigint NOT NULL, memory_id uuid NOT NULL,
            revision int NOT NULL, tf int NOT NULL, doc_len int NOT NULL, visibility text NOT NULL, team text,
            source_blind text, answer_from timestamptz, answer_to timestamptz,
            PRIMARY KEY (company, person, term, memory_id, revision))""")  # as the view made it before 0013
        memory = uuid.uuid4()
        conn.execute("INSERT INTO engram_recall_terms VALUES ('acme', 'ann', 7, %s, 1, 2, 9, 'general', NULL, NULL, "
                     "NULL, NULL)", (memory,))
        done = migrate(conn)
    assert [m.version for m in done.applied] == [m.version for m in shipped() if m.version >= 13]
    [key] = rows(database, "SELECT pg_get_indexdef(i.indexrelid) AS d FROM pg_index i "
                           "WHERE i.indrelid = 'engram_recall_terms'::regclass AND i.indisprimary")
    assert key["d"].endswith("(company, person, term, memory_id, revision) "
                             "INCLUDE (tf, doc_len, visibility, team, source_blind, answer_from, answer_to)")
    assert rows(database, "SELECT memory_id, tf, doc_len FROM engram_recall_terms") == [
        {"memory_id": memory, "tf": 2, "doc_len": 9}]
