"""Per-memory data keys, wrapped by the master key, kept apart from the events.

Destroying a key row is what 'forget' means for every copy that only ever held
ciphertext under it: events, views, the write-ahead log and backups of those.
Its tables come from the numbered migrations (adapters/schema). Each row names the master key that
wrapped it; a rotation re-wraps rows in short batches and never inserts one (ADR 0030). A new key is
made in memory, seals its aggregate's first events as made, and is stored in their transaction (ADR 0033).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from eventsourcing.postgres import PostgresDatastore

from .backups import SERVING_LOCK
from .crypto import DerivationRoot, MasterKeyMissing, MasterKeys, missing_message, new_data_key
from .new_keys import NewKey, created, creation

log = logging.getLogger("engram.keys")

# A serving process holds this advisory lock (shared), with its current master key's id, beside the
# serving lock: a rotation sees a process that would still wrap new keys under another master key.
WRAPPING_LOCK = 7_272_030
ROOT = "engram-derivation-root"  # the derivation root's wrapping is bound to this name, as a data key's to its id


class KeyStore:
    def __init__(self, datastore: PostgresDatastore, masters: MasterKeys, fence: Container[str] = frozenset()) -> None:
        self.datastore = datastore
        self.masters = masters
        self.fence = fence  # tombstoned ids: even a restored database cannot hand their keys out
        self._batch = threading.local()

    @contextmanager
    def prefetched(self, key_ids: Iterable[Any]) -> Iterator[None]:
        """For one batch of projection work in this thread: fetch its keys in one query.
        Scoped to the batch, never shared across requests, so a forget is never served stale."""
        with self._holding(self.get_many(key_ids)):
            yield

    @contextmanager
    def sealing(self, new: Sequence[NewKey], ids: Iterable[Any]) -> Iterator[None]:
        """For one save in this thread: the keys its events are sealed with. New keys are used as made
        (not fetched back); the others' are fetched in one query when there are several (one alone is
        fetched when the mapper asks for it)."""
        held = {k.key_id: k.secret for k in new}
        rest = {str(i) for i in ids} - held.keys()
        if len(rest) > 1:
            held.update(self.get_many(rest))
        with self._holding(held):
            yield

    @contextmanager
    def _holding(self, keys: dict[str, bytes]) -> Iterator[None]:
        before = getattr(self._batch, "keys", None)
        self._batch.keys = keys if before is None else {**before, **keys}
        try:
            yield
        finally:
            self._batch.keys = before

    def new(self, key_id: Any, company: str) -> NewKey | None:
        """A new data key, wrapped and not yet stored: `create_in` stores it in the transaction of the
        events it seals, so a key never outlives a save that failed. None for a tombstoned id."""
        if str(key_id) in self.fence:
            return None
        secret = new_data_key()
        wrapped, master_id = self.masters.wrap(secret, str(key_id))
        return NewKey(str(key_id), company, secret, wrapped, master_id)

    def create(self, key_id: Any, company: str) -> bytes | None:
        """Store a new key in a transaction of its own (an existing one is kept) and return the key in
        effect: None for a destroyed or tombstoned id. Writes go through `new` and `create_in` instead."""
        made = self.new(key_id, company)
        if made is None:
            return None
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(creation([made], replace=False))
        return self.get(key_id)

    @staticmethod
    def create_in(curs: Any, keys: Sequence[NewKey]) -> None:
        """Store new keys within the caller's transaction (the events they seal, saved at version 1)."""
        if keys:
            curs.execute(creation(keys, replace=True))
            created(keys, curs.fetchall())

    def get(self, key_id: Any) -> bytes | None:
        batch = getattr(self._batch, "keys", None)
        key_id = str(key_id)  # once: a projection asks this for every event it seals or unseals
        if batch is not None and key_id in batch:
            return batch[key_id]
        return self.get_many([key_id]).get(key_id)

    def get_many(self, key_ids: Iterable[Any]) -> dict[str, bytes]:
        """One statement, one round trip (no transaction around it)."""
        ids = [k for k in {str(k) for k in key_ids} if k not in self.fence]
        if not ids:
            return {}
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT key_id, wrapped, master_id FROM engram_data_keys WHERE key_id = ANY(%s::uuid[])", (ids,)
            ).fetchall()
        return {str(r["key_id"]): self.masters.unwrap(bytes(r["wrapped"]), str(r["key_id"]), r["master_id"])
                for r in rows}

    def unwrap_row(self, key_id: Any, wrapped: bytes | None) -> bytes | None:
        """Unwrap a key fetched by a view query's join (saves a round trip on the hot path)."""
        if wrapped is None or str(key_id) in self.fence:
            return None
        return self.masters.unwrap(bytes(wrapped), str(key_id))

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

    # -- the master keys: what they wrap, the derivation root, rotation (ADR 0030) ------------------

    def derivation_root(self) -> DerivationRoot:
        """The stored root, or on the first start of a database without one: the old derivation (the
        master key that wrapped its existing keys) or, for a new database, a random one. Whoever stores
        it first wins; everyone reads the stored one."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("SELECT wrapped, master_id FROM engram_derivation_root")
            row = curs.fetchone()
            if row is not None:
                return DerivationRoot(self.masters.unwrap(bytes(row["wrapped"]), ROOT, row["master_id"]))
            wrapped, master_id = self.masters.wrap(self._first_root(curs).secret, ROOT)
            curs.execute("INSERT INTO engram_derivation_root (wrapped, master_id) VALUES (%s, %s) "
                         "ON CONFLICT (one) DO NOTHING", (wrapped, master_id))
        return self.derivation_root()  # the stored one: `engram keys rotate` may have stored it meanwhile

    def _first_root(self, curs: Any) -> DerivationRoot:
        curs.execute("SELECT key_id, wrapped FROM engram_data_keys WHERE master_id IS NULL LIMIT 1")
        legacy = curs.fetchone()
        if legacy is not None:  # keys from before this release: their master key was the derivation
            holder = self.masters.holder(bytes(legacy["wrapped"]), str(legacy["key_id"]))
            if holder is None:
                raise MasterKeyMissing(missing_message(None))
            return holder.legacy_root()
        curs.execute("SELECT EXISTS (SELECT 1 FROM engram_data_keys) AS wrapped, "
                     "EXISTS (SELECT 1 FROM engram_destroyed_keys) AS destroyed")
        used = curs.fetchone()
        if used["wrapped"]:  # keys wrapped since the root was stored, and the root gone: never guess it
            raise MasterKeyMissing("the derivation root (engram_derivation_root) is missing from a database whose "
                                   "keys were wrapped since it was stored: restore the database from a backup")
        if not used["destroyed"]:
            return DerivationRoot.new()
        if self.masters.previous:  # every key destroyed: which one was in use before cannot be told
            raise MasterKeyMissing("this database holds no derivation root and no key that shows which master key "
                                   "it was used with: start it once with that master key as ENGRAM_MASTER_KEY and "
                                   "no ENGRAM_PREVIOUS_MASTER_KEYS, then rotate")
        return self.masters.current.legacy_root()

    def serving_locks(self) -> list[tuple[int, int]]:
        """The advisory lock a serving process holds to say which master key it wraps with."""
        return [(WRAPPING_LOCK, int(self.masters.current.id[:7], 16))]

    def wrapping_elsewhere(self) -> int:
        """Serving processes (serve, relay, worker) that do not wrap with this process's current master key."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                "SELECT count(DISTINCT s.pid) AS n FROM pg_locks s WHERE s.locktype = 'advisory' AND s.granted "
                "AND s.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND s.classid = 0 AND s.objid = %s AND s.objsubid = 1 AND NOT EXISTS ("
                " SELECT 1 FROM pg_locks w WHERE w.pid = s.pid AND w.locktype = 'advisory' AND w.granted"
                " AND w.classid = %s AND w.objid = %s AND w.objsubid = 2)",
                (SERVING_LOCK, *self.serving_locks()[0]))
            row = curs.fetchone()
        return int(row["n"]) if row is not None else 0

    def check_masters(self) -> None:
        """Refuse to start when a wrapped key needs a master key this process was not given: say which
        (by id) and how many rows need it."""
        known = self.masters.ids
        with self.datastore.transaction(commit=False) as curs:
            # each distinct id once, through the index (a skip scan): cheap on a large table
            curs.execute(
                "WITH RECURSIVE ids AS ("
                " (SELECT master_id FROM engram_data_keys WHERE master_id IS NOT NULL ORDER BY master_id LIMIT 1)"
                " UNION ALL SELECT (SELECT k.master_id FROM engram_data_keys k WHERE k.master_id > ids.master_id"
                "  ORDER BY k.master_id LIMIT 1) FROM ids WHERE ids.master_id IS NOT NULL)"
                " SELECT master_id FROM ids WHERE master_id IS NOT NULL AND NOT master_id = ANY(%s)", (known,))
            missing = [r["master_id"] for r in curs.fetchall()]
            problems = []
            if missing:
                curs.execute("SELECT master_id, count(*) AS n FROM engram_data_keys WHERE master_id = ANY(%s) "
                             "GROUP BY master_id ORDER BY master_id", (missing,))
                problems = [missing_message(r["master_id"], f"{r['n']} data keys are") for r in curs.fetchall()]
            curs.execute("SELECT master_id FROM engram_derivation_root WHERE NOT master_id = ANY(%s)", (known,))
            root = curs.fetchone()
            if root is not None:
                problems.append(missing_message(root["master_id"], "the derivation root is"))
            curs.execute("SELECT key_id, wrapped FROM engram_data_keys WHERE master_id IS NULL LIMIT 1")
            legacy = curs.fetchone()
        if legacy is not None and self.masters.holder(bytes(legacy["wrapped"]), str(legacy["key_id"])) is None:
            problems.append(missing_message(None))
        if problems:
            raise MasterKeyMissing("; ".join(problems))

    def rewrap(self, after: str, limit: int) -> tuple[int, int, str | None]:
        """Re-wrap under the current master key up to `limit` rows whose key id follows `after`, in one
        short transaction. Rows a forget holds are skipped (SKIP LOCKED) and found by the next pass;
        rows are only updated, never inserted, so a key destroyed meanwhile stays destroyed.
        Returns (rows re-wrapped, rows skipped as locked, the last key id looked at or None at the end)."""
        current = self.masters.current.id
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("SELECT key_id FROM engram_data_keys WHERE key_id > %s::uuid "
                         "AND master_id IS DISTINCT FROM %s ORDER BY key_id LIMIT %s", (after, current, limit))
            seen = [r["key_id"] for r in curs.fetchall()]
            if not seen:
                return 0, 0, None
            curs.execute("SELECT key_id, wrapped, master_id FROM engram_data_keys WHERE key_id = ANY(%s::uuid[]) "
                         "AND master_id IS DISTINCT FROM %s FOR UPDATE SKIP LOCKED", (seen, current))
            rows = curs.fetchall()
            updates = []
            for r in rows:
                key_id = str(r["key_id"])
                wrapped, master_id = self.masters.wrap(
                    self.masters.unwrap(bytes(r["wrapped"]), key_id, r["master_id"]), key_id)
                updates.append((wrapped, master_id, r["key_id"]))
            curs.executemany("UPDATE engram_data_keys SET wrapped = %s, master_id = %s WHERE key_id = %s", updates)
        return len(rows), len(seen) - len(rows), str(seen[-1])

    def rewrap_root(self) -> bool:
        """Re-wrap the derivation root under the current master key; True when it was under another."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("SELECT wrapped, master_id FROM engram_derivation_root FOR UPDATE")
            row = curs.fetchone()
            if row is None or row["master_id"] == self.masters.current.id:
                return False
            secret = self.masters.unwrap(bytes(row["wrapped"]), ROOT, row["master_id"])
            wrapped, master_id = self.masters.wrap(secret, ROOT)
            curs.execute("UPDATE engram_derivation_root SET wrapped = %s, master_id = %s", (wrapped, master_id))
        return True

    def wrapped_by(self) -> tuple[dict[str | None, int], str | None]:
        """How many data keys each master key wraps (None: before ids were recorded), and the root's."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT master_id, count(*) AS n FROM engram_data_keys GROUP BY master_id")
            counts = {r["master_id"]: int(r["n"]) for r in curs.fetchall()}
            curs.execute("SELECT master_id FROM engram_derivation_root")
            row = curs.fetchone()
        return counts, (row["master_id"] if row is not None else None)

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
