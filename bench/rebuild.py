"""Time to rebuild the recall view from N stored events (default 100,000).

    .venv/bin/python -m bench.rebuild [--events 100000] [--receipts 0]

Seeds N events (half `Remembered`, half `Corrected`) straight into the event store, then runs the
same rebuild as `engram projections rebuild recall` (new tables filled batch by batch beside the
serving view, then swapped in: ADR 0034) and prints events/s. `--receipts R` stores R receipts as well
(each `Received`, `Processed`, `PayloadCleared`: the most of a real log), interleaved with the memories;
the recall view applies none of them, and events/s then counts every stored event.
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
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

from engram.adapters.database import EmbeddedPostgres
from engram.api.bootstrap import Engram
from engram.domain.receipt import Receipt
from engram.service.settings import Settings

from bench.harness import save_in_batches, seed_corrected

WORDS = [f"w{i}" for i in range(2000)]


def receipts(engram: Engram, n: int, r: random.Random) -> Iterator[Receipt]:
    """`n` receipts of one message each, received, processed (nothing learned) and their payload cleared."""
    now = engram.ledger.clock.now()
    source = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}
    for _ in range(n):
        receipt = Receipt.receive(company="acme", person=f"p{r.randrange(100)}", receipt_id=str(uuid4()), author="user",
                                  kind="message", text=" ".join(r.choice(WORDS) for _ in range(12)), occurred_at=None,
                                  source=source, visibility="general", team=None, ignored_because=None, at=now)
        receipt.processed([], 0, "rules", now)
        receipt.clear_payload("processed", now)
        yield receipt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--receipts", type=int, default=0, help="receipts stored besides (3 events each)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-rebuild-"))
    settings = Settings(data_dir=tmp, database_url=None, master_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
                        token_secret="bench-" + "r" * 40)
    pg = EmbeddedPostgres(tmp)
    engram = Engram.open(settings, database=pg.start(), background=False)
    r = random.Random(5)
    try:
        t = time.perf_counter()
        rounds = 10 if args.receipts else 1  # receipts between the memories, as they arrive
        for _ in range(rounds):
            seed_corrected(engram, args.events // 2 // rounds,
                           lambda _: "I prefer " + " ".join(r.choice(WORDS) for _ in range(8)), lambda _: r.choice(WORDS))
            if args.receipts:
                save_in_batches(engram, receipts(engram, args.receipts // rounds, r))
        head = engram.store.recorder.max_notification_id()
        print(f"seeded {head} events in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        t = time.perf_counter()
        applied = engram.operations.rebuild("recall")
        took = time.perf_counter() - t
        print(f"rebuild recall: {head} events ({applied} applied) in {took:.1f}s ({(head or 0) / took:.0f} events/s)")
    finally:
        engram.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)  # about 0.8 GB at 100,000 events


if __name__ == "__main__":
    main()
