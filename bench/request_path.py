"""What a request costs the API process itself: recall and remember through the ASGI app, and the
same calls straight into the services, in one process, without sockets or HTTP clients.

    .venv/bin/python -m bench.request_path [--memories 1000] [--requests 1000] [--out FILE]

On a fresh embedded PostgreSQL in a temporary directory, an in-process Engram (no background loops)
and the app `engram serve` runs (`create_app`) get:

1. `--memories` remembers through the app from 10 people (16 at once), so recall has something to find;
2. `remember_app`: `--requests` more remembers through the app, 16 at once;
3. `recall_app_c1` and `recall_app_c4`: `--requests` recalls of two words from the texts' vocabulary
   (hits and misses) through the app, from 1 and from 4 callers at once;
4. `recall_service` and `remember_service`: the same calls straight into `RecallService.recall` (one
   thread) and `MemoryService.remember` (16 threads).

For each: the CPU time of this process per request (`time.process_time`: every thread's, PostgreSQL's
excluded), requests/s and p50/p95 latency. The app's figure less the service's is what the HTTP layer
(routing, dependencies, validation, the worker-thread hop, writing the answer) costs; uvicorn's
parsing of the bytes and the client's own work are not in either (bench/load.py and bench/scale.py
measure over real HTTP). Run it once with `PYTHONPATH` set to another checkout's `src` (linked as
`engram`) to compare two versions of the code in the same hour. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from engram.api.http import create_app
from engram.api.identity import issue_token
from engram.domain.scope import Caller

from bench.harness import fresh_engram, pct
from bench.writes import WORDS, sentence

PEOPLE = [f"person-{i}" for i in range(10)]


def question(r: random.Random) -> str:
    return f"{r.choice(WORDS)} {r.choice(WORDS)}"


async def call(app: Any, method: str, path: str, body: dict[str, Any], token: str) -> int:
    """One request through the ASGI app, as uvicorn hands it over; the answer's status."""
    raw = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"bench"), (b"authorization", f"Bearer {token}".encode()),
                         (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    delivered = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


def figures(latencies: list[float], cpu: float, took: float, statuses: dict[int, int]) -> dict[str, Any]:
    n = len(latencies)
    return {"requests": n, "cpu_ms_per_request": round(cpu * 1000 / n, 2), "per_s": round(n / took, 1),
            "p50_ms": round(pct(latencies, 50), 2), "p95_ms": round(pct(latencies, 95), 2), "statuses": statuses}


def through_app(count: int, concurrent: int, one: Callable[[int], Awaitable[int]]) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    todo = iter(range(count))

    async def caller() -> None:
        for i in todo:
            started = time.perf_counter()
            status = await one(i)
            latencies.append((time.perf_counter() - started) * 1000)
            statuses[status] = statuses.get(status, 0) + 1

    async def run() -> None:
        await asyncio.gather(*(caller() for _ in range(concurrent)))

    cpu, started = time.process_time(), time.perf_counter()
    asyncio.run(run())
    return figures(latencies, time.process_time() - cpu, time.perf_counter() - started, statuses)


def straight(count: int, threads: int, one: Callable[[int], Any]) -> dict[str, Any]:
    latencies: list[float] = []

    def timed(i: int) -> None:
        started = time.perf_counter()
        one(i)
        latencies.append((time.perf_counter() - started) * 1000)

    cpu, started = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(timed, range(count)))
    return figures(latencies, time.process_time() - cpu, time.perf_counter() - started, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "cores": os.cpu_count(),
                           "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    r = random.Random(17)
    with fresh_engram() as bench:
        app = create_app(bench.engram, bench.secret)
        tokens = [issue_token(bench.secret, company="acme", user=p) for p in PEOPLE]
        callers = [Caller(company="acme", person=p, role="user", bot=None, entry="api") for p in PEOPLE]

        def remember(i: int) -> Awaitable[int]:
            body = {"text": sentence(r), "source": {"kind": "chat", "id": "web", "message_id": f"m-{i}-{r.random()}"}}
            return call(app, "POST", "/v1/memories", body, tokens[i % len(tokens)])

        def recall(i: int) -> Awaitable[int]:
            return call(app, "POST", "/v1/recall", {"query": question(r)}, tokens[i % len(tokens)])

        through_app(args.memories, 16, remember)  # the seed
        out["remember_app"] = through_app(args.requests, 16, remember)
        out["recall_app_c1"] = through_app(args.requests, 1, recall)
        out["recall_app_c4"] = through_app(args.requests, 4, recall)
        out["recall_service"] = straight(args.requests, 1, lambda i: bench.engram.recall.recall(
            callers[i % len(callers)], query=question(r), as_of=None, max_bytes=8192, limit=10))
        out["remember_service"] = straight(args.requests, 16, lambda i: bench.engram.memories.remember(
            callers[i % len(callers)], text=sentence(r), source={"kind": "chat", "id": "web", "message_id": f"s-{i}"},
            occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None))
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
