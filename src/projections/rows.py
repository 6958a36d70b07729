"""Writing a view's rows: the difference to apply, plain and nested upserts, and COPY for a rebuild's fill."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Identifier


def difference(rows: dict[Any, dict[str, Any]], read: dict[Any, dict[str, Any]]) -> tuple[list[Any], list[dict[str, Any]]]:
    """A set-based batch's rows against the rows it read (rows are replaced, never changed in place):
    the keys of rows read that went or changed, and the rows that are new or changed."""
    gone = [k for k, row in read.items() if rows.get(k) is not row]
    return gone, [row for k, row in rows.items() if read.get(k) is not row]


def write_nested(curs: Cursor[Any], table: str, columns: Sequence[str], rows: dict[Any, dict[Any, dict[str, Any]]],
                 read: dict[Any, dict[Any, dict[str, Any]]], key: Sequence[tuple[str, str]]) -> None:
    """`write_rows` for rows kept by owner then by a second key (a memory's revisions, its citations)."""
    gone: list[tuple[Any, ...]] = []
    written: list[dict[str, Any]] = []
    for owner, own in rows.items():
        went, new = difference(own, read.get(owner, {}))
        gone += [(owner, k) for k in went]
        written += new
    write_rows(curs, table, columns, written, gone, key)


def write_rows(curs: Cursor[Any], table: str, columns: Sequence[str], rows: Sequence[dict[str, Any]],
               gone: Sequence[tuple[Any, ...]] = (), key: Sequence[tuple[str, str]] = ()) -> None:
    """Delete the rows whose `key` ((column, type) each) is in `gone`, then COPY `rows` in."""
    if gone:
        names = ", ".join(f"%s::{kind}[]" for _, kind in key)
        match = " AND ".join(f"t.{column} = g.k{i}" for i, (column, _) in enumerate(key))
        curs.execute(f"DELETE FROM {table} t USING unnest({names}) AS g({', '.join(f'k{i}' for i in range(len(key)))}) "
                     f"WHERE {match}", [[g[i] for g in gone] for i in range(len(key))])
    if rows:
        copy_in(curs, table, columns, ([row[c] for c in columns] for row in rows))


# a table's column types, read once: binary COPY needs them
_COLUMN_TYPES: dict[tuple[str, tuple[str, ...]], list[int]] = {}


def copy_in(curs: Cursor[Any], table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """COPY `rows` (values in `columns`' order) into `table` in PostgreSQL's binary format, which costs
    this process about a quarter of the text format's CPU a row (no quoting, no bytea hex, no uuid or
    timestamp text). Binary needs each column's type: read from the catalog once a process, for the
    table the search path names (a rebuild's shadow tables have the serving tables' types)."""
    key = (table, tuple(columns))
    types = _COLUMN_TYPES.get(key)
    if types is None:
        curs.execute("SELECT attname, atttypid::int AS oid FROM pg_attribute "
                     "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped", (table,))
        found = {r["attname"]: r["oid"] for r in curs.fetchall()}
        types = _COLUMN_TYPES[key] = [found[c] for c in columns]
    with curs.copy(SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            Identifier(table), SQL(", ").join(map(Identifier, columns)))) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)
