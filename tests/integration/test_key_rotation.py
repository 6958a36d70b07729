"""Rotating the master key (ADR 0030) on a real PostgreSQL, through the services' and the command's public
seams: every data key re-wrapped under the new key in batches, an interrupted rotation resumed, what was
forgotten stays forgotten (before, during and after), remember and import stay idempotent across it,
and a start without a master key still needed is refused naming the key, never showing one."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.rows import dict_row

from engram.adapters.crypto import MasterKey, MasterKeyMissing
from engram.api.bootstrap import Engram, key_rotation
from engram.api.http import create_app
from engram.service.key_rotation import KeyStatus

from tests.support.helpers import SECRET, auth

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SOURCE = {"kind": "chat", "id": "chat-42", "message_id": "m-1"}
TEA = "I like green tea in the morning"
CAT = "My cat is called Miso"
LIGHTHOUSE = "I like the lighthouse at Godrevy"


def new_key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def key_id(text: str) -> str:
    return MasterKey.from_text(text).id


@pytest.fixture
def opened(settings: Any, database: Any) -> Iterator[Any]:
    """Opens Engram on the test's database with the given current and previous master keys."""
    engrams: list[Engram] = []

    def open_(master: str, *previous: str) -> Engram:
        engram = Engram.open(settings.replace(master_key=master, previous_master_keys=previous), database=database,
                             background=False)
        engrams.append(engram)
        return engram

    yield open_
    for engram in engrams:
        engram.close()


def rotation(settings: Any, database: Any, master: str, *previous: str) -> Any:
    return key_rotation(settings.replace(master_key=master, previous_master_keys=previous), database)


def status(settings: Any, database: Any, master: str, *previous: str) -> KeyStatus:
    with rotation(settings, database, master, *previous) as r:
        return r.status()


def rows(database: Any, query: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(database.conninfo, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(query, params).fetchall()


def execute(database: Any, statement: str) -> None:
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


def api(engram: Engram) -> TestClient:
    return TestClient(create_app(engram, SECRET))


def remember(client: TestClient, text: str, message_id: str = "m-1") -> Any:
    return client.post("/v1/memories", headers=auth(), json={
        "text": text, "explicit": True, "source": {**SOURCE, "message_id": message_id},
        "occurred_at": "2026-11-02T09:00:00+08:00", "visibility": "general"})


def recalled(client: TestClient, query: str) -> list[str]:
    r = client.post("/v1/recall", headers=auth(), json={"query": query})
    assert r.status_code == 200, r.text
    return [item["text"] for item in r.json()["items"]]


def import_file(tmp_path: Path, *texts: str) -> Path:
    import json

    path = tmp_path / "prior.jsonl"
    path.write_text("".join(json.dumps({"company": "acme", "person": "alice", "text": t, "occurred_at":
                                        "2021-03-04T09:30:00+01:00", "source": {"kind": "chat", "id": "chat-7",
                                                                                 "message_id": f"i-{i}"}}) + "\n"
                            for i, t in enumerate(texts)))
    return path


def test_a_rotation_rewraps_every_key_and_leaves_memories_forgets_and_ids_as_they_were(
        opened: Any, settings: Any, database: Any, tmp_path: Path) -> None:
    old, new = settings.master_key, new_key()
    before = opened(old)
    with api(before) as client:
        tea = remember(client, TEA)
        assert tea.status_code == 201
        cat = remember(client, CAT, "m-2").json()["id"]
        for i in range(20):
            assert remember(client, f"I visited the museum number {i}", f"m-museum-{i}").status_code == 201
        assert client.post(f"/v1/memories/{cat}/forget", headers=auth()).status_code == 202
    assert before.importer is not None
    imported = before.importer.run(import_file(tmp_path, LIGHTHOUSE), "acme").as_dict()
    assert imported["imported"] == 1
    forgotten_before = rows(database, "SELECT key_id FROM engram_destroyed_keys")
    before.close()

    # the new key is current, the old one still accepted; nothing re-wrapped yet
    state = status(settings, database, new, old)
    assert state.wrapped_by == {key_id(old): 22} and state.remaining == 22 and not state.done
    with rotation(settings, database, new, old) as r:
        run = r.rotate(batch_size=5)
    assert (run.rewrapped, run.batches, run.root_rewrapped) == (22, 5, True)
    assert run.status.wrapped_by == {key_id(new): 22} and run.status.done
    assert run.status.root == key_id(new)
    with rotation(settings, database, new, old) as r:
        assert r.rotate().rewrapped == 0  # again: nothing left, nothing changed

    after = opened(new)  # the old key is no longer needed
    with api(after) as client:
        assert recalled(client, "green tea") == [TEA]
        again = remember(client, TEA)
        assert again.status_code == 200 and again.json()["id"] == tea.json()["id"]  # the first memory, no other
        assert again.json()["text"] == TEA
        assert client.get(f"/v1/memories/{cat}", headers=auth()).json()["text"] is None
        assert recalled(client, "cat Miso") == []
        assert rows(database, "SELECT key_id FROM engram_destroyed_keys") == forgotten_before
        assert rows(database, "SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s", cat)[0]["n"] == 0

        forgotten = client.post(f"/v1/memories/{tea.json()['id']}/forget", headers=auth())
        assert forgotten.status_code == 202
        assert recalled(client, "green tea") == []
        purge = client.get(f"/v1/forgets/{forgotten.json()['forget_id']}", headers=auth()).json()
        assert purge["status"] == "purge_complete", purge
        assert rows(database, "SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s",
                    tea.json()["id"])[0]["n"] == 0
        fresh = remember(client, "I cycle to the harbour", "m-3")
        assert fresh.status_code == 201 and recalled(client, "cycle harbour") == ["I cycle to the harbour"]
    assert after.importer is not None
    again_imported = after.importer.run(import_file(tmp_path, LIGHTHOUSE), "acme").as_dict()
    assert (again_imported["imported"], again_imported["duplicates"]) == (0, 1)
    assert rows(database, "SELECT master_id, count(*) AS n FROM engram_data_keys GROUP BY master_id") == [
        {"master_id": key_id(new), "n": 22}]  # 22 - tea + the new memory


def test_an_interrupted_rotation_serves_meanwhile_resumes_and_until_done_needs_the_old_key(
        opened: Any, settings: Any, database: Any) -> None:
    old, new = settings.master_key, new_key()
    first = opened(old)
    with api(first) as client:
        texts = {remember(client, f"I planted tulip bulb number {i}", f"m-{i}").json()["id"]:
                 f"I planted tulip bulb number {i}" for i in range(12)}
    first.close()

    with rotation(settings, database, new, old) as r:
        run = r.rotate(batch_size=4, max_batches=2)  # stopped half-way, as a crash between batches would
    assert run.rewrapped == 8 and run.status.wrapped_by == {key_id(new): 8, key_id(old): 4}
    assert run.status.remaining == 4

    during = opened(new, old)  # a restarted service reads keys under either
    gone = str(rows(database, "SELECT key_id FROM engram_data_keys WHERE master_id = %s LIMIT 1",
                    key_id(old))[0]["key_id"])
    with api(during) as client:
        assert sorted(recalled(client, "tulip bulb")) == sorted(texts.values())
        assert remember(client, "I planted a rose", "m-rose").status_code == 201
        assert client.post(f"/v1/memories/{gone}/forget", headers=auth()).status_code == 202
    during.close()

    with pytest.raises(MasterKeyMissing) as refused:  # without the old key: refused, naming it, never showing it
        opened(new)
    message = str(refused.value)
    assert f"3 data keys are wrapped by master key {key_id(old)}" in message
    assert "ENGRAM_PREVIOUS_MASTER_KEYS" in message
    assert old.rstrip("=") not in message and new.rstrip("=") not in message

    with rotation(settings, database, new, old) as r:
        resumed = r.rotate(batch_size=4)
    assert resumed.rewrapped == 3 and resumed.status.done  # the last 4 less the one forgotten meanwhile
    assert resumed.status.wrapped_by == {key_id(new): 12}
    with api(opened(new)) as client:
        assert sorted(recalled(client, "tulip bulb")) == sorted(t for i, t in texts.items() if i != gone)
    with pytest.raises(MasterKeyMissing) as refused:  # and the old key alone cannot read the new one's
        opened(old)
    assert f"12 data keys are wrapped by master key {key_id(new)}" in str(refused.value)
    assert "the derivation root is wrapped by" in str(refused.value)


def test_a_forget_during_a_rotation_is_never_undone(opened: Any, settings: Any, database: Any) -> None:
    old, new = settings.master_key, new_key()
    first = opened(old)
    with api(first) as client:
        ids = [remember(client, f"I keep notebook number {i}", f"m-{i}").json()["id"] for i in range(60)]
    first.close()
    engram = opened(new, old)  # serving during the rotation

    doomed = ids[::3]
    errors: list[BaseException] = []
    started, first_forgotten = threading.Event(), threading.Event()

    def forget_all() -> None:
        try:
            started.wait(10)
            for memory_id in doomed:
                engram.memories.forget(caller(), memory_id)
                first_forgotten.set()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def progress(done: int) -> None:
        if done == 10:  # a sixth of the way: let the forgets begin, and go on once one has committed
            started.set()
            assert first_forgotten.wait(30)

    forgetter = threading.Thread(target=forget_all)
    forgetter.start()
    with rotation(settings, database, new, old) as r:
        run = r.rotate(batch_size=1, progress=progress)
        forgets_meanwhile = sum(1 for i in doomed if rows(database, "SELECT 1 FROM engram_destroyed_keys "
                                                                    "WHERE key_id = %s", i))
    forgetter.join(60)

    assert errors == [] and run.status.done
    assert 1 <= forgets_meanwhile  # at least one forget committed while the rotation ran
    left = {str(r["key_id"]) for r in rows(database, "SELECT key_id FROM engram_data_keys")}
    assert left == set(ids) - set(doomed)  # no forgotten key came back, every other one is there
    destroyed = {str(r["key_id"]) for r in rows(database, "SELECT key_id FROM engram_destroyed_keys")}
    assert destroyed == set(doomed)
    engram.close()
    done = opened(new)
    for i, memory_id in enumerate(ids):
        text = done.memories.get(caller(), memory_id).text
        assert text == (None if memory_id in doomed else f"I keep notebook number {i}")


def test_a_rotation_waits_until_every_running_process_wraps_with_the_new_key(
        opened: Any, settings: Any, database: Any) -> None:
    from engram.adapters.backups import serving
    from engram.service.key_rotation import RotationRefused

    old, new = settings.master_key, new_key()
    not_restarted = opened(old)
    with api(not_restarted) as client:
        assert remember(client, TEA).status_code == 201
    with serving(database.conninfo, not_restarted.store.keys.serving_locks()):  # as `engram serve` does
        with rotation(settings, database, new, old) as r:
            assert r.status().wrapping_elsewhere == 1
            with pytest.raises(RotationRefused, match=f"1 running Engram process.*master key {key_id(new)}"):
                r.rotate()
        assert status(settings, database, new, old).wrapped_by == {key_id(old): 1}  # nothing moved
    restarted = opened(new, old)
    with serving(database.conninfo, restarted.store.keys.serving_locks()):
        with rotation(settings, database, new, old) as r:
            assert r.status().wrapping_elsewhere == 0
            assert r.rotate().status.done


def test_a_row_a_forget_holds_is_skipped_then_found_gone(opened: Any, settings: Any, database: Any) -> None:
    old, new = settings.master_key, new_key()
    engram = opened(old)
    with api(engram) as client:
        held, other = (remember(client, f"I paint the fence {c}", f"m-{c}").json()["id"] for c in "ab")
    with psycopg.connect(database.conninfo) as forget:  # a forget in flight: its key's row deleted, not committed
        forget.execute("DELETE FROM engram_data_keys WHERE key_id = %s", (held,))
        with rotation(settings, database, new, old) as r:
            partial = r.rotate(max_batches=1)
        assert partial.rewrapped == 1 and partial.status.remaining == 1  # the held row was skipped, not waited on
        forget.commit()
    with rotation(settings, database, new, old) as r:
        assert r.rotate().status.done
    assert [str(r["key_id"]) for r in rows(database, "SELECT key_id FROM engram_data_keys")] == [other]


def test_a_database_from_before_key_ids_keeps_its_derivations(opened: Any, settings: Any, database: Any) -> None:
    old, new = settings.master_key, new_key()
    engram = opened(old)
    with api(engram) as client:
        assert remember(client, TEA).status_code == 201
    engram.close()
    # as a database made before migration 0012 was: no key ids, no stored root
    execute(database, "UPDATE engram_data_keys SET master_id = NULL; DELETE FROM engram_derivation_root")

    state = status(settings, database, new, old)
    assert state.wrapped_by == {None: 1} and state.root is None and not state.done
    upgraded = opened(new, old)  # a new key chosen at the same time: the root is still the old derivation
    assert upgraded.importer is not None
    assert upgraded.importer.id_key("acme") == MasterKey.from_text(old).legacy_root().import_key("acme")
    upgraded.close()
    with rotation(settings, database, new, old) as r:
        assert r.rotate().status.done
    assert opened(new).importer.id_key("acme") == MasterKey.from_text(old).legacy_root().import_key("acme")


def caller() -> Any:
    from engram.domain.scope import Caller

    return Caller("acme", "alice", "user")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database: Any) -> Path:
    """The environment `engram` reads: this test's database and data directory, no master key (the key file)."""
    for name in list(os.environ):
        if name.startswith("ENGRAM_") and name != "ENGRAM_TEST_DATABASE_URL":
            monkeypatch.delenv(name)
    for name, value in {"DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": database.conninfo,
                        "TOKEN_SECRET": SECRET, "POLL_INTERVAL": "0.2", "DB_POOL_SIZE": "4"}.items():
        monkeypatch.setenv(f"ENGRAM_{name}", value)
    return tmp_path / "data"


def test_the_key_file_is_rotated_on_the_command_line_printing_ids_and_counts_only(
        env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.api.cli import main
    from engram.service.settings import Settings

    first = Engram.open(Settings(), background=False)  # the embedded default: DATA_DIR/master.key
    with api(first) as client:
        for i in range(3):
            assert remember(client, f"I water the basil {i}", f"m-{i}").status_code == 201
    first.close()
    old = (env / "master.key").read_text()

    assert main(["keys", "new"]) == 0
    new = (env / "master.key").read_text()
    assert (env / "master.key.previous").read_text().split() == [old]
    assert main(["keys", "status"]) == 1  # not done yet
    assert main(["keys", "rotate", "--batch-size", "2"]) == 0
    assert main(["keys", "status"]) == 0
    out, err = capsys.readouterr()
    assert f"previous one ({key_id(old)}) is kept in master.key.previous" in out
    assert f"master key {key_id(old)} (previous): 3 data keys" in out
    assert f"re-wrapped 3 data keys and the derivation root under master key {key_id(new)} in 2 batches" in out
    assert f"master key {key_id(new)} (current): 3 data keys" in out
    assert out.splitlines()[-2:] == ["derivation root: under the current master key",
                                     "remaining under other master keys: 0 data keys"]
    for key in (old, new):
        assert key.rstrip("=") not in out + err

    (env / "master.key.previous").unlink()  # once every backup taken before has aged out (ADR 0030)
    after = Engram.open(Settings(), background=False)
    try:
        with api(after) as client:
            assert len(recalled(client, "water basil")) == 3
    finally:
        after.close()

    assert main(["keys", "rotate", "--batch-size", "0"]) == 2
    monkeypatch.setenv("ENGRAM_MASTER_KEY", new_key())
    capsys.readouterr()
    assert main(["keys", "new"]) == 2  # the key comes from the environment: the operator generates it
    assert "ENGRAM_PREVIOUS_MASTER_KEYS" in capsys.readouterr().err


def test_a_backup_from_before_a_rotation_is_restored_with_the_previous_key_then_rewrapped(
        env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        database: Any) -> None:
    import json

    from engram.api.cli import main
    from engram.service.settings import Settings

    old, new = new_key(), new_key()
    monkeypatch.setenv("ENGRAM_MASTER_KEY", old)
    before = Engram.open(Settings(), background=False)
    with api(before) as client:
        tea = remember(client, TEA).json()["id"]
        cat = remember(client, CAT, "m-2").json()["id"]
    before.close()
    backup = tmp_path / "backups" / "before-rotation"
    assert main(["backup", str(backup)]) == 0
    assert json.loads((backup / "manifest.json").read_text())["master_keys"] == [key_id(old)]

    monkeypatch.setenv("ENGRAM_MASTER_KEY", new)
    monkeypatch.setenv("ENGRAM_PREVIOUS_MASTER_KEYS", old)
    assert main(["keys", "rotate"]) == 0
    rotated = Engram.open(Settings(), background=False)
    with api(rotated) as client:
        assert client.post(f"/v1/memories/{cat}/forget", headers=auth()).status_code == 202
    rotated.close()

    monkeypatch.delenv("ENGRAM_PREVIOUS_MASTER_KEYS")  # the old key retired too early
    capsys.readouterr()
    assert main(["restore", str(backup)]) == 2
    err = capsys.readouterr().err
    assert f"wrapped by master key {key_id(old)}, which is not configured" in err and old.rstrip("=") not in err
    assert rows(database, "SELECT count(*) AS n FROM engram_data_keys WHERE key_id = %s", cat)[0]["n"] == 0

    monkeypatch.setenv("ENGRAM_PREVIOUS_MASTER_KEYS", old)
    assert main(["restore", str(backup)]) == 0
    out = capsys.readouterr().out
    assert f"re-wrapped 1 data keys of the backup under the current master key {key_id(new)}" in out
    assert rows(database, "SELECT key_id::text AS k, master_id FROM engram_data_keys") == [
        {"k": tea, "master_id": key_id(new)}]  # the forgotten one's key destroyed again by the fence

    monkeypatch.delenv("ENGRAM_PREVIOUS_MASTER_KEYS")  # the restored database needs only the new key
    restored = Engram.open(Settings(), background=False)
    try:
        with api(restored) as client:
            assert recalled(client, "green tea") == [TEA]
            assert client.get(f"/v1/memories/{cat}", headers=auth()).json()["text"] is None
    finally:
        restored.close()


def test_a_root_that_cannot_be_told_is_never_guessed(opened: Any, settings: Any, database: Any) -> None:
    old, new = settings.master_key, new_key()
    engram = opened(old)
    with api(engram) as client:
        memory = remember(client, TEA).json()["id"]
    assert engram.memories.forget(caller(), memory).status == "stopped_using"

    engram.close()
    # as a database from before 0012 whose every memory was forgotten: no key shows its master key
    execute(database, "DELETE FROM engram_derivation_root")
    with pytest.raises(MasterKeyMissing, match="start it once with that master key"):
        opened(new, old)
    alone = opened(old)  # with its one key, as the message says: that key was the derivation
    assert alone.importer.id_key("acme") == MasterKey.from_text(old).legacy_root().import_key("acme")
    with api(alone) as client:
        assert remember(client, CAT, "m-2").status_code == 201
    alone.close()

    execute(database, "DELETE FROM engram_derivation_root")  # lost, though keys were wrapped since it was stored
    with pytest.raises(MasterKeyMissing, match="derivation root .* is missing"):
        opened(old)
