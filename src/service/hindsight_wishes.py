"""The Hindsight sync wishes' bookkeeping in the database (ADR 0018): claiming the next wish with a
lease on its memory, renewing and releasing that lease, and recording how each wish ended (done,
due again later, failed with a backoff)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from engram.projections.purge import HINDSIGHT, PurgeTracker

MAX_BACKOFF = timedelta(minutes=30)
RETAIN_DOUBT = timedelta(minutes=10)  # how long a retain Hindsight did not answer may still land
UNREACHABLE = "unreachable: "  # last_error of a wish that failed because no answer came at all


class LeaseLost(Exception):
    """Another syncer holds this memory now (this one was too slow): stop without touching Hindsight."""


class SyncWishes:
    """One syncer's view of the wish rows: `now` is its clock, `lease` how long a lease it takes."""

    def __init__(self, datastore: Any, purge: PurgeTracker, *, now: Callable[[], datetime],
                 lease: Callable[[], timedelta]) -> None:
        self.datastore = datastore
        self.purge = purge
        self.now = now
        self.lease = lease
        self.owner = uuid4().hex  # one per syncer: two in one process are still two owners

    # -- leases -----------------------------------------------------------------

    def claim(self, only: UUID | None = None) -> dict[str, Any] | None:
        """The next pending wish (deletes and withdrawals first) whose memory no syncer holds, leased;
        `only`: that memory's wish, if it is pending and free."""
        now = self.now()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "SELECT s.memory_id, s.action, s.revision, s.generation, s.forget_id, s.attempts, b.bank "
                "FROM engram_hindsight_sync s LEFT JOIN engram_hindsight_leases l USING (memory_id) "
                "LEFT JOIN engram_hindsight_banks b USING (memory_id) "
                "WHERE s.state = 'pending' AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= %(now)s) "
                "AND (l.lease_until IS NULL OR l.lease_until <= %(now)s) AND (%(only)s::uuid IS NULL OR s.memory_id = %(only)s) "
                "ORDER BY (s.action = 'retain'), s.changed_at LIMIT 8 FOR UPDATE OF s SKIP LOCKED",
                {"now": now, "only": only},
            )
            for row in list(curs.fetchall()):
                # A lease that expired unreleased belonged to a syncer that stopped mid-request: what it
                # sent may still land, so its expiry starts a doubt.
                curs.execute(
                    "INSERT INTO engram_hindsight_leases (memory_id, owner, lease_until) "
                    "VALUES (%(id)s, %(owner)s, %(until)s) ON CONFLICT (memory_id) DO UPDATE "
                    "SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, "
                    "retain_in_doubt_until = CASE WHEN engram_hindsight_leases.owner IS NULL "
                    "THEN engram_hindsight_leases.retain_in_doubt_until ELSE greatest("
                    "engram_hindsight_leases.retain_in_doubt_until, engram_hindsight_leases.lease_until + %(doubt)s) END "
                    "WHERE engram_hindsight_leases.lease_until IS NULL OR engram_hindsight_leases.lease_until <= %(now)s "
                    "RETURNING retain_in_doubt_until, deleted_at, facts_before",
                    {"id": row["memory_id"], "owner": self.owner, "until": now + self.lease(), "now": now,
                     "doubt": RETAIN_DOUBT},
                )
                lease = curs.fetchone()
                if lease is not None:  # another syncer may have leased it since this SELECT's snapshot
                    return {**row, **lease}
        return None

    def hold(self, memory_id: UUID, **marks: Any) -> None:
        """Renew the lease before a request that changes Hindsight (and record `marks` with it);
        LeaseLost when it is no longer this syncer's."""
        now = self.now()
        sets = "".join(f", {column} = %({column})s" for column in marks)
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                f"UPDATE engram_hindsight_leases SET lease_until = %(until)s{sets} "  # column names are ours
                "WHERE memory_id = %(id)s AND owner = %(owner)s AND lease_until > %(now)s",
                {"id": memory_id, "owner": self.owner, "until": now + self.lease(), "now": now, **marks},
            )
            if curs.rowcount != 1:
                raise LeaseLost(str(memory_id))

    def release(self, curs: Any, memory_id: UUID) -> None:
        curs.execute("UPDATE engram_hindsight_leases SET owner = NULL, lease_until = NULL "
                     "WHERE memory_id = %s AND owner = %s", (memory_id, self.owner))

    # -- outcomes ---------------------------------------------------------------

    def finish(self, row: dict[str, Any], *, evidence: str | None = None, purged_at: datetime | None = None) -> int:
        """Done, if the wish is still the one this syncer worked on (otherwise the newer one stays
        pending for the next claim); the lease is released either way. Returns 1 when done."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "UPDATE engram_hindsight_sync SET state = 'done', synced_at = %s, last_error = NULL, "
                "next_attempt_at = NULL WHERE memory_id = %s AND generation = %s AND state = 'pending'",
                (self.now(), row["memory_id"], row["generation"]),
            )
            done = curs.rowcount == 1
            if done and evidence and row["forget_id"]:
                self.purge.purged(curs, row["forget_id"], HINDSIGHT, evidence, purged_at or self.now())
            self.release(curs, row["memory_id"])
        return int(done)

    def later(self, row: dict[str, Any], at: datetime, why: str) -> int:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_hindsight_sync SET next_attempt_at = %s, last_error = %s "
                         "WHERE memory_id = %s AND generation = %s AND state = 'pending'",
                         (at, why, row["memory_id"], row["generation"]))
            self.release(curs, row["memory_id"])
        return 0

    def failed(self, row: dict[str, Any], error: BaseException | None) -> None:
        backoff = min(timedelta(seconds=2 ** min(row["attempts"], 11)), MAX_BACKOFF)
        with self.datastore.transaction(commit=True) as curs:
            if error is not None:
                curs.execute(
                    "UPDATE engram_hindsight_sync SET attempts = attempts + 1, next_attempt_at = %s, "
                    "last_error = %s WHERE memory_id = %s AND generation = %s AND state = 'pending'",
                    (self.now() + backoff, (UNREACHABLE if getattr(error, "outage", False) else "") + str(error)[:120],
                     row["memory_id"], row["generation"]),
                )
            self.release(curs, row["memory_id"])
