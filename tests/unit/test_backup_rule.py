"""A forget's `backups` copy: pending while a backup that may hold the memory is kept, with the date
the last of them ages out; purged when retention has deleted them all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engram.domain.backup import IN_FLIGHT, BackupRecord, backups_copy, due

RETENTION = timedelta(days=30)
FORGET = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def backup(n: int, taken_at: datetime, deleted_at: datetime | None = None) -> BackupRecord:
    return BackupRecord(f"bk-{n}", taken_at, f"/backups/{n}", 1000, 3, deleted_at)


def test_no_backup_before_the_forget_is_purged_at_the_request() -> None:
    later = [backup(1, FORGET + IN_FLIGHT), backup(2, FORGET + timedelta(days=3))]
    for records in ([], later):
        copy = backups_copy(records, FORGET, RETENTION)
        assert (copy.state, copy.purged_at) == ("purged", FORGET)
        assert copy.evidence == "no backup was taken before the forget"


def test_kept_older_backups_keep_it_pending_until_the_last_ages_out() -> None:
    records = [backup(1, datetime(2026, 11, 1, tzinfo=UTC)), backup(2, datetime(2026, 11, 20, 3, tzinfo=UTC)),
               backup(3, datetime(2026, 10, 25, tzinfo=UTC), deleted_at=datetime(2026, 11, 24, tzinfo=UTC)),
               backup(4, FORGET + timedelta(days=1))]
    copy = backups_copy(records, FORGET, RETENTION)
    assert (copy.state, copy.purged_at) == ("pending", None)
    assert copy.evidence == "2 backups taken before the forget; the last ages out on 2026-12-20"


def test_a_backup_begun_while_the_forget_may_not_have_committed_counts() -> None:
    copy = backups_copy([backup(1, FORGET + IN_FLIGHT - timedelta(seconds=1))], FORGET, RETENTION)
    assert copy.state == "pending" and copy.evidence.startswith("1 backup taken before the forget;")


def test_purged_when_retention_deleted_every_older_backup() -> None:
    first, last = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 19, 6, tzinfo=UTC)
    records = [backup(1, datetime(2026, 11, 1, tzinfo=UTC), deleted_at=first),
               backup(2, datetime(2026, 11, 19, tzinfo=UTC), deleted_at=last)]
    copy = backups_copy(records, FORGET, RETENTION)
    assert (copy.state, copy.purged_at) == ("purged", last)
    assert copy.evidence == "2 backups taken before the forget, all deleted by retention; the last on 2026-12-19"


def test_due_are_the_aged_out_ones_not_yet_deleted() -> None:
    now = datetime(2026, 12, 15, tzinfo=UTC)
    records = [backup(1, now - RETENTION), backup(2, now - RETENTION + timedelta(seconds=1)),
               backup(3, now - timedelta(days=40), deleted_at=now - timedelta(days=10))]
    assert [r.id for r in due(records, RETENTION, now)] == ["bk-1"]
