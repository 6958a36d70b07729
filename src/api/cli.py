"""`engram`: serve, mcp, token, keys, projections, migrate, backup, restore, import."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from engram.adapters import logs
from engram.adapters.backups import BackupFailed, serving
from engram.adapters.database import Database, EmbeddedPostgres
from engram.adapters.migrations import SchemaTooNew, database_status, migrate_database
from engram.adapters.tombstones import FenceRequired
from engram.domain.clock import Clock
from engram.service.backups import Backups, catalog_of
from engram.service.key_rotation import KeyRotation
from engram.service.settings import MAX_SERVE_PROCESSES

from .bootstrap import PROJECTIONS, Engram, key_rotation, master_key, master_keys, token_secret
from .identity import issue_token
from .lifecycle import exit_on_signal

log = logging.getLogger("engram")
SERVICES = frozenset({"serve", "relay", "worker", "mcp"})  # they log at ENGRAM_LOG_LEVEL; the others print


def _settings():
    from engram.service.settings import Settings

    return Settings()


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings()
    if not settings.token_secret:
        log.warning("ENGRAM_TOKEN_SECRET is not set: using a development secret derived from the data "
                    "directory's master key; `engram token` uses the same one.")
    if settings.kafka_bootstrap:
        _quiet_kafka_client()
    processes = args.processes if args.processes is not None else settings.serve_processes
    if processes < 1 or processes > MAX_SERVE_PROCESSES:
        raise ValueError(f"--processes must be between 1 and {MAX_SERVE_PROCESSES}")
    if processes > 1 and settings.kafka_bootstrap:
        raise ValueError("--processes is for the in-process projectors; in distributed mode (ENGRAM_KAFKA_BOOTSTRAP) "
                         "run more API replicas instead")
    engram = Engram.open(settings, notified=processes == 1)  # several: each write settles its own events
    mode = "external PostgreSQL" if engram.embedded is None else f"embedded PostgreSQL in {engram.embedded.pgdata}"
    log.info("%s; serving on http://%s:%d", mode, args.host, args.port)
    # uvicorn shuts down gracefully on SIGTERM and then re-raises it; make that re-raise an
    # ordinary exit so the projectors and the embedded PostgreSQL are stopped below.
    signal.signal(signal.SIGTERM, exit_on_signal)
    try:
        # `engram restore DIR` refuses while this is held; `engram keys rotate` reads which key it wraps with
        with serving(engram.database.conninfo, engram.store.keys.serving_locks()):
            if processes > 1:  # this process keeps the background loops; the others answer (ADR 0037)
                from .processes import ServingFailed, serve_many

                try:
                    serve_many(engram, args.host, args.port, processes)
                except ServingFailed as e:
                    log.error("%s", e)
                    return 1
                except KeyboardInterrupt:  # Ctrl-C: the serving processes have stopped; the rest stops below
                    log.info("interrupted; stopping")
            else:
                import uvicorn

                from .http import create_app

                # uvicorn logs through ours (ENGRAM_LOG_*); its access log is off: Observed logs each request
                uvicorn.run(create_app(engram, token_secret(settings)), host=args.host, port=args.port,
                            log_config=None, log_level=None, access_log=False,
                            timeout_graceful_shutdown=10)  # SIGTERM ends the process even if a request hangs
    finally:
        engram.close()
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_remote import run_stdio

    return run_stdio()


def cmd_token(args: argparse.Namespace) -> int:
    settings = _settings()
    if args.hours > settings.max_token_days * 24:
        raise ValueError(f"--hours may be at most {settings.max_token_days * 24:g} (ENGRAM_MAX_TOKEN_DAYS)")
    print(issue_token(token_secret(settings), company=args.company, user=args.user, role=args.role,
                      bot=args.bot, entry=args.entry, ttl=timedelta(hours=args.hours)))
    return 0


def cmd_hindsight_key(args: argparse.Namespace) -> int:
    from engram.hindsight_guard.tokens import public_key_text

    print(public_key_text(master_key(_settings()).hindsight_signing_key()))
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Master-key rotation (ADR 0030). Prints key ids and counts, never a key; 1 while rows remain."""
    from engram.adapters.crypto import new_key_file

    settings = _settings()
    if args.action == "new":
        if settings.master_key:
            raise ValueError("the master key comes from ENGRAM_MASTER_KEY: generate a new key yourself, set it there "
                             "and the old one in ENGRAM_PREVIOUS_MASTER_KEYS (see docs/adr/0030-master-key-rotation.md)")
        path = settings.data_dir / "master.key"
        if not path.exists():
            raise ValueError(f"{path} does not exist: there is no key to rotate yet")
        old = master_key(settings).id
        new = new_key_file(path)
        print(f"new master key {new.id} written to {path}; the previous one ({old}) is kept in {path.name}.previous. "
              "Restart every Engram process, then run `engram keys rotate`.")
        return 0
    if args.action == "rotate" and (args.batch_size < 1 or (args.batches is not None and args.batches < 1)):
        raise ValueError("--batch-size and --batches must be at least 1")
    with _database() as database, key_rotation(settings, database) as rotation:
        if args.action == "rotate":
            run = rotation.rotate(args.batch_size, args.batches, _progress_count("re-wrapped"))
            root = " and the derivation root" if run.root_rewrapped else ""
            print(f"re-wrapped {run.rewrapped} data keys{root} under master key {rotation.current} "
                  f"in {run.batches} batches")
            status = run.status
        else:
            status = rotation.status()
    _print_key_status(status)
    return 0 if status.done and not status.wrapping_elsewhere else 1


def _print_key_status(status: Any) -> None:
    """Key ids and counts, one line each (`engram keys status`)."""
    for master_id, n in sorted(status.wrapped_by.items(), key=lambda item: (item[0] != status.current, item[0] or "")):
        if master_id is None:
            print(f"master key not recorded (wrapped before key ids were): {n} data keys")
            continue
        state = ("current" if master_id == status.current else "previous" if master_id in status.configured
                 else "not configured")
        print(f"master key {master_id} ({state}): {n} data keys")
    root_state = ("not stored yet (the next start stores it)" if status.root is None
                  else "under the current master key" if status.root == status.current
                  else f"under master key {status.root}")
    print(f"derivation root: {root_state}")
    print(f"remaining under other master keys: {status.remaining} data keys")
    if status.wrapping_elsewhere:
        print(f"running Engram processes not using master key {status.current}: {status.wrapping_elsewhere}")


def _progress_count(label: str):
    """A line on stderr every 10,000: a long rotation shows it is alive."""
    shown = {"step": 0}

    def progress(done: int) -> None:
        if done // 10_000 != shown["step"]:
            shown["step"] = done // 10_000
            print(f"{label} {done}", file=sys.stderr, flush=True)

    return progress


def cmd_projections(args: argparse.Namespace) -> int:
    engram = Engram.open(_settings(), background=False) if args.action == "status" else None
    if args.action == "status":
        assert engram is not None
        try:
            for row in engram.operations.status():
                part = f" partition {row['partition']:>3}" if "partition" in row else ""
                print(f"{row['projection']:<10}{part} position {row['position']:>10}  head {row['head']:>10}  "
                      f"lag {row['lag']}")
            for company, counts in (engram.operations.hindsight_backlogs() or {}).items():
                states = "  ".join(f"{state} {n}" for state, n in sorted(counts.items()))
                print(f"hindsight_sync company {company}  {states}")
            for name, n in engram.operations.quarantined().items():
                if n:
                    print(f"{name:<10} quarantined {n} event(s): see table engram_quarantine", file=sys.stderr)
        finally:
            engram.close()
        return 0
    engram = Engram.open(_settings(), background=False)
    if args.name not in engram.projections:
        print(f"unknown projection {args.name!r}; known: {', '.join(engram.projections)}", file=sys.stderr)
        engram.close()
        return 2
    try:
        applied = engram.operations.rebuild(args.name, _progress_bar(f"rebuild {args.name}"))
        position = engram.projections[args.name].view.position()
        # events of kinds the view does not apply are not read (ADR 0034), so not counted as applied
        print(f"rebuilt {args.name}: applied {applied} events, up to position {position}")
    finally:
        engram.close()
    return 0


def _progress_bar(label: str):
    """A bar on stderr, redrawn at most every 1%: long rebuilds show they are alive."""
    shown = {"pct": -1}

    def progress(done: int, total: int) -> None:
        pct = 100 if total <= 0 else int(done * 100 / total)
        if pct != shown["pct"]:
            shown["pct"] = pct
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            end = "\n" if pct >= 100 else ""
            print(f"\r{label} [{bar}] {pct:3d}% ({done}/{total})", end=end, file=sys.stderr, flush=True)

    return progress


def _run_until_signalled(make_coroutine) -> int:
    """Run an asyncio service until SIGTERM or Ctrl-C, then let it finish its current batch."""
    import asyncio
    import threading

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    asyncio.run(make_coroutine(stop))
    return 0


def _distributed_engram() -> Engram:
    settings = _settings()
    if not settings.kafka_bootstrap:
        raise ValueError("set ENGRAM_KAFKA_BOOTSTRAP to run the relay or workers")
    return Engram.open(settings, background=False)


def cmd_backup(args: argparse.Namespace) -> int:
    engram = Engram.open(_settings(), background=False)
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
    engram = Engram.open(_settings(), background=False)
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
        settings = _settings()
        backups = Backups(catalog_of(settings), settings, Clock())
        record = backups.restorable(Path(args.dir), master_keys(settings).ids)  # refused before the database is touched
        with _database() as database:
            _publish_pending_tombstones(settings, database)  # the database about to be replaced may hold some
            backups.restore_database(record, database)
            print(f"database restored from backup {record.id} (taken {record.taken_at.isoformat()})", file=sys.stderr)
            engram = Engram.open(settings, database=database, background=False, fenced=False)
            try:
                merged = backups.merge_tombstones(record, engram.operations.fence)
                _fence(engram, merged)
                _rewrap(engram)
            finally:
                engram.close()
        return 0
    engram = Engram.open(_settings(), background=False, fenced=False)
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
    counts = engram.operations.restore_fence(_progress_bar("rebuild"))
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


@contextmanager
def _database() -> Iterator[Database]:
    """The database `engram serve` would use (ENGRAM_DATABASE_URL, or the embedded server), nothing else started."""
    settings = _settings()
    if settings.database_url:
        yield Database.from_url(settings.database_url)
        return
    embedded = EmbeddedPostgres(settings.data_dir.resolve())
    try:
        yield embedded.start()
    finally:
        embedded.stop()


def cmd_migrate(args: argparse.Namespace) -> int:
    with _database() as database:
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


def _quiet_kafka_client() -> None:
    # aiokafka logs an error per reconnect attempt; relay, workers and journal log one line per outage
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


def _alive_file(path: str | None):
    """Touches `path` (at most once a second) each time the loop turns; a health check reads its age."""
    if not path:
        return None
    import contextlib
    import time
    from pathlib import Path

    target, last = Path(path), [time.monotonic()]
    target.touch()  # an unwritable path fails here, at start, not inside the loop

    def beat() -> None:
        if time.monotonic() - last[0] >= 1.0:
            last[0] = time.monotonic()
            with contextlib.suppress(OSError):
                target.touch()

    return beat


def cmd_relay(args: argparse.Namespace) -> int:
    from engram.adapters.kafka import Relay

    _quiet_kafka_client()
    engram = _distributed_engram()
    relay = Relay(engram.store.recorder, engram.store.datastore, engram.settings.kafka_bootstrap or "",
                  engram.settings.kafka_partitions, list(engram.projections), poll_interval=engram.settings.poll_interval,
                  alive=_alive_file(args.alive_file))
    log.info("relay: publishing to %s", engram.settings.kafka_bootstrap)
    try:
        with serving(engram.database.conninfo, engram.store.keys.serving_locks()):
            return _run_until_signalled(relay.run)
    finally:
        engram.close()


def cmd_worker(args: argparse.Namespace) -> int:
    from engram.adapters.kafka import ProjectorWorker

    _quiet_kafka_client()
    engram = _distributed_engram()
    names = ([n.strip() for n in args.projections.split(",") if n.strip()] if args.projections
             else list(engram.projections))  # with Hindsight configured, its sync wishes too
    unknown = [n for n in names if n not in engram.projections]
    if unknown:
        engram.close()
        raise ValueError(f"unknown projections: {', '.join(unknown)}")
    worker = ProjectorWorker([engram.projections[n] for n in names], engram.store.datastore,
                             engram.operations.decode, engram.settings.kafka_bootstrap or "",
                             engram.settings.kafka_partitions, keys=engram.store.keys,
                             alive=_alive_file(args.alive_file))
    log.info("worker: projecting %s", ", ".join(names))
    try:
        with serving(engram.database.conninfo, engram.store.keys.serving_locks()):
            return _run_until_signalled(worker.run)
    finally:
        engram.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engram", description="Engram memory service")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="serve the API")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--processes", type=int, help="serving processes on the one port (default ENGRAM_SERVE_PROCESSES, "
                                                 "1); more than 1 uses more cores (ADR 0037)")
    s.set_defaults(func=cmd_serve)

    sub.add_parser("mcp", help="a Model Context Protocol server on stdio for one person: ENGRAM_TOKEN at ENGRAM_URL "
                              "(default http://127.0.0.1:8080)").set_defaults(func=cmd_mcp)

    t = sub.add_parser("token", help="print a signed token for local use")
    t.add_argument("--company", required=True)
    t.add_argument("--user", required=True)
    t.add_argument("--role", default="user", choices=["user", "bot", "admin", "operator"])
    t.add_argument("--bot")
    t.add_argument("--entry", default="api", choices=["web", "channel", "scheduled", "api"])
    t.add_argument("--hours", type=float, default=12.0)
    t.set_defaults(func=cmd_token)

    sub.add_parser("hindsight-key", help="print the public key Hindsight's Engram guard verifies service tokens with "
                                         "(it changes with the master key: ADR 0030)").set_defaults(func=cmd_hindsight_key)

    k = sub.add_parser("keys", help="rotate the master key: status, rotate, new (ADR 0030)")
    ks = k.add_subparsers(dest="action", required=True)
    ks.add_parser("status", help="how many data keys each master key wraps; exits 1 while any is not under the "
                                 "current one")
    kr = ks.add_parser("rotate", help="re-wrap every data key under the current master key (ENGRAM_MASTER_KEY), "
                                      "in short batches, while the service runs; run again to resume")
    kr.add_argument("--batch-size", type=int, default=500, help="data keys per transaction (default 500)")
    kr.add_argument("--batches", type=int, help="stop after this many batches (spread a rotation out)")
    ks.add_parser("new", help="the embedded default: write a new DATA_DIR/master.key, keeping the previous key "
                              "in master.key.previous")
    k.set_defaults(func=cmd_keys)

    b = sub.add_parser("backup", help="write a backup (database and tombstones) to a new directory; catalog it")
    b.add_argument("dir", metavar="DIR", help="a new or empty directory outside the data and tombstone directories")
    b.set_defaults(func=cmd_backup)

    rs = sub.add_parser("restore", help="restore a catalogued backup (stop every service first); always ends "
                                        "with the tombstone fence")
    rs.add_argument("dir", metavar="DIR", nargs="?", help="a directory `engram backup` wrote and the catalog keeps")
    rs.add_argument("--fence", action="store_true",
                    help="only the fence: replay all tombstones, then rebuild every projection (after restoring "
                         "a database by other means)")
    rs.set_defaults(func=cmd_restore)

    alive_help = "touch this file while the loop runs (a container health check reads its age)"
    r = sub.add_parser("relay", help="publish stored events to Kafka")
    r.add_argument("--alive-file", help=alive_help)
    r.set_defaults(func=cmd_relay)
    w = sub.add_parser("worker", help="apply events from Kafka to read models")
    w.add_argument("--alive-file", help=alive_help)
    w.add_argument("--projections", help=f"comma-separated, default all: {','.join(PROJECTIONS)}"
                                         ",hindsight_sync (when ENGRAM_HINDSIGHT_URL is set)")
    w.set_defaults(func=cmd_worker)

    im = sub.add_parser("import", help="import prior memories (JSON lines) into one company; see docs/import.md")
    im.add_argument("file", help="the JSON-lines file; every record must name the company in --company")
    im.add_argument("--company", required=True)
    im.set_defaults(func=cmd_import)

    m = sub.add_parser("migrate", help="apply pending schema migrations (every start applies them too)")
    m.add_argument("--status", action="store_true", help="print the schema version and pending migrations; change nothing")
    m.set_defaults(func=cmd_migrate)

    pr = sub.add_parser("projections", help="inspect or rebuild read models")
    prs = pr.add_subparsers(dest="action", required=True)
    prs.add_parser("status")
    rb = prs.add_parser("rebuild")
    rb.add_argument("name")
    pr.set_defaults(func=cmd_projections)
    return p


def _configure_logging(command: str) -> None:
    """ENGRAM_LOG_FORMAT and ENGRAM_LOG_LEVEL. A one-shot command prints its results and logs warnings
    and errors only, unless ENGRAM_LOG_LEVEL is set."""
    from pydantic import ValidationError

    from engram.service.settings import Settings

    try:
        settings = Settings()
    except ValidationError:  # reported below, in the format asked for if that much can be read
        logs.configure("json" if os.environ.get("ENGRAM_LOG_FORMAT", "").strip().lower() == "json" else "text",
                       "warning")
        raise
    explicit = "log_level" in settings.model_fields_set
    logs.configure(settings.log_format, settings.log_level if command in SERVICES or explicit else "warning")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from pydantic import ValidationError

    from engram.service.settings import describe

    try:
        _configure_logging(args.command)
        return int(args.func(args))
    except ValidationError as e:  # a setting: name the variable, never echo its value
        log.error("invalid configuration: %s", describe(e))
        return 2
    except (ValueError, SchemaTooNew, FenceRequired, BackupFailed) as e:  # ours, written for the operator
        log.error("%s", e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
