"""Mixed load over HTTP, big remembers, and forget until purge complete.

    .venv/bin/python -m bench.load [--clients 32] [--seconds 30] [--seed 1000] [--big 100] [--forgets 50]
        [--processes 1] [--out FILE]

On a fresh embedded PostgreSQL in a temporary directory, a separate `engram serve` process (projectors
in-process, the default deployment; no Hindsight; `--processes N` serving processes, ADR 0037)
answers, in this order:

1. `seed`: `--seed` memories remembered over HTTP by 16 clients for 20 people, so recall has
   something to find;
2. `mixed`: `--clients` concurrent keep-alive clients for `--seconds`, each request drawn as 30%
   remember (new text), 60% recall (words of the seeded texts, hits and misses), 10% correct or forget
   (half each) of a memory the same person remembered; requests/s overall and p50/p95 per kind;
3. `big_remember`: `--big` remembers of about 8 KiB each from one client (requests/s, p50/p95);
4. `forget_to_purge`: `--forgets` forgets from one client, each followed by polling
   `GET /v1/forgets/{id}` every 10 ms until `purge_complete`: the forget request's own latency (after
   which the memory is already unusable) and the time until every copy reports purged (p50/p95).

Every answer outside the expected statuses is counted by status and `code` (never raised), so a
failing run still prints what it saw. Prints one JSON document. The clients run on the same machine
as the server and its database: on 2 cores they take a share of the CPU too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from typing import Any

import httpx

from engram.api.identity import issue_token

from bench.harness import fresh_engram, pct
from bench.writes import WORDS, serving

PEOPLE = [f"person-{i}" for i in range(20)]
BOT = "b-load"


def sentence(r: random.Random, words: int) -> str:
    return "I prefer " + " ".join(r.choice(WORDS) for _ in range(words)) + " for meetings"


def summary(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"count": 0}
    return {"count": len(latencies), "p50_ms": round(pct(latencies, 50), 2), "p95_ms": round(pct(latencies, 95), 2),
            "max_ms": round(max(latencies), 2)}


class Run:
    """Tokens, the memories each person has remembered, and what every answer was."""

    def __init__(self, secret: str, seed: int) -> None:
        self.bot = {p: issue_token(secret, company="acme", user=p, role="bot", bot=BOT) for p in PEOPLE}
        self.user = {p: issue_token(secret, company="acme", user=p, role="user") for p in PEOPLE}
        self.admin = issue_token(secret, company="acme", user="admin-1", role="admin")
        self.rand = random.Random(seed)
        self.owned: dict[str, list[str]] = {p: [] for p in PEOPLE}
        self.latency: dict[str, list[float]] = {}
        self.unexpected: Counter[str] = Counter()
        self.counter = 0

    def next_message(self) -> str:
        self.counter += 1
        return f"m-{self.counter}"

    async def call(self, http: httpx.AsyncClient, kind: str, method: str, path: str, token: str,
                   ok: tuple[int, ...], body: Any = None) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            r = await http.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as e:
            self.unexpected[f"{kind}:{type(e).__name__}"] += 1
            return None
        self.latency.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        if r.status_code not in ok:
            code = r.json().get("code") if r.headers.get("content-type", "").endswith("json") else None
            self.unexpected[f"{kind}:{r.status_code}:{code}"] += 1
            return None
        return r

    async def remember(self, http: httpx.AsyncClient, person: str, words: int, kind: str = "remember") -> None:
        body = {"text": sentence(self.rand, words),
                "source": {"kind": "chat", "id": f"chat-{person}", "message_id": self.next_message()}}
        r = await self.call(http, kind, "POST", "/v1/memories", self.bot[person], (200, 201, 202), body)
        if r is not None and r.json().get("status") == "confirmed":
            self.owned[person].append(r.json()["id"])

    async def recall(self, http: httpx.AsyncClient, person: str) -> None:
        query = " ".join(self.rand.choice(WORDS) for _ in range(2)) if self.rand.random() < 0.8 else "zzqx nothing"
        await self.call(http, "recall", "POST", "/v1/recall", self.bot[person], (200,),
                        {"query": query, "limit": 10})

    async def correct_or_forget(self, http: httpx.AsyncClient, person: str) -> None:
        mine = self.owned[person]
        if not mine:
            return await self.recall(http, person)
        if self.rand.random() < 0.5:
            body = {"text": sentence(self.rand, 8), "reason": "changed"}
            await self.call(http, "correct", "POST", f"/v1/memories/{self.rand.choice(mine)}/correct",
                            self.user[person], (200, 202), body)
        else:
            gone = mine.pop(self.rand.randrange(len(mine)))
            await self.call(http, "forget", "POST", f"/v1/memories/{gone}/forget", self.user[person], (202,))
        return None


async def register(url: str, run: Run) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        directory = {"teams": {}, "sources": {}, "bots": {BOT: {"teams": [], "sources": []}}}
        r = await http.put("/v1/admin/directory", json=directory, headers={"Authorization": f"Bearer {run.admin}"})
        r.raise_for_status()


async def seed(url: str, run: Run, count: int) -> float:
    todo = iter(range(count))

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for i in todo:
                await run.remember(http, PEOPLE[i % len(PEOPLE)], run.rand.randint(6, 12), kind="seed")

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(16)))
    return time.perf_counter() - started


async def mixed(url: str, run: Run, clients: int, seconds: float) -> tuple[int, float]:
    end = time.perf_counter() + seconds
    done = 0

    async def client() -> None:
        nonlocal done
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            while time.perf_counter() < end:
                person = run.rand.choice(PEOPLE)
                draw = run.rand.random()
                if draw < 0.3:
                    await run.remember(http, person, run.rand.randint(6, 12))
                elif draw < 0.9:
                    await run.recall(http, person)
                else:
                    await run.correct_or_forget(http, person)
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return done, time.perf_counter() - started


async def big(url: str, run: Run, count: int) -> float:
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for i in range(count):
            await run.remember(http, PEOPLE[i % len(PEOPLE)], 1340, kind="big_remember")  # about 8 KB of the 8 KiB limit
    return time.perf_counter() - started


async def forget_to_purge(url: str, run: Run, count: int) -> list[float]:
    purged: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for i in range(count):
            person = PEOPLE[i % len(PEOPLE)]
            if not run.owned[person]:
                continue
            gone = run.owned[person].pop()
            started = time.perf_counter()
            r = await run.call(http, "forget_request", "POST", f"/v1/memories/{gone}/forget", run.user[person], (202,))
            if r is None:
                continue
            status = f"/v1/forgets/{r.json()['forget_id']}"
            while time.perf_counter() - started < 30:
                s = await http.get(status, headers={"Authorization": f"Bearer {run.user[person]}"})
                if s.status_code == 200 and s.json()["status"] == "purge_complete":
                    purged.append((time.perf_counter() - started) * 1000)
                    break
                await asyncio.sleep(0.01)
            else:
                run.unexpected["forget_to_purge:not_complete_in_30s"] += 1
    return purged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--big", type=int, default=100)
    parser.add_argument("--forgets", type=int, default=50)
    parser.add_argument("--processes", type=int, default=1, help="engram serve --processes (ADR 0037)")
    parser.add_argument("--out")
    args = parser.parse_args()

    out: dict[str, Any] = {"args": vars(args)}
    with fresh_engram() as bench, serving(bench, args.processes) as url:
        run = Run(bench.secret, seed=7)
        asyncio.run(register(url, run))
        took = asyncio.run(seed(url, run, args.seed))
        out["seed"] = {"memories": args.seed, "per_s": round(args.seed / took, 1), **summary(run.latency.pop("seed", []))}
        print(f"# seed: {out['seed']}", file=sys.stderr)

        done, took = asyncio.run(mixed(url, run, args.clients, args.seconds))
        out["mixed"] = {"clients": args.clients, "requests": done, "per_s": round(done / took, 1),
                        **{k: summary(run.latency.pop(k, [])) for k in ("remember", "recall", "correct", "forget")}}
        print(f"# mixed: {out['mixed']}", file=sys.stderr)

        took = asyncio.run(big(url, run, args.big))
        out["big_remember"] = {"bytes": len(sentence(random.Random(1), 1340).encode()),
                               "per_s": round(args.big / took, 1), **summary(run.latency.pop("big_remember", []))}
        print(f"# big_remember: {out['big_remember']}", file=sys.stderr)

        purged = asyncio.run(forget_to_purge(url, run, args.forgets))
        out["forget_to_purge"] = {"request": summary(run.latency.pop("forget_request", [])),
                                  "until_purge_complete": summary(purged)}
        print(f"# forget_to_purge: {out['forget_to_purge']}", file=sys.stderr)
        out["unexpected"] = dict(run.unexpected)
    text = json.dumps(out, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
