"""How soon a remembered memory is found by its meaning, and what embedding costs the writes.

    .venv/bin/python -m bench.meaning_lag [--remembers 200] [--rate 4] [--alternate 3] [--burst 300]

A separate `engram serve` (the embedded default, in-process projectors and embedding worker) on a fresh
embedded PostgreSQL:

- lag: `--remembers` remembers over HTTP at `--rate` a second, each with new text; for each, the time from
  its write's answer to its vector's commit (`engram_vectors.embedded_at` against the answer's clock,
  the same machine's), p50/p95/max: from then on recall ranks it by meaning;
- embedding rate: the worker's vectors a second while it drains a backlog of `--burst` memories
  remembered at once, and the serve process's CPU seconds a vector;
- writes: remember over HTTP from 16 clients (`--burst` each run), with `ENGRAM_EMBEDDINGS=off` and
  `local` alternated `--alternate` times on fresh databases: requests/s and p95, the embedding worker
  running beside the writes in `local` (at a lower priority, ADR 0040).
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from engram.api.identity import issue_token

from bench.harness import fresh_engram, pct
from bench.writes import cpu_seconds, drive, serving

WORDS = ("river", "garden", "violin", "bakery", "harbour", "lantern", "meadow", "orchard", "compass", "glacier",
         "saffron", "tram", "quilt", "falcon", "pebble", "cinema", "atlas", "canyon", "maple", "kettle")


def text(i: int) -> str:
    w = WORDS
    return f"I keep a {w[i % 20]} diary about the {w[(i // 20) % 20]} and the {w[(i // 400) % 20]}, note {i}"


def body(i: int) -> dict[str, Any]:
    return {"text": text(i), "source": {"kind": "chat", "id": "lag", "message_id": f"m-{i}"}}


def lag(bench: Any, url: str, token: str, n: int, rate: float) -> dict[str, Any]:
    answered: dict[str, datetime] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for i in range(n):
            started = time.monotonic()
            r = http.post("/v1/memories", json=body(i), headers={"Authorization": f"Bearer {token}"})
            answered[r.json()["id"]] = datetime.now(UTC)
            time.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))
        ends = time.monotonic() + 120
        while time.monotonic() < ends and embedded(bench) < n:
            time.sleep(0.2)
    with bench.engram.store.datastore.get_connection() as conn:
        rows = conn.execute("SELECT memory_id, embedded_at FROM engram_vectors").fetchall()
    lags = [(r["embedded_at"] - answered[str(r["memory_id"])]).total_seconds() * 1000 for r in rows
            if str(r["memory_id"]) in answered]
    return {"remembers": n, "rate_per_s": rate, "embedded": len(lags), "p50_ms": round(pct(lags, 50), 1),
            "p95_ms": round(pct(lags, 95), 1), "max_ms": round(max(lags), 1)}


def embedded(bench: Any) -> int:
    with bench.engram.store.datastore.get_connection() as conn:
        return int(conn.execute("SELECT count(*) AS n FROM engram_vectors").fetchone()["n"])


def burst(bench: Any, url: str, token: str, n: int, offset: int) -> dict[str, Any]:
    bodies = [("/v1/memories", body(offset + i), token) for i in range(n)]
    before = embedded(bench)
    latencies, took, _ = asyncio.run(drive(url, 16, bodies, (201,)))
    out: dict[str, Any] = {"remembers": n, "per_s": round(n / took, 1), "p50_ms": round(pct(latencies, 50), 1),
                           "p95_ms": round(pct(latencies, 95), 1)}
    if os.environ.get("ENGRAM_EMBEDDINGS") != "off":
        cpu0, t0, done0 = cpu_seconds(lambda: [bench.serve_pid]), time.monotonic(), embedded(bench)
        while embedded(bench) < before + n and time.monotonic() - t0 < 600:
            time.sleep(0.5)
        took = time.monotonic() - t0
        made = embedded(bench) - done0
        out["drain"] = {"vectors": made, "s": round(took, 1), "per_s": round(made / took, 1) if took else None,
                        "serve_cpu_s_per_vector": round((cpu_seconds(lambda: [bench.serve_pid]) - cpu0) / max(made, 1), 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--remembers", type=int, default=200)
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--burst", type=int, default=300)
    ap.add_argument("--alternate", type=int, default=3)
    args = ap.parse_args()
    report: dict[str, Any] = {"command": " ".join(["python -m bench.meaning_lag", *sys.argv[1:]]),
                              "load_average_before": open("/proc/loadavg").read().split()[:3], "writes": []}
    os.environ["ENGRAM_EMBEDDINGS"] = "local"
    with fresh_engram(lazy_commit=True) as bench, serving(bench) as url:
        token = issue_token(bench.secret, company="acme", user="alice")
        report["lag"] = lag(bench, url, token, args.remembers, args.rate)
        print(f"# lag {report['lag']}", file=sys.stderr)
    for turn in range(args.alternate):
        for mode in ("off", "local"):
            os.environ["ENGRAM_EMBEDDINGS"] = mode
            with fresh_engram(lazy_commit=True) as bench, serving(bench) as url:
                token = issue_token(bench.secret, company="acme", user="alice")
                run = {"mode": mode, "turn": turn, **burst(bench, url, token, args.burst, 10_000)}
                report["writes"].append(run)
                print(f"# {run}", file=sys.stderr)
    report["load_average_after"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
