"""`engram backup`, `restore`, `import` and `migrate`: the commands that move data in and out."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from engram.adapters.database import Database
from engram.adapters.migrations import SchemaTooNew, database_status, migrate_database
from engram.domain.clock import Clock
from engram.service.backups import Backups, catalog_of
from engram.service.key_rotation import KeyRotation

from .bootstrap import Engram
from .builders import master_keys
from .cli_support import load_settings, one_shot_database, progress_bar

log = logging.getLogger("engram")


def cmd_backup(args: argparse.Namespace) -> int:
    engram = Engram.open(load_settings(), background=False)
    try:
        assert engram.backups is not None
        record = engram.backups.take(Path(args.dir), engram.database, engram.operations.fence.journal, engram.store.keys)
        print(f"backup {record.id} written to {record.path} ({record.size} bytes, schema version "
              f"{record.schema_version}); catalogued in {engram.backups.catalog.path}")
    finally:
        engram.close()
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Counts and line numbers on stdout (one JSON object), never any text; 2 when the file is refused."""
    import json
    from pathlib import Path

    from engram.domain.errors import DomainError

    path = Path(args.file)
    if not path.is_file():
        raise ValueError(f"{args.file}: no such file")
    engram = Engram.open(load_settings(), background=False)
    try:
        assert engram.importer is not None
        try:
            report = engram.importer.run(path, args.company)
        except DomainError as e:
            print(f"engram import: {e.detail}", file=sys.stderr)
            return 2
    finally:
        engram.close()
    print(json.dumps(report.as_dict()))
    if report.refused:
        print(f"engram import: refused, nothing imported: {report.refused} record(s) cannot be imported "
              "(see problems: line numbers and codes)", file=sys.stderr)
        return 2
    if report.aborted:
        print(f"engram import: stopped at {report.aborted}; what was imported before stays, and importing "
              "the file again skips it", file=sys.stderr)
        return 1
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    if args.dir is None and not args.fence:
        raise ValueError("say which backup to restore (engram restore DIR), or --fence after restoring one yourself")
    merged = 0
    if args.dir is not None:
        settings = load_settings()
        backups = Backups(catalog_of(settings), settings, Clock())
        record = backups.restorable(Path(args.dir), master_keys(settings).ids)  # refused before the database is touched
        with one_shot_database() as database:
            _publish_pending_tombstones(settings, database)  # the database about to be replaced may hold some
            backups.restore_database(record, database)
            print(f"database restored from backup {record.id} (taken {record.taken_at.isoformat()})", file=sys.stderr)
            engram = Engram.open(settings, database=database, background=False, fenced=False)
            try:
                merged = backups.merge_tombstones(record, engram.operations.fence)
                if engram.operations.purge is not None:  # what was answered purged stays purged (ADR 0060)
                    engram.operations.purge.resettle()
                _fence(engram, merged)
                _rewrap(engram)
            finally:
                engram.close()
        return 0
    engram = Engram.open(load_settings(), background=False, fenced=False)
    try:
        _fence(engram, merged)
    finally:
        engram.close()
    return 0


def _rewrap(engram: Engram) -> None:
    """A restored backup may hold keys wrapped by a previous master key: re-wrap them now (ADR 0030)."""
    run = KeyRotation(engram.store.keys, engram.master.id, ()).rotate()
    if run.rewrapped or run.root_rewrapped:
        print(f"re-wrapped {run.rewrapped} data keys of the backup under the current master key {engram.master.id}")


def _publish_pending_tombstones(settings: Any, database: Database) -> None:
    """Copy the outbox's unpublished tombstones to the journal before the database is replaced."""
    try:
        engram = Engram.open(settings, database=database, background=False, fenced=False)
    except Exception as e:  # noqa: BLE001 - a database too broken to open has nothing to publish
        print(f"engram restore: the current database could not be read ({type(e).__name__}); "
              "restoring anyway", file=sys.stderr)
        return
    try:
        assert engram.publisher is not None
        published = engram.publisher.publish_pending()
        if published:
            print(f"{published} tombstone(s) of the current database published to the journal first", file=sys.stderr)
    finally:
        engram.close()


def _fence(engram: Engram, merged: int) -> None:
    counts = engram.operations.restore_fence(progress_bar("rebuild"))
    print(f"fence applied: {counts['tombstones']} tombstones ({merged} added from the backup), "
          f"{counts['keys_destroyed']} keys destroyed, {counts['events_appended']} events appended; "
          "projections rebuilt")
    if "hindsight_unreachable" in counts:
        print("hindsight: unreachable, deleted documents not checked; `engram serve` audits them "
              "(ENGRAM_HINDSIGHT_AUDIT_INTERVAL)")
    if "hindsight_checked" in counts:
        print(f"hindsight: {counts['hindsight_checked']} deleted documents checked, "
              f"{counts['hindsight_found_again']} found again, {counts['hindsight_deleted_again']} deleted again "
              "(the others are retried by `engram serve`)")


def cmd_migrate(args: argparse.Namespace) -> int:
    with one_shot_database() as database:
        if args.status:
            state = database_status(database.conninfo)
            print(f"schema version {state.version} (this Engram knows up to {state.latest})")
            for m in state.pending:
                print(f"pending {m.label}")
            if state.too_new:
                raise SchemaTooNew(state.version, state.latest)
            return 0
        done = migrate_database(database.conninfo)
        print(f"schema version before: {done.before}")
        for m in done.applied:
            print(f"applied {m.label}")
        print(f"schema version after: {done.after}")
    return 0
