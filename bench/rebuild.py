"""Time to rebuild the recall view from N stored events (default 100,000).

    .venv/bin/python bench/rebuild.py [--events 100000]

Seeds N events (half `Remembered`, half `Corrected`) straight into the event store, then runs the
same rebuild as `engram projections rebuild recall` (new tables filled batch by batch beside the
serving view, then swapped in: ADR 0034) and prints events/s.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from harness import seed_corrected

from engram.adapters.database import EmbeddedPostgres  # noqa: E402
from engram.api.bootstrap import Engram  # noqa: E402
from engram.service.settings import Settings  # noqa: E402

WORDS = [f"w{i}" for i in range(2000)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-rebuild-"))
    settings = Settings(data_dir=tmp, database_url=None, master_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
                        token_secret="bench-" + "r" * 40)
    pg = EmbeddedPostgres(tmp)
    engram = Engram.open(settings, database=pg.start(), background=False)
    r = random.Random(5)
    try:
        t = time.perf_counter()
        seed_corrected(engram, args.events // 2, lambda _: "I prefer " + " ".join(r.choice(WORDS) for _ in range(8)),
                       lambda _: r.choice(WORDS))
        head = engram.store.recorder.max_notification_id()
        print(f"seeded {head} events in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        t = time.perf_counter()
        applied = engram.operations.rebuild("recall")
        took = time.perf_counter() - t
        print(f"rebuild recall: {applied} events in {took:.1f}s ({applied / took:.0f} events/s)")
    finally:
        engram.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)  # about 0.8 GB at 100,000 events


if __name__ == "__main__":
    main()
