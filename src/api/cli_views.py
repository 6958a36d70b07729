"""`engram projections status|rebuild`: the read models."""

from __future__ import annotations

import argparse
import logging
import sys

from .bootstrap import Engram
from .cli_support import load_settings, progress_bar

log = logging.getLogger("engram")


def cmd_projections(args: argparse.Namespace) -> int:
    engram = Engram.open(load_settings(), background=False) if args.action == "status" else None
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
    engram = Engram.open(load_settings(), background=False)
    if args.name not in engram.projections:
        print(f"unknown projection {args.name!r}; known: {', '.join(engram.projections)}", file=sys.stderr)
        engram.close()
        return 2
    try:
        applied = engram.operations.rebuild(args.name, progress_bar(f"rebuild {args.name}"))
        position = engram.projections[args.name].view.position()
        # events of kinds the view does not apply are not read (ADR 0034), so not counted as applied
        print(f"rebuilt {args.name}: applied {applied} events, up to position {position}")
    finally:
        engram.close()
    return 0
