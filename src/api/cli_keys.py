"""`engram token`, `hindsight-key` and `keys` (status, rotate, new; ADR 0030)."""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta
from typing import Any

from .bootstrap import key_rotation, token_secret
from .builders import master_key
from .cli_support import load_settings, one_shot_database, progress_count
from .identity import issue_token

log = logging.getLogger("engram")


def cmd_token(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.hours > settings.max_token_days * 24:
        raise ValueError(f"--hours may be at most {settings.max_token_days * 24:g} (ENGRAM_MAX_TOKEN_DAYS)")
    key_file = settings.data_dir / "master.key"
    if not settings.token_secret and not settings.master_key and not key_file.exists() and not args.create:
        # the development secret comes from the data directory's master key: making one here would sign
        # tokens no running service accepts, and leave a stray data directory behind
        raise ValueError(f"no Engram data directory at {settings.data_dir.resolve()} (no master.key) and no "
                         "ENGRAM_TOKEN_SECRET: run it where `engram serve` runs, set ENGRAM_DATA_DIR to the "
                         "service's data directory or ENGRAM_TOKEN_SECRET to its secret, or pass --create to "
                         "make a new data directory here")
    print(issue_token(token_secret(settings), company=args.company, user=args.user, role=args.role,
                      bot=args.bot, entry=args.entry, ttl=timedelta(hours=args.hours)))
    return 0


def cmd_hindsight_key(args: argparse.Namespace) -> int:
    from engram.hindsight_guard.tokens import public_key_text

    print(public_key_text(master_key(load_settings()).hindsight_signing_key()))
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Master-key rotation (ADR 0030). Prints key ids and counts, never a key; 1 while rows remain."""
    from engram.adapters.crypto import new_key_file

    settings = load_settings()
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
    with one_shot_database() as database, key_rotation(settings, database) as rotation:
        if args.action == "rotate":
            run = rotation.rotate(args.batch_size, args.batches, progress_count("re-wrapped"))
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
