"""Backups and forgetting: which backups may still hold a forgotten memory, and until when.

A backup holds the event store and the key store as they were when it was taken, so it can still
open a memory forgotten afterwards. A forget's `backups` copy is therefore purged only once every
backup that may hold the memory's key is deleted; retention deletes each one when it ages out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

# A forget is stamped before it commits (retries, lock waits): a backup begun this soon after the
# stamp may still have seen the memory's key, so it counts as taken before the forget.
IN_FLIGHT = timedelta(minutes=5)


@dataclass(frozen=True)
class BackupRecord:
    """One catalogued backup: ids, times, sizes and where it is; never anything it contains."""

    id: str
    taken_at: datetime  # read before the dump's snapshot: the dump holds nothing committed later
    path: str
    size: int
    schema_version: int
    deleted_at: datetime | None = None

    def ages_out(self, retention: timedelta) -> datetime:
        return self.taken_at + retention

    def may_hold(self, requested_at: datetime) -> bool:
        """Whether this backup may hold what a forget requested at `requested_at` destroyed."""
        return self.taken_at < requested_at + IN_FLIGHT


@dataclass(frozen=True)
class BackupsCopy:
    """A forget's `backups` copy: its state, the evidence in words, and when it was purged."""

    state: str  # "pending" | "purged"
    evidence: str
    purged_at: datetime | None


def due(records: Iterable[BackupRecord], retention: timedelta, now: datetime) -> list[BackupRecord]:
    """Backups retention deletes now: aged out and not deleted yet."""
    return [r for r in records if r.deleted_at is None and r.ages_out(retention) <= now]


def backups_copy(records: Iterable[BackupRecord], requested_at: datetime, retention: timedelta) -> BackupsCopy:
    older = [r for r in records if r.may_hold(requested_at)]
    kept = [r for r in older if r.deleted_at is None]
    if kept:
        last = max(r.ages_out(retention) for r in kept)
        n = len(kept)
        return BackupsCopy("pending", f"{n} backup{'s' if n != 1 else ''} taken before the forget; "
                                      f"the last ages out on {last.date().isoformat()}", None)
    if older:
        deleted = [r.deleted_at for r in older if r.deleted_at is not None]
        last_deleted = max(deleted)
        n = len(older)
        return BackupsCopy("purged", f"{n} backup{'s' if n != 1 else ''} taken before the forget, all deleted "
                                     f"by retention; the last on {last_deleted.date().isoformat()}", last_deleted)
    return BackupsCopy("purged", "no backup was taken before the forget", requested_at)
