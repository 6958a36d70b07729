"""`engram`: serve, mcp, token, keys, projections, migrate, backup, restore, import.

The parser and the entry point; each group of commands is a module of its own (`cli_serving`, `cli_keys`,
`cli_data`, `cli_views`), and what they share is `cli_support`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from engram.adapters import logs
from engram.adapters.backups import BackupFailed
from engram.adapters.migrations import SchemaTooNew
from engram.adapters.tombstones import FenceRequired

from .bootstrap import PROJECTIONS
from .cli_data import cmd_backup, cmd_import, cmd_migrate, cmd_restore
from .cli_keys import cmd_hindsight_key, cmd_keys, cmd_token
from .cli_serving import cmd_mcp, cmd_relay, cmd_serve, cmd_worker
from .cli_views import cmd_projections

log = logging.getLogger("engram")
SERVICES = frozenset({"serve", "relay", "worker", "mcp"})  # they log at ENGRAM_LOG_LEVEL; the others print


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
    t.add_argument("--create", action="store_true",
                   help="make the data directory (and its master key) if there is none yet")
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
