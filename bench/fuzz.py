"""Fuzz the HTTP API from its /openapi.json: cases run, status-code histogram, 5xx count.

    .venv/bin/python -m bench.fuzz [--examples 110] [--extremes 1500] [--no-conformance]

The harness is the test suite's (tests/integration/test_fuzz.py): schemathesis positive and negative
cases for every operation as a user, a registered bot, an admin and without a token, then explicit
extremes (years 1 and 9999, +-14:00 offsets, sizes at and past each limit, NUL, unpaired surrogates,
RTL, combining marks, emoji, huge integers). In-process over ASGI on a fresh embedded PostgreSQL in a
temporary directory. Exits 1 when any answer was a 5xx.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from engram.adapters.database import EmbeddedPostgres
from engram.api.bootstrap import Engram
from engram.api.http import create_app
from engram.service.settings import Settings

from tests.integration.test_fuzz import run_fuzz
from tests.support.helpers import SECRET


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=110, help="cases per operation and mode (positive, negative)")
    ap.add_argument("--extremes", type=int, default=1500, help="cases from the explicit extreme strategies")
    ap.add_argument("--no-conformance", action="store_true", help="check only for 5xx and problem documents")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-fuzz-"))
    settings = Settings(data_dir=tmp, database_url=None, token_secret=SECRET,
                        master_key=base64.urlsafe_b64encode(os.urandom(32)).decode())
    pg = EmbeddedPostgres(tmp)
    db = pg.start()
    engram = Engram.open(settings, database=db, background=False)
    started = time.perf_counter()
    try:
        stats = run_fuzz(create_app(engram, SECRET), args.examples, args.extremes,
                         conformance=not args.no_conformance,
                         progress=lambda line: print(f"# {line}", file=sys.stderr))
    finally:
        engram.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(f"cases run: {stats.cases} in {elapsed:.0f} s ({stats.cases / elapsed:.0f} cases/s), "
          f"{len(stats.per_operation)} operations")
    print("status codes:")
    for code, n in sorted(stats.statuses.items()):
        print(f"  {code}: {n}")
    print(f"5xx: {len(stats.server_errors)}")
    for line in stats.server_errors[:50]:
        print(f"  {line}")
    print(f"other failures (conformance, problem documents): {len(stats.other_failures)}")
    for line in stats.other_failures[:50]:
        print(f"  {line[:400]}")
    return 1 if stats.server_errors else 0


if __name__ == "__main__":
    sys.exit(main())
