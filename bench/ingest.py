"""Ingest: receipts per second through the rule-based extractor, and receipt-to-candidate latency.

    .venv/bin/python -m bench.ingest [--receipts 2000]

Phase 1 stores receipts as fast as one client can (intake). Phase 2 drains the queue with one worker
(extraction + candidates). Phase 3 sends receipts at half that rate with a worker polling every
50 ms, and times each receipt from its 202 to its candidates being listed.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from engram.adapters.database import EmbeddedPostgres
from engram.api.bootstrap import Engram
from engram.domain.receipt import receipt_uuid
from engram.domain.scope import Caller
from engram.service.settings import Settings

PEOPLE = [Caller("acme", f"person-{i}", "bot", bot="b-1") for i in range(10)]
PHRASES = ["I prefer {} for {} meetings.", "From now on send {} reports about {}.", "My {} is {}.",
           "我喜欢{}和{}。", "We talked about {} and {} today.", "Can you check {} before {}?"]
WORDS = ["tea", "coffee", "budget", "risk", "Friday", "Monday", "charts", "tables", "the roadmap", "hiring"]


def message(r: random.Random) -> str:
    return " ".join(r.choice(PHRASES).format(r.choice(WORDS), r.choice(WORDS)) for _ in range(r.randint(1, 3)))


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--receipts", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-ingest-"))
    settings = Settings(data_dir=tmp, database_url=None, master_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
                        token_secret="bench-" + "k" * 40, daily_calls=10**9, daily_tokens=10**12)
    pg = EmbeddedPostgres(tmp)
    engram = Engram.open(settings, database=pg.start(), background=False)
    learning = engram.learning
    r = random.Random(3)
    source = {"kind": "chat", "id": "chat-1", "message_id": "m"}

    def send(i: int) -> None:
        who = PEOPLE[i % len(PEOPLE)]
        learning.receive(who, receipt_id=f"r-{i}", author="user", kind="message", text=message(r),
                         occurred_at=None, source={**source, "message_id": f"m-{i}"}, visibility="general", team=None)

    try:
        n = args.receipts
        t = time.perf_counter()
        for i in range(n):
            send(i)
        intake = n / (time.perf_counter() - t)
        t = time.perf_counter()
        while learning.work(limit=50):
            pass
        drain = n / (time.perf_counter() - t)
        print(f"intake   {intake:8.1f} receipts/s (store, seal, project)")
        print(f"workers  {drain:8.1f} receipts/s (one worker: extract, propose candidates, record)")

        done: dict[str, float] = {}
        real_end = learning._end

        def timed_end(receipt, change):
            ok = real_end(receipt, change)
            done[receipt.receipt_id] = time.perf_counter()
            return ok

        learning._end = timed_end  # type: ignore[method-assign]
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                if not learning.work(limit=20):
                    stop.wait(0.05)

        thread = threading.Thread(target=worker)
        thread.start()
        sent: dict[str, float] = {}
        steady = min(500, n)
        interval = 2.0 / drain
        for i in range(n, n + steady):
            sent[f"r-{i}"] = time.perf_counter()
            send(i)
            time.sleep(interval)
        deadline = time.monotonic() + 60
        while len([k for k in sent if k in done]) < steady and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        thread.join()
        lat = [(done[k] - sent[k]) * 1000 for k in sent if k in done]
        print(f"latency  p50 {pct(lat, 50):6.1f} ms  p95 {pct(lat, 95):6.1f} ms  "
              f"({len(lat)} receipts at {1 / interval:.0f}/s, worker polling every 50 ms)")
        assert receipt_uuid  # keep the import honest for readers: ids are derived, not stored
    finally:
        engram.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
