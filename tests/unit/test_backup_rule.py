"""A forget's `backups` copy: pending while a backup that may hold the memory is kept, with the date
the last of them ages out; purged when retention has deleted them all. Which backups may hold it is
decided on the database's clock where both times are known (ADR 0060), else by the 5-minute rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engram.domain.backup import IN_FLIGHT, UNFINISHED, BackupRecord, backups_copy, due

RETENTION = timedelta(days=30)
FORGET = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def backup(n: int, taken_at: datetime, deleted_at: datetime | None = None) -> BackupRecord:
    return BackupRecord(f"bk-{n}", taken_at, f"/backups/{n}", 1000, 3, deleted_at)


def test_no_backup_before_the_forget_is_purged_at_the_request() -> None:
    later = [backup(1, FORGET + IN_FLIGHT), backup(2, FORGET + timedelta(days=3))]
    for records in ([], later):
        copy = backups_copy(records, FORGET, RETENTION)
        assert (copy.state, copy.purged_at) == ("purged", FORGET)
        assert copy.evidence == "no backup was taken before the forget was recorded"


def test_kept_older_backups_keep_it_pending_until_the_last_ages_out() -> None:
    records = [backup(1, datetime(2026, 11, 1, tzinfo=UTC)), backup(2, datetime(2026, 11, 20, 3, tzinfo=UTC)),
               backup(3, datetime(2026, 10, 25, tzinfo=UTC), deleted_at=datetime(2026, 11, 24, tzinfo=UTC)),
               backup(4, FORGET + timedelta(days=1))]
    copy = backups_copy(records, FORGET, RETENTION)
    assert (copy.state, copy.purged_at) == ("pending", None)
    assert copy.evidence == "2 backups taken before the forget or within 5 minutes of it; the last ages out on 2026-12-20"


def test_a_backup_begun_while_the_forget_may_not_have_committed_counts() -> None:
    copy = backups_copy([backup(1, FORGET + IN_FLIGHT - timedelta(seconds=1))], FORGET, RETENTION)
    assert copy.state == "pending" and copy.evidence.startswith("1 backup taken before the forget or within 5 minutes of it;")


def test_purged_when_retention_deleted_every_older_backup() -> None:
    first, last = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 19, 6, tzinfo=UTC)
    records = [backup(1, datetime(2026, 11, 1, tzinfo=UTC), deleted_at=first),
               backup(2, datetime(2026, 11, 19, tzinfo=UTC), deleted_at=last)]
    copy = backups_copy(records, FORGET, RETENTION)
    assert (copy.state, copy.purged_at) == ("purged", last)
    assert copy.evidence == ("2 backups taken before the forget or within 5 minutes of it, all deleted by "
                             "retention; the last on 2026-12-19")


def test_due_are_the_aged_out_ones_not_yet_deleted() -> None:
    now = datetime(2026, 12, 15, tzinfo=UTC)
    records = [backup(1, now - RETENTION), backup(2, now - RETENTION + timedelta(seconds=1)),
               backup(3, now - timedelta(days=40), deleted_at=now - timedelta(days=10))]
    assert [r.id for r in due(records, RETENTION, now)] == ["bk-1"]


# -- on the database's clock (ADR 0060) ---------------------------------------------------------------

COMMITTED = FORGET + timedelta(milliseconds=40)  # when the forget was seen committed


def exact(n: int, snapshot_at: datetime, *, finished: bool = True, deleted_at: datetime | None = None,
          deleted_by: str = "retention") -> BackupRecord:
    return BackupRecord(f"bk-{n}", snapshot_at - timedelta(milliseconds=5), f"/backups/{n}", 1000, 17, deleted_at,
                        snapshot_at=snapshot_at, finished=finished, deleted_by=deleted_by)


def test_a_backup_begun_after_the_forget_was_recorded_does_not_hold_it_even_a_second_later() -> None:
    for later in (timedelta(milliseconds=1), timedelta(seconds=1), timedelta(minutes=2)):
        copy = backups_copy([exact(1, COMMITTED + later)], FORGET, RETENTION, COMMITTED)
        assert (copy.state, copy.purged_at) == ("purged", FORGET)
        assert copy.evidence == "no backup was taken before the forget was recorded"


def test_a_backup_begun_before_it_was_recorded_holds_it_and_the_evidence_says_so() -> None:
    copy = backups_copy([exact(1, COMMITTED - timedelta(milliseconds=1)), exact(2, COMMITTED + timedelta(hours=1))],
                        FORGET, RETENTION, COMMITTED)
    assert (copy.state, copy.purged_at) == ("pending", None)
    assert copy.evidence == "1 backup taken before the forget was recorded; the last ages out on 2026-12-20"


def test_a_backup_being_taken_counts_when_it_began_before() -> None:
    taking = exact(1, COMMITTED - timedelta(seconds=3), finished=False)
    copy = backups_copy([taking], FORGET, RETENTION, COMMITTED)
    assert copy.state == "pending"
    assert copy.evidence == "1 backup being taken, begun before the forget was recorded"
    assert backups_copy([exact(1, COMMITTED + timedelta(seconds=1), finished=False)], FORGET, RETENTION,
                        COMMITTED).state == "purged"
    assert due([taking], timedelta(0), FORGET + timedelta(days=90)) == []  # retention never deletes one being taken


def test_a_backup_whose_taker_died_is_deleted_and_said_so() -> None:
    died = exact(1, COMMITTED - timedelta(seconds=3), finished=False, deleted_at=FORGET + timedelta(minutes=1),
                 deleted_by=UNFINISHED)
    copy = backups_copy([died], FORGET, RETENTION, COMMITTED)
    assert (copy.state, copy.purged_at) == ("purged", FORGET + timedelta(minutes=1))
    assert copy.evidence == ("1 backup taken before the forget was recorded, all deleted (by retention, or "
                             "unfinished); the last on 2026-11-20")


def test_without_the_forgets_database_time_the_five_minute_rule_stands() -> None:
    """A forget recorded before ADR 0060 has no committed_by: a backup 2 minutes later may hold it."""
    copy = backups_copy([exact(1, FORGET + timedelta(minutes=2))], FORGET, RETENTION, None)
    assert copy.state == "pending" and copy.evidence.startswith("1 backup taken before the forget or within 5 minutes")
