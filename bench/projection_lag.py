"""Projection lag and throughput, embedded and over Kafka.

    .venv/bin/python -m bench.projection_lag [--writes 200] [--events 5000]

1. confirm-to-recallable: the time from an explicit remember until recall can return it, in the
   embedded default (projectors in-process) and in Kafka mode (relay + one worker, tansu broker);
   in both modes a remember returns only once its write is recallable, so this is its latency.
2. relay + projector throughput: N events already stored, then relay and 1 or 2 workers started;
   events/s until every partition of every projection has applied them. By default the relay and the
   workers are threads of this process (one interpreter); `--processes` runs them as deployed, as
   `engram relay` and `engram worker` processes, and counts from the first event applied (the
   workers' joining the consumer group excluded) to the last.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from engram.adapters.database import EmbeddedPostgres
from engram.adapters.kafka_relay import Relay
from engram.adapters.kafka_worker import ProjectorWorker
from engram.api.bootstrap import Engram
from engram.domain.memory import Memory
from engram.domain.scope import Caller, Scope
from engram.service.settings import Settings

from bench.harness import save_in_batches
from tests.support.broker import TansuBroker

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}
PARTITIONS = 8


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100)[p - 1]


class Background:
    def __init__(self, coro_factory) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(coro_factory(self.stop)), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def workers_for(engram: Engram, n: int) -> tuple[list[ProjectorWorker], list[Background]]:
    ws = [ProjectorWorker(list(engram.projections.values()), engram.store.datastore,
                          engram.operations.decode, engram.settings.kafka_bootstrap or "", PARTITIONS,
                          keys=engram.store.keys) for _ in range(n)]
    bgs = [Background(w.run) for w in ws]
    for w in ws:
        w.ready.wait(60)
    return ws, bgs


def latency(engram: Engram, writes: int) -> list[float]:
    out = []
    for i in range(writes):
        t = time.perf_counter()
        engram.memories.remember(ALICE, text=f"lag probe {i} heron", source=SOURCE, occurred_at=None,
                                visibility="general", team=None, valid_from=None, valid_to=None)
        out.append((time.perf_counter() - t) * 1000)
    return out


def seed(engram: Engram, events: int) -> None:
    now = engram.ledger.clock.now()
    save_in_batches(engram, (Memory.remember(id=uuid4(), scope=Scope("acme", f"p{i % 20}"), source=SOURCE,
                                             text=f"seed {i} plover", evidence=[], valid_from=None, valid_to=None,
                                             actor="bench", at=now) for i in range(events)))


def applied_everywhere(engram: Engram, head: int) -> bool:
    rows = [r for r in engram.operations.status() if "partition" in r]
    return bool(rows) and all(r["position"] >= head for r in rows)


def processes_throughput(engram: Engram, settings: Settings, db: Any, bootstrap: str, n: int) -> tuple[float, float]:
    """`engram relay` and n `engram worker` processes: seconds from the first event applied to the last,
    and from their start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({"ENGRAM_DATABASE_URL": f"postgresql://{db.user}@/{db.dbname}?host={db.host}&port={db.port}",
                "ENGRAM_KAFKA_BOOTSTRAP": bootstrap, "ENGRAM_KAFKA_PARTITIONS": str(PARTITIONS),
                "ENGRAM_MASTER_KEY": settings.master_key or "", "ENGRAM_TOKEN_SECRET": settings.token_secret,
                "ENGRAM_DATA_DIR": str(settings.data_dir), "ENGRAM_POLL_INTERVAL": "0.1"})
    head = engram.store.recorder.max_notification_id() or 0
    engram_bin = str(Path(sys.executable).parent / "engram")
    procs = [subprocess.Popen([engram_bin, *cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for cmd in [["worker"]] * n + [["relay"]]]
    try:
        started, first = time.perf_counter(), None
        while not applied_everywhere(engram, head):
            if first is None and any(r["position"] > 0 for r in engram.operations.status() if "partition" in r):
                first = time.perf_counter()
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a relay or worker process ended")
            time.sleep(0.02)
        done = time.perf_counter()
        return done - (first or started), done - started
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--processes", action="store_true", help="relay and workers as engram processes")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-lag-"))
    base = Settings(data_dir=tmp, database_url=None, master_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
                    token_secret="bench-" + "l" * 40, kafka_partitions=PARTITIONS)
    pg = EmbeddedPostgres(tmp)
    server = pg.start()
    try:
        db = server.with_dbname("lag_embedded")
        db.ensure_exists()
        engram = Engram.open(base, database=db, background=False)
        lat = latency(engram, args.writes)
        engram.close()
        print(f"confirm-to-recallable  embedded  p50 {pct(lat, 50):6.2f} ms  p95 {pct(lat, 95):6.2f} ms")

        broker = TansuBroker().start()
        try:
            db = server.with_dbname("lag_kafka")
            db.ensure_exists()
            engram = Engram.open(base.replace(kafka_bootstrap=broker.bootstrap), database=db, background=False)
            relay = Background(Relay(engram.store.recorder, engram.store.datastore, broker.bootstrap, PARTITIONS,
                                     list(engram.projections), poll_interval=0.5).run)
            _, bgs = workers_for(engram, 1)
            latency(engram, 10)  # warm-up
            lat = latency(engram, args.writes)
            print(f"confirm-to-recallable  kafka     p50 {pct(lat, 50):6.2f} ms  p95 {pct(lat, 95):6.2f} ms")
            for b in [relay, *bgs]:
                b.close()
            engram.close()
        finally:
            broker.stop()

        for n in (1, 2):
            broker = TansuBroker().start()
            try:
                db = server.with_dbname(f"throughput_{n}")
                db.ensure_exists()
                engram = Engram.open(base.replace(kafka_bootstrap=broker.bootstrap), database=db, background=False)
                seed(engram, args.events)
                head = engram.store.recorder.max_notification_id() or 0
                if args.processes:
                    took, total = processes_throughput(engram, base, db, broker.bootstrap, n)
                    print(f"relay + {n} worker process{'es' if n > 1 else '  '}  {head} events in {took:6.1f} s  "
                          f"{head / took:8.0f} events/s  ({total:.1f} s from the processes' start)")
                    engram.close()
                    continue
                _, bgs = workers_for(engram, n)
                t = time.perf_counter()
                relay = Background(Relay(engram.store.recorder, engram.store.datastore, broker.bootstrap,
                                         PARTITIONS, list(engram.projections), poll_interval=0.1).run)
                while not applied_everywhere(engram, head):
                    time.sleep(0.05)
                took = time.perf_counter() - t
                print(f"relay + {n} worker{'s' if n > 1 else ' '}  {head} events in {took:6.1f} s  "
                      f"{head / took:8.0f} events/s")
                for b in [relay, *bgs]:
                    b.close()
                engram.close()
            finally:
                broker.stop()
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
