"""One person bursting while a colleague of the same company recalls: the colleague's latency, with and
without request rates (ENGRAM_RATE_PERSON, ENGRAM_RATE_COMPANY), on `engram serve`'s embedded default.

    .venv/bin/python -m bench.fairness [--seconds 20] [--burst 8] [--rounds 2] [--rate 50]

Each round starts `engram serve` twice, alternated: without rates, then with `ENGRAM_RATE_PERSON=--rate`
(and the company's at ten times that). In each: a colleague ("bob") recalls one request at a time, at
most 20 a second (under the rates set), for `--seconds` alone, then as long again while "alice" sends
`--burst` connections of recalls and remembers as fast as they are answered. Printed per
configuration: the colleague's p50 and p95 alone and beside the burst, how many of the colleague's
requests failed (must be 0), and the burst's answers by status (429 once limited). The colleague's
client is sequential, so it measures latency, not the stack's throughput (bench/writes.py does that
with wrk); the burst's own client runs on the same cores. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.harness import EmbeddedServe
from tests.support.helpers import SECRET, auth, remember_body

COLLEAGUE_EVERY = 0.05  # 20 recalls a second at most: a busy bot, under the rates below
WORDS = ("tea", "coffee", "trains", "reports", "meetings", "mornings", "bikes", "notes")


def _quantile(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[int(q * 100) - 1], 2) if len(values) >= 2 else 0.0


def _colleague(url: str, seconds: float, every: float) -> dict[str, Any]:
    """Recalls one at a time, one every `every` seconds (well under any rate this bench sets)."""
    headers, took, failed = auth(user="bob"), [], 0
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=30) as client:
        i, started = 0, time.perf_counter()
        while time.monotonic() < deadline:
            if i:
                time.sleep(max(0.0, every - (time.perf_counter() - started)))
            started = time.perf_counter()
            r = client.post("/v1/recall", json={"query": WORDS[i % len(WORDS)]}, headers=headers)
            took.append((time.perf_counter() - started) * 1000)
            failed += r.status_code != 200
            i += 1
    return {"requests": len(took), "p50_ms": _quantile(took, 0.5), "p95_ms": _quantile(took, 0.95), "failed": failed}


def _burst(url: str, connections: int, stop: threading.Event, statuses: Counter[int]) -> list[threading.Thread]:
    def run(n: int) -> None:
        headers = auth(user="alice")
        with httpx.Client(base_url=url, timeout=30) as client:
            i = 0
            while not stop.is_set():
                if i % 4 == 0:
                    r = client.post("/v1/memories", json=remember_body(f"I like {WORDS[i % len(WORDS)]} {n}-{i}"),
                                    headers=headers)
                else:
                    r = client.post("/v1/recall", json={"query": WORDS[i % len(WORDS)], "limit": 50}, headers=headers)
                statuses[r.status_code] += 1
                i += 1

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(connections)]
    for t in threads:
        t.start()
    return threads


def measure(work: Path, seconds: float, connections: int, env: dict[str, str]) -> dict[str, Any]:
    serve = EmbeddedServe(work, SECRET, ENGRAM_EMBEDDINGS="off", **env)
    url = serve.start()
    try:
        with httpx.Client(base_url=url, timeout=30) as client:  # something to recall, for both
            for person in ("alice", "bob"):
                for i, word in enumerate(WORDS * 5):
                    client.post("/v1/memories", json=remember_body(f"I like {word} number {i}"), headers=auth(user=person))
        alone = _colleague(url, seconds, COLLEAGUE_EVERY)
        stop, statuses = threading.Event(), Counter[int]()
        threads = _burst(url, connections, stop, statuses)
        beside = _colleague(url, seconds, COLLEAGUE_EVERY)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        return {"colleague_alone": alone, "colleague_beside_burst": beside,
                "burst_statuses": {str(k): v for k, v in sorted(statuses.items())}}
    finally:
        serve.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--burst", type=int, default=8, help="the bursting person's connections")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=int, default=50, help="ENGRAM_RATE_PERSON in the limited runs")
    args = parser.parse_args()
    out: dict[str, Any] = {"command": "python -m bench.fairness " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items()), "cores": os.cpu_count(), "runs": []}
    configurations = {"no rates": {}, f"ENGRAM_RATE_PERSON={args.rate}": {
        "ENGRAM_RATE_PERSON": str(args.rate), "ENGRAM_RATE_COMPANY": str(args.rate * 10)}}
    with tempfile.TemporaryDirectory(prefix="engram-fairness-") as tmp:
        for round_ in range(args.rounds):
            for name, env in configurations.items():  # alternated, each on a fresh data directory
                result = measure(Path(tmp) / f"{round_}-{len(out['runs'])}", args.seconds, args.burst, env)
                out["runs"].append({"round": round_ + 1, "configuration": name, **result})
                print(json.dumps(out["runs"][-1]), flush=True)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
