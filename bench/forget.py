"""Forget: the latency of one forget (event, key destruction, tombstone and receipt clearing in one
transaction, then every in-process view), beside a remember measured in the same run as the baseline.

    .venv/bin/python -m bench.forget [--memories 300]

Embedded PostgreSQL, in-process projectors, the file journal. Half the forgotten memories were
learned from a receipt (their forget also clears the receipt's payload), half were remembered.
Prints p50/p95/max in milliseconds and the time until every tombstone was in the journal.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import tempfile
import time
from pathlib import Path

from engram.api.bootstrap import Engram
from engram.domain.scope import Caller
from engram.service.settings import Settings

ALICE = Caller("acme", "alice", "user")


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1] if len(values) > 1 else values[0]


def line(name: str, ms: list[float]) -> str:
    return f"{name:<32} n={len(ms):>5}  p50 {pct(ms, 50):7.2f} ms  p95 {pct(ms, 95):7.2f} ms  max {max(ms):7.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", master_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
                            token_secret="bench-" + "f" * 40)
        engram = Engram.open(settings, background=False)
        try:
            remembered, learned, remember_ms = [], [], []
            for i in range(args.memories // 2):
                started = time.perf_counter()
                m = engram.memories.remember(ALICE, text=f"note {i}: I keep the blue folder in drawer {i}",
                                             source={"kind": "chat", "id": "chat-1", "message_id": f"m-{i}"},
                                             occurred_at=None, visibility="general", team=None, valid_from=None,
                                             valid_to=None)
                remember_ms.append((time.perf_counter() - started) * 1000)
                remembered.append(m.id)
            for i in range(args.memories // 2):
                engram.learning.receive(ALICE, receipt_id=f"r-{i}", author="user", kind="message",
                                        text=f"I prefer tea number {i} in the morning.", occurred_at=None,
                                        source={"kind": "chat", "id": "chat-2", "message_id": f"r-{i}"},
                                        visibility="general", team=None)
            while engram.learning.work():
                pass
            learned = [c.id for c in engram.memories.candidates(ALICE).items]
            for memory_id in learned:
                engram.memories.confirm(ALICE, memory_id, text=None, acknowledge_sensitive=False)

            forget_ms: dict[str, list[float]] = {"remembered": [], "learned from a receipt": []}
            for kind, ids in (("remembered", remembered), ("learned from a receipt", learned)):
                for memory_id in ids:
                    started = time.perf_counter()
                    engram.memories.forget(ALICE, memory_id)
                    forget_ms[kind].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            assert engram.publisher is not None
            engram.publisher.publish_pending()
            published = (time.perf_counter() - started) * 1000
            print(line("remember (baseline)", remember_ms))
            for kind, ms in forget_ms.items():
                print(line(f"forget, {kind}", ms))
            print(f"tombstones left to publish after the last forget: {engram.operations.fence.outbox.backlog()} "
                  f"(a final publish_pending took {published:.1f} ms)")
        finally:
            engram.close()


if __name__ == "__main__":
    main()
