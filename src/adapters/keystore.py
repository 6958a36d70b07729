"""Per-memory data keys, wrapped by the master key, kept apart from the events.

Destroying a key row is what 'forget' means for every copy that only ever held
ciphertext under it: events, views, the write-ahead log and backups of those.
Its tables come from the numbered migrations (adapters/schema).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Container, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from eventsourcing.postgres import PostgresDatastore

from .crypto import MasterKey, new_data_key

log = logging.getLogger("engram.keys")

class KeyStore:
    def __init__(self, datastore: PostgresDatastore, master: MasterKey, fence: Container[str] = frozenset()) -> None:
        self.datastore = datastore
        self.master = master
        self.fence = fence  # tombstoned ids: even a restored database cannot hand their keys out
        self._batch = threading.local()

    @contextmanager
    def prefetched(self, key_ids: Iterable[Any]) -> Iterator[None]:
        """For one batch of projection work in this thread: fetch its keys in one query.
        Scoped to the batch, never shared across requests, so a forget is never served stale."""
        self._batch.keys = self.get_many(key_ids)
        try:
            yield
        finally:
            self._batch.keys = None

    def create(self, key_id: Any, company: str) -> None:
        if str(key_id) in self.fence:
            return
        key = new_data_key()
        with self.datastore.transaction(commit=True) as curs:
            # A destroyed key is never created again: a late job cannot revive a forgotten memory.
            curs.execute(
                "INSERT INTO engram_data_keys (key_id, company, wrapped) SELECT %s, %s, %s "
                "WHERE NOT EXISTS (SELECT 1 FROM engram_destroyed_keys WHERE key_id = %s) "
                "ON CONFLICT (key_id) DO NOTHING",
                (key_id, company, self.master.wrap(key, str(key_id)), key_id),
            )

    def get(self, key_id: Any) -> bytes | None:
        batch = getattr(self._batch, "keys", None)
        if batch is not None and str(key_id) in batch:
            return batch[str(key_id)]
        return self.get_many([key_id]).get(str(key_id))

    def get_many(self, key_ids: Iterable[Any]) -> dict[str, bytes]:
        ids = [k for k in {str(k) for k in key_ids} if k not in self.fence]
        if not ids:
            return {}
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                "SELECT key_id, wrapped FROM engram_data_keys WHERE key_id = ANY(%s::uuid[])", (ids,)
            )
            rows = curs.fetchall()
        return {str(r["key_id"]): self.master.unwrap(bytes(r["wrapped"]), str(r["key_id"])) for r in rows}

    def unwrap_row(self, key_id: Any, wrapped: bytes | None) -> bytes | None:
        """Unwrap a key fetched by a view query's join (saves a round trip on the hot path)."""
        if wrapped is None or str(key_id) in self.fence:
            return None
        return self.master.unwrap(bytes(wrapped), str(key_id))

    def destroy(self, key_id: Any, company: str, at: datetime) -> datetime:
        """Delete the key and note when; idempotent. Returns when it was destroyed."""
        with self.datastore.transaction(commit=True) as curs:
            self.destroy_in(curs, key_id, company, at)
            curs.execute("SELECT destroyed_at FROM engram_destroyed_keys WHERE key_id = %s", (key_id,))
            row = curs.fetchone()
        assert row is not None
        return row["destroyed_at"]

    @staticmethod
    def destroy_in(curs: Any, key_id: Any, company: str, at: datetime) -> None:
        """Destroy the key within the caller's transaction (a forget's, with its event)."""
        curs.execute("DELETE FROM engram_data_keys WHERE key_id = %s", (key_id,))
        curs.execute(
            "INSERT INTO engram_destroyed_keys (key_id, company, destroyed_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (key_id) DO NOTHING",
            (key_id, company, at),
        )

    def vacuum(self) -> None:
        """Reclaim the dead row versions that still hold destroyed wrapped keys. Best effort: the
        key is already unreachable; autovacuum gets to it otherwise."""
        try:
            with self.datastore.get_connection() as conn:
                conn.execute("VACUUM engram_data_keys")
        except Exception as e:  # noqa: BLE001
            log.warning("vacuum of the key table failed (%s)", type(e).__name__)


@contextmanager
def prefetched(keys: KeyStore | None, notes: Iterable[Any]) -> Iterator[None]:
    """The keys of a batch of stored events, fetched once for the batch (no-op without a key store)."""
    if keys is None:
        yield
        return
    with keys.prefetched({n.originator_id for n in notes}):
        yield
