"""Backups and forgetting: which backups may still hold a forgotten memory, and until when.

A backup holds the event store and the key store as they were when its dump's snapshot was taken, so
it can still open a memory forgotten afterwards. A forget's `backups` copy is therefore purged only
once every backup that may hold the memory's key is deleted; retention deletes each one when it ages
out. Which backups may hold it is decided on the database's clock (ADR 0060): a backup whose dump
began after the forget was seen committed cannot hold its key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

# Without both database times (a catalog entry or a forget recorded before ADR 0060): a forget is
# stamped before it commits (retries, lock waits), so a backup begun this soon after the stamp may
# still have seen the memory's key, and counts as taken before the forget.
IN_FLIGHT = timedelta(minutes=5)

RETENTION = "retention"
UNFINISHED = "unfinished"  # a backup whose taker died: its files are deleted, it never becomes restorable


@dataclass(frozen=True)
class BackupRecord:
    """One catalogued backup: ids, times, sizes and where it is; never anything it contains."""

    id: str
    taken_at: datetime  # read before the dump's snapshot: the dump holds nothing committed later
    path: str
    size: int
    schema_version: int
    deleted_at: datetime | None = None
    # the database's clock, read after the backup was catalogued as started and before its dump's
    # snapshot: the dump holds every commit before it and may hold those up to its snapshot
    snapshot_at: datetime | None = None
    finished: bool = True  # False: being taken (or its taker died before the sweeper noticed)
    deleted_by: str = RETENTION

    def ages_out(self, retention: timedelta) -> datetime:
        return self.taken_at + retention

    def exact_for(self, committed_by: datetime | None) -> bool:
        return self.snapshot_at is not None and committed_by is not None

    def may_hold(self, requested_at: datetime, committed_by: datetime | None = None) -> bool:
        """Whether this backup may hold what a forget requested at `requested_at`, seen committed at
        `committed_by` (the database's clock), destroyed."""
        if self.snapshot_at is not None and committed_by is not None:
            return self.snapshot_at < committed_by
        if not self.finished:
            return True  # its snapshot time is not known yet
        return self.taken_at < requested_at + IN_FLIGHT


@dataclass(frozen=True)
class BackupsCopy:
    """A forget's `backups` copy: its state, the evidence in words, and when it was purged."""

    state: str  # "pending" | "purged"
    evidence: str
    purged_at: datetime | None


def due(records: Iterable[BackupRecord], retention: timedelta, now: datetime) -> list[BackupRecord]:
    """Backups retention deletes now: finished, aged out and not deleted yet."""
    return [r for r in records if r.finished and r.deleted_at is None and r.ages_out(retention) <= now]


def _backups(n: int) -> str:
    return f"{n} backup{'s' if n != 1 else ''}"


def backups_copy(records: Iterable[BackupRecord], requested_at: datetime, retention: timedelta,
                 committed_by: datetime | None = None) -> BackupsCopy:
    holding = [r for r in records if r.may_hold(requested_at, committed_by)]
    exact = all(r.exact_for(committed_by) for r in holding if r.finished)
    before = "taken before the forget" + (" was recorded" if exact else " or within 5 minutes of it")
    kept = [r for r in holding if r.deleted_at is None]
    if kept:
        done, taking = [r for r in kept if r.finished], [r for r in kept if not r.finished]
        parts = []
        if done:
            last = max(r.ages_out(retention) for r in done)
            parts.append(f"{_backups(len(done))} {before}; the last ages out on {last.date().isoformat()}")
        if taking:
            begun = all(r.exact_for(committed_by) for r in taking)
            parts.append(f"{_backups(len(taking))} being taken" + (", begun before the forget was recorded" if begun else ""))
        return BackupsCopy("pending", "; ".join(parts), None)
    if holding:
        last_deleted = max(r.deleted_at for r in holding if r.deleted_at is not None)
        how = "by retention" if all(r.deleted_by == RETENTION for r in holding) else "(by retention, or unfinished)"
        return BackupsCopy("purged", f"{_backups(len(holding))} {before}, all deleted {how}; "
                                     f"the last on {last_deleted.date().isoformat()}", last_deleted)
    return BackupsCopy("purged", "no backup was taken before the forget was recorded", requested_at)
