"""`engram backup DIR`, `engram restore DIR` and retention (ADR 0016).

A backup is the whole database (event store, key store, every migrated table) as `pg_dump` saw it,
plus the tombstone journal as it was when the dump had finished. The catalog records each one,
content-free, beside the journal. A restore puts the database back, adds the backup's tombstones
to the journal (tombstones are only ever added) and always ends with the tombstone fence, so no
restore brings back what was forgotten. Retention deletes backups once they age out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

from engram.adapters.backups import (
    DUMP,
    FILES,
    MANIFEST,
    TOMBSTONES,
    BackupCatalog,
    BackupFailed,
    delete_files,
    directory_size,
    dump,
    restore,
    service_running,
    taker_alive,
    taking,
    write_file,
)
from engram.adapters.database import Database
from engram.adapters.migrations import database_status, shipped
from engram.adapters.tombstones import Fence, Journal
from engram.domain.backup import BackupRecord, due
from engram.domain.clock import Clock

from .ports import WrappedKeys
from .settings import Settings

log = logging.getLogger("engram.backups")

CATALOG = "backups.jsonl"


class BackupRefused(ValueError):
    """A backup or restore that would be wrong is not started (the CLI exits 2 with the reason)."""


def catalog_of(settings: Settings) -> BackupCatalog:
    return BackupCatalog(settings.journal_dir / CATALOG, timedelta(days=settings.backup_retention_days))


def _master_ids(keys: WrappedKeys | None) -> set[str]:
    if keys is None:
        return set()
    counts, root = keys.wrapped_by()
    return {m for m in (*counts, root) if m is not None}


def _canonical(tombstone: dict[str, Any]) -> str:
    return json.dumps(tombstone, sort_keys=True, default=str)


class Backups:
    def __init__(self, catalog: BackupCatalog, settings: Settings, clock: Clock,
                 database: Database | None = None) -> None:
        """`database`: where the sweeper asks whether an unfinished backup's taker is still alive."""
        self.catalog, self.settings, self.clock, self.database = catalog, settings, clock, database

    # -- engram backup DIR -----------------------------------------------------

    def take(self, target: Path, database: Database, journal: Journal,
             keys: WrappedKeys | None = None) -> BackupRecord:
        """`keys`: the key store, to note which master keys the dump needs (ids only; ADR 0030)."""
        target = self._new_backup_directory(target)
        taken_at = self.clock.now()  # before the dump's snapshot: see BackupRecord.taken_at
        version = database_status(database.conninfo).version
        backup_id = "bk-" + uuid4().hex
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        masters = _master_ids(keys)  # before and after the dump: a rotation meanwhile moves rows between them
        # ADR 0060: the database's clock is read, then the backup catalogued as started, then the dump's
        # snapshot taken; a forget seen committed before that reading is not in this backup
        with taking(database.conninfo, backup_id) as database_now:
            snapshot_at = database_now()
            self.catalog.started(backup_id, str(target), taken_at, snapshot_at)
            try:
                dump(database, target / DUMP)
                masters |= _master_ids(keys)
                # read after the dump: the copy holds every tombstone of what the dump holds
                lines = "".join(_canonical(t) + "\n" for t in journal.all())
                write_file(target / TOMBSTONES, lines.encode())
                write_file(target / MANIFEST, json.dumps({
                    "engram_backup": 1, "id": backup_id, "taken_at": taken_at.isoformat(), "schema_version": version,
                    **({"master_keys": sorted(masters)} if keys is not None else {}),
                }, indent=1).encode())
            except BaseException:
                delete_files(target)  # only its own files: nothing half-written is left to be taken for a backup
                self.catalog.failed(backup_id, self.clock.now())
                raise
            record = BackupRecord(backup_id, taken_at, str(target), directory_size(target), version,
                                  snapshot_at=snapshot_at)
            self.catalog.taken(record)  # while the lock is held: never seen unfinished with its taker gone
        log.info("backup %s written (%d bytes, schema version %d)", backup_id, record.size, version)
        return record

    def _new_backup_directory(self, target: Path) -> Path:
        target = target.resolve()
        for place, name in ((self.settings.data_dir.resolve(), "the data directory (ENGRAM_DATA_DIR)"),
                            (self.settings.journal_dir.resolve(), "the tombstone directory (ENGRAM_TOMBSTONE_DIR)")):
            if target == place or place in target.parents:
                raise BackupRefused(f"a backup may not be written inside {name}: restoring that would roll "
                                    "the backup back too; choose a directory outside it")
            if target in place.parents:
                raise BackupRefused(f"{target} holds {name}; choose a directory of its own for the backup")
        if target.exists() and not target.is_dir():
            raise BackupRefused(f"{target} is not a directory")
        if any((target / name).exists() for name in FILES):
            raise BackupRefused(f"{target} already holds a backup; choose a new directory")
        if target.is_dir() and any(target.iterdir()):  # its other files would travel with the backup
            raise BackupRefused(f"{target} is not empty; choose a new or empty directory")
        return target

    # -- engram restore DIR ----------------------------------------------------

    def restorable(self, target: Path, master_keys: Sequence[str] | None = None) -> BackupRecord:
        """The catalogued backup in `target`; refused when it is not one, not catalogued, or gone, or
        when it needs a master key that is not among `master_keys` (ids)."""
        target = target.resolve()
        try:
            manifest = json.loads((target / MANIFEST).read_text())
            backup_id = str(manifest["id"])
        except (OSError, ValueError, KeyError, TypeError):
            raise BackupRefused(f"{target} holds no Engram backup (no readable {MANIFEST})") from None
        record = self.catalog.find(backup_id)
        if record is None:
            raise BackupRefused(f"backup {backup_id} in {target} is not in the catalog ({self.catalog.path}): "
                                "only backups this deployment took and still keeps can be restored")
        if record.deleted_at is not None:
            raise BackupRefused(f"backup {backup_id} was deleted by retention on {record.deleted_at.date()}")
        if Path(record.path) != target:
            raise BackupRefused(f"the catalog has backup {backup_id} at {record.path}; restore it from there "
                                "(retention deletes it there)")
        missing = [n for n in (DUMP, TOMBSTONES) if not (target / n).is_file()]
        if missing:
            raise BackupRefused(f"backup {backup_id} is incomplete: {', '.join(missing)} missing")
        needed = [m for m in manifest.get("master_keys", []) if master_keys is not None and m not in master_keys]
        if needed:
            raise BackupRefused(f"backup {backup_id} holds data keys wrapped by master key {', '.join(needed)}, which "
                                "is not configured: give it in ENGRAM_PREVIOUS_MASTER_KEYS for the restore (the "
                                "restore then re-wraps them under the current master key)")
        latest = max(m.version for m in shipped())
        if record.schema_version > latest:
            raise BackupRefused(f"backup {backup_id} has schema version {record.schema_version}, newer than this "
                                f"Engram knows (up to {latest}); restore it with the release that took it")
        return record

    def restore_database(self, record: BackupRecord, database: Database) -> None:
        """Replace the database with the backup's. Refused while a service holds the serving lock."""
        if service_running(database.conninfo):
            raise BackupRefused("a service (engram serve, relay or worker) is running against the database: "
                                "stop every one of them first, then restore")
        try:
            restore(database, Path(record.path) / DUMP)
        except BackupFailed as e:
            raise BackupFailed(f"{e}. The database may be incomplete: fix the cause and run `engram restore "
                               f"{record.path}` again (no service may start on it meanwhile)") from None
        log.info("database restored from backup %s", record.id)

    def merge_tombstones(self, record: BackupRecord, fence: Fence) -> int:
        """Add the backup's tombstones the journal lacks (a union: none is ever withdrawn)."""
        known = {_canonical(t) for t in fence.journal.all()}
        added = 0
        for line in (Path(record.path) / TOMBSTONES).read_text().splitlines():
            try:
                tombstone = json.loads(line)
            except ValueError:
                continue
            if _canonical(tombstone) not in known:
                fence.journal.record(tombstone)
                known.add(_canonical(tombstone))
                added += 1
        if added:
            fence.refresh()
        return added

    # -- retention (the sweeper) -----------------------------------------------

    def expire(self) -> int:
        """Delete every catalogued backup older than ENGRAM_BACKUP_RETENTION_DAYS, and record when; and
        what a backup whose taker died left behind (a partial dump may hold keys)."""
        now = self.clock.now()
        records = self.catalog.records()
        expired = due(records, self.catalog.retention, now)
        for r in expired:
            delete_files(Path(r.path))
            self.catalog.deleted(r.id, now)
            log.info("backup %s deleted by retention", r.id)
        abandoned = [r for r in records if not r.finished and r.deleted_at is None and self.database is not None
                     and not taker_alive(self.database.conninfo, r.id)]
        for r in abandoned:
            delete_files(Path(r.path))
            self.catalog.failed(r.id, now)
            log.info("backup %s never finished: its files are deleted", r.id)
        return len(expired) + len(abandoned)
