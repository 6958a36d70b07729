"""New data keys: made in memory for a new aggregate, they seal its first events as made and are
stored in the transaction of those events (ADR 0033), so a key never outlives a save that failed and a
write pays no transaction and no commit of its own for its key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg.sql import SQL, Composable, Composed, Literal

from engram.domain.errors import MemoryForgotten


@dataclass(frozen=True)
class NewKey:
    """A data key made for a new aggregate, to be stored with its first events (`KeyStore.create_in`)."""

    key_id: str
    company: str
    secret: bytes = field(repr=False)
    wrapped: bytes = field(repr=False)
    master_id: str


def key_rows(source: Composable, *, replace: bool) -> Composed:
    """The INSERT of new key rows read from `source` (rows named `k(key_id, company, wrapped,
    master_id)`). A destroyed key is never created again: a late job cannot revive a forgotten memory.
    With `replace`, a row already there is replaced: only a key stored by an earlier save that failed
    after its own commit (before keys were stored with their events) can be there without events, and
    the events' insert at version 1 fails, rolling the replacement back, whenever the id has events.
    RETURNING names the rows written."""
    conflict = SQL("DO UPDATE SET company = EXCLUDED.company, wrapped = EXCLUDED.wrapped, "
                   "master_id = EXCLUDED.master_id, created_at = now()" if replace else "DO NOTHING")
    return SQL("INSERT INTO engram_data_keys (key_id, company, wrapped, master_id) "
               "SELECT k.key_id, k.company, k.wrapped, k.master_id FROM {} "
               "WHERE NOT EXISTS (SELECT 1 FROM engram_destroyed_keys d WHERE d.key_id = k.key_id) "
               "ON CONFLICT (key_id) {} RETURNING key_id").format(source, conflict)


# `key_rows`' source as four array parameters, `as_arrays(keys)` (the event recorder's one statement)
ARRAYS = SQL("unnest(%s::uuid[], %s::text[], %s::bytea[], %s::text[]) AS k(key_id, company, wrapped, master_id)")


def as_arrays(keys: Sequence[NewKey]) -> tuple[list[Any], ...]:
    return ([k.key_id for k in keys], [k.company for k in keys], [k.wrapped for k in keys],
            [k.master_id for k in keys])


def creation(keys: Sequence[NewKey], *, replace: bool) -> Composed:
    """`key_rows` with its values inline: it can travel in one message with other statements."""
    rows = SQL(", ").join(SQL("({}::uuid, {}, {}::bytea, {})").format(
        Literal(k.key_id), Literal(k.company), Literal(k.wrapped), Literal(k.master_id)) for k in keys)
    return key_rows(SQL("(VALUES {}) AS k(key_id, company, wrapped, master_id)").format(rows), replace=replace)


def created(keys: Sequence[NewKey], rows: Iterable[Any]) -> None:
    """After `creation(replace=True)`: every key was written, or its id was forgotten and nothing about
    it may be saved (the transaction must not commit)."""
    written = {str(r["key_id"]) for r in rows}
    if any(k.key_id not in written for k in keys):
        raise MemoryForgotten("this memory was forgotten; nothing more can change it")
