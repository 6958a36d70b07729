"""Numbered schema migrations for the tables events cannot rebuild: keys, budgets, the relay, leases,
partition tracking and the quarantine. Projection views are not here; they are rebuilt from events.

Each migration is a SQL file shipped in this package (`schema/NNNN_name.sql`). It runs once, in its
own transaction together with its row in `engram_schema_version`, under the advisory lock every
process takes before touching the schema. A database at a version newer than this code knows is
refused: the code was rolled back, and running it there could write rows the newer schema forbids.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg.rows import tuple_row

log = logging.getLogger("engram.migrations")

# The advisory lock every process takes before touching the schema: one changes it at a time.
SCHEMA_LOCK = 727274

VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS engram_schema_version (
    version int PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"


@dataclass(frozen=True)
class SchemaStatus:
    version: int  # 0: no version recorded (a new database, or one made before numbered migrations)
    latest: int  # the newest version this code knows
    pending: tuple[Migration, ...]

    @property
    def too_new(self) -> bool:
        return self.version > self.latest


@dataclass(frozen=True)
class Migrated:
    before: int
    after: int
    applied: tuple[Migration, ...]


class SchemaTooNew(Exception):
    """The database was migrated by a newer Engram than this one."""

    def __init__(self, found: int, known: int) -> None:
        self.found, self.known = found, known
        super().__init__(
            f"the database schema is at version {found}, newer than this Engram knows (up to {known}): "
            "a newer release migrated it. Run that release again, or restore the backup taken before the "
            "upgrade; this one does not start on it.")


def shipped() -> tuple[Migration, ...]:
    """The migrations in this package, by version; they must be numbered 1, 2, 3... without a gap."""
    found = []
    for entry in (resources.files("engram.adapters") / "schema").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"schema migrations must be numbered 1, 2, 3... without a gap: {[m.label for m in found]}")
    return tuple(found)


def status(conn: psycopg.Connection[Any], migrations: Sequence[Migration] | None = None) -> SchemaStatus:
    """Where the database stands; reads only."""
    known = tuple(shipped() if migrations is None else migrations)
    applied = _applied(conn)
    for m in known:
        if m.version in applied and applied[m.version] != m.name:
            log.warning("schema version %d is recorded as %r, this code calls it %r", m.version,
                        applied[m.version], m.name)
    return SchemaStatus(version=max(applied, default=0), latest=max((m.version for m in known), default=0),
                        pending=tuple(m for m in known if m.version not in applied))


def migrate(conn: psycopg.Connection[Any], migrations: Sequence[Migration] | None = None, *,
            lock_held: bool = False) -> Migrated:
    """Apply every pending migration, each in its own transaction with its version row.

    `conn` must be in autocommit mode. The schema lock is taken on it unless the caller already
    holds it on this connection (`lock_held`, inside `schema_lock`, as `Engram.open` does)."""
    if not conn.autocommit:
        raise ValueError("migrations need a connection in autocommit mode: each runs in its own transaction")
    with _schema_lock(conn, held=lock_held):
        conn.execute(VERSION_TABLE)
        before = status(conn, migrations)
        if before.too_new:
            raise SchemaTooNew(before.version, before.latest)
        for m in before.pending:
            with conn.transaction():
                conn.execute(m.sql.encode())  # the file's text as it is: no parameters, several statements
                conn.execute("INSERT INTO engram_schema_version (version, name) VALUES (%s, %s)", (m.version, m.name))
            log.info("schema migration %s applied", m.label)
        return Migrated(before.version, max([before.version, *(m.version for m in before.pending)]), before.pending)


def migrate_database(conninfo: str) -> Migrated:
    """`migrate` on a connection of its own (sessions without the request timeouts of the pool)."""
    with schema_lock(conninfo) as conn:
        return migrate(conn, lock_held=True)


@contextmanager
def schema_lock(conninfo: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own (autocommit) holding the schema lock until the block ends."""
    with psycopg.connect(conninfo, autocommit=True) as conn, _schema_lock(conn, held=False):
        yield conn


def database_status(conninfo: str) -> SchemaStatus:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return status(conn)


def _applied(conn: psycopg.Connection[Any]) -> dict[int, str]:
    with conn.cursor(row_factory=tuple_row) as curs:
        curs.execute("SELECT to_regclass('engram_schema_version') IS NOT NULL")
        row = curs.fetchone()
        if row is None or not row[0]:
            return {}
        curs.execute("SELECT version, name FROM engram_schema_version")
        return {int(version): str(name) for version, name in curs.fetchall()}


@contextmanager
def _schema_lock(conn: psycopg.Connection[Any], *, held: bool) -> Iterator[None]:
    if held:
        yield
        return
    conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
    try:
        yield
    finally:
        if not conn.closed:  # a lost session has released its lock already
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
