"""One person bursting while a colleague of the same company recalls: the colleague's latency, with and
without request rates (ENGRAM_RATE_PERSON, ENGRAM_RATE_COMPANY) and a person's turns
(ENGRAM_PERSON_IN_FLIGHT, ENGRAM_RATE_REFUSAL_DELAY; ADR 0061), on `engram serve`'s embedded default.

    .venv/bin/python -m bench.fairness [--seconds 20] [--burst 8] [--rounds 2] [--rate 50] [--client wrk]

Each round starts `engram serve` once per configuration, alternated, each on a fresh data directory:
the release before ADR 0061 as these settings reproduce it (no turns, refusals answered at once),
without and with `ENGRAM_RATE_PERSON=--rate` (the company's at ten times that), then the defaults,
without and with the rate. In each: a colleague ("bob") recalls one request at a time, at most 20 a
second, for `--seconds` alone, then as long again while "alice" sends `--burst` connections of recalls
(50 items) and remembers, three to one, as fast as they are answered. The burst is driven by `wrk`
(`--client wrk`, the default; Debian's package, `make bench-tools` installs it), one thread in C, so
the generator is not what loads the cores; `--client python` drives it with 8 Python threads as
before. Printed per configuration: the colleague's p50 and p95 alone and beside the burst, how many of
the colleague's requests failed (must be 0), and the burst's answers by status. The colleague's client
is sequential, so it measures latency, not throughput. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
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


# wrk's script: alice's recalls and remembers, three to one, each remember's text new; counts statuses
# per thread and prints them as one JSON line when done.
WRK_SCRIPT = """
local token = "%(token)s"
local words = {"tea", "coffee", "trains", "reports", "meetings", "mornings", "bikes", "notes"}
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) n = 0; ok = 0; limited = 0; other = 0 end
function request()
  n = n + 1
  local word = words[(n %% #words) + 1]
  local headers = {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}
  if n %% 4 == 0 then
    local body = '{"text": "I like ' .. word .. ' ' .. n .. '", "source": {"kind": "chat", "id": "c-1", ' ..
                 '"message_id": "m-' .. n .. '"}}'
    return wrk.format("POST", "/v1/memories", headers, body)
  end
  return wrk.format("POST", "/v1/recall", headers, '{"query": "' .. word .. '", "limit": 50}')
end
function response(status, headers, body)
  if status < 300 then ok = ok + 1 elseif status == 429 then limited = limited + 1 else other = other + 1 end
end
function done(summary, latency, requests)
  local a, l, o = 0, 0, 0
  for _, t in ipairs(threads) do a = a + t:get("ok"); l = l + t:get("limited"); o = o + t:get("other") end
  io.write(string.format('{"answered": %%d, "429": %%d, "other": %%d}\\n', a, l, o))
end
"""


def _wrk_burst(url: str, connections: int, seconds: float, work: Path) -> subprocess.Popen[str]:
    token = auth(user="alice")["Authorization"].removeprefix("Bearer ")
    script = work.parent / f"{work.name}-burst.lua"
    script.write_text(WRK_SCRIPT % {"token": token})
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("bench.fairness --client wrk: wrk not found; `make bench-tools` (as root) installs it")
    return subprocess.Popen([wrk, "-t1", f"-c{connections}", f"-d{seconds:.0f}s", "-s", str(script), url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wrk_statuses(output: str) -> dict[str, Any]:
    line = next((x for x in output.splitlines() if x.startswith('{"answered"')), None)
    return json.loads(line) if line else {"wrk_output": output[-500:]}


def measure(work: Path, seconds: float, connections: int, env: dict[str, str], client: str = "wrk") -> dict[str, Any]:
    serve = EmbeddedServe(work, SECRET, ENGRAM_EMBEDDINGS="off", **env)
    url = serve.start()
    try:
        with httpx.Client(base_url=url, timeout=30) as seeding:  # something to recall, for both
            for person in ("alice", "bob"):
                for i, word in enumerate(WORDS * 5):
                    seeding.post("/v1/memories", json=remember_body(f"I like {word} number {i}"), headers=auth(user=person))
        alone = _colleague(url, seconds, COLLEAGUE_EVERY)
        if client == "wrk":
            burst = _wrk_burst(url, connections, seconds + 2, work)
            time.sleep(1)  # wrk's connections open
            beside = _colleague(url, seconds, COLLEAGUE_EVERY)
            out, _ = burst.communicate(timeout=seconds + 60)
            return {"colleague_alone": alone, "colleague_beside_burst": beside, "burst_statuses": _wrk_statuses(out)}
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
    parser.add_argument("--client", choices=("wrk", "python"), default="wrk", help="what drives the burst")
    parser.add_argument("--only", default="", help="comma-separated configuration names to run (all by default)")
    args = parser.parse_args()
    out: dict[str, Any] = {"command": "python -m bench.fairness " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items()), "cores": os.cpu_count(), "runs": []}
    rated = {"ENGRAM_RATE_PERSON": str(args.rate), "ENGRAM_RATE_COMPANY": str(args.rate * 10)}
    before = {"ENGRAM_PERSON_IN_FLIGHT": "0", "ENGRAM_RATE_REFUSAL_DELAY": "0"}  # as before ADR 0061
    configurations = {"before: no rates": before, f"before: rate {args.rate}": {**before, **rated},
                      "turns: no rates": {}, f"turns: rate {args.rate}": rated}
    if args.only:
        configurations = {k: v for k, v in configurations.items() if k in args.only.split(",")}
    with tempfile.TemporaryDirectory(prefix="engram-fairness-") as tmp:
        for round_ in range(args.rounds):
            for name, env in configurations.items():  # alternated, each on a fresh data directory
                work = Path(tmp) / f"{round_}-{len(out['runs'])}"
                result = measure(work, args.seconds, args.burst, env, args.client)
                out["runs"].append({"round": round_ + 1, "configuration": name, **result})
                print(json.dumps(out["runs"][-1]), flush=True)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
