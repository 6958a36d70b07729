"""Engram's writes against the stack's floor, both driven by `wrk` in the same run, alternated.

    .venv/bin/python -m bench.stack [--seconds 15] [--rounds 2] [--only remember,receipt,batch,mixed]
        [--processes 1] [--env NAME=VALUE ...]

The load generator is Debian's `wrk` (`make bench-tools` installs it): one thread in C, so on 2 cores the
generator is not what bounds the rate (bench/writes.py's Python clients could not pass about 900
requests a second whatever the server did). Each round measures, one after another on the same cores:

- `floor`: uvicorn serving bench/floor.py's FastAPI app, whose plain `def` endpoint (a worker thread, as
  Engram's endpoints are) reads a remember's body into a pydantic model and answers 201: what the stack
  carries before Engram does anything. Measured at 16 and at 32 connections.
- `remember`: `engram serve` (embedded default, a fresh data directory each round), `POST /v1/memories`
  from 16 connections, each request a new text, for 16 people in turn (a person's own turns are 4 at
  once, ADR 0061: one person's 16 connections would measure that bound instead).
- `receipt`: `POST /v1/receipts`, one message a request, 16 connections.
- `batch`: `POST /v1/receipts` with `{"messages": [...]}` of 20 messages, 16 connections (messages/s).
- `mixed`: 32 connections, 30% remember, 60% recall, 10% correct and forget (alternately, of memories
  this run remembered), over 16 people with 20 memories each remembered first. Recall's own latency
  is measured beside the load by one Python client recalling one request at a time, at most 20 a
  second (wrk reports latency over all requests only), as a bot's recall would meet it.

Each Engram figure is printed with the ratio to the floor measured in the same round at the same
connections, the statuses (anything but 2xx is counted apart, and a run with other statuses says so),
and the CPU each request cost the server process and PostgreSQL. `--processes N` runs
`engram serve --processes N` (its serving processes count as the server's); `--env` adds settings.
Prints one JSON line per run and one JSON document at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.floor import APP
from bench.harness import EmbeddedServe, free_port, wait_healthy
from bench.writes import cpu_seconds
from tests.support.helpers import SECRET, auth, remember_body

PEOPLE = 16
WORDS = ("tea", "coffee", "trains", "reports", "meetings", "mornings", "bikes", "notes", "dogs", "rain")

# What every script shares: the people's tokens, a count of statuses, and a JSON line from `done` with
# wrk's own rate and latency percentiles (its `--latency` output has no p95).
COMMON = """
local tokens = {%(tokens)s}
local words = {"tea", "coffee", "trains", "reports", "meetings", "mornings", "bikes", "notes", "dogs", "rain"}
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) n = 0; ok = 0; other = 0; first = "" end
local function headers(p)
  return {["Authorization"] = "Bearer " .. tokens[p], ["Content-Type"] = "application/json"}
end
local function counted(status, body)
  if status < 300 then ok = ok + 1 else other = other + 1; if first == "" then first = status .. " " .. body:sub(1, 200) end end
end
function done(summary, latency, requests)
  local a, o, f = 0, 0, ""
  for _, t in ipairs(threads) do a = a + t:get("ok"); o = o + t:get("other"); if f == "" then f = t:get("first") end end
  io.write(string.format('{"wrk": {"requests": %%d, "seconds": %%.3f, "p50_ms": %%.2f, "p95_ms": %%.2f, ' ..
    '"p99_ms": %%.2f, "max_ms": %%.2f, "ok": %%d, "other": %%d, "socket_errors": %%d, "first_other": "%%s"}}\\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3, latency:percentile(95) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3, a, o,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    f:gsub('[%%c"\\\\]', " ")))
end
"""

FLOOR = COMMON + """
function request()
  n = n + 1
  return wrk.format("POST", "/v1/memories/thread", headers(n %% #tokens + 1),
    '{"text": "I like ' .. words[n %% #words + 1] .. ' ' .. n .. '", "source": {"kind": "chat", "id": "c-1", ' ..
    '"message_id": "m-' .. n .. '"}}')
end
function response(status, headers, body) counted(status, body) end
"""

# A remember's text names its person and a number no other request of the run uses.
REMEMBER = COMMON + """
local run = "%(run)s"
local function remember(p)
  return wrk.format("POST", "/v1/memories", headers(p),
    '{"text": "I like ' .. words[n %% #words + 1] .. ' ' .. run .. ' p' .. p .. ' n' .. n .. '", ' ..
    '"source": {"kind": "chat", "id": "c-' .. p .. '", "message_id": "' .. run .. '-' .. n .. '"}}')
end
function request() n = n + 1; return remember(n %% #tokens + 1) end
function response(status, headers, body) counted(status, body) end
"""

RECEIPT = COMMON + """
local run = "%(run)s"
local function message(p, i)
  return '{"receipt_id": "' .. run .. '-' .. n .. '-' .. i .. '", "author": "user", "text": "I like ' ..
    words[(n + i) %% #words + 1] .. ' in the morning ' .. n .. '", "source": {"kind": "chat", "id": "c-' .. p ..
    '", "message_id": "' .. run .. '-' .. n .. '-' .. i .. '"}}'
end
function request()
  n = n + 1
  local p = n %% #tokens + 1
  if %(batch)d == 1 then return wrk.format("POST", "/v1/receipts", headers(p), message(p, 0)) end
  local parts = {}
  for i = 1, %(batch)d do parts[i] = message(p, i) end
  return wrk.format("POST", "/v1/receipts", headers(p), '{"messages": [' .. table.concat(parts, ", ") .. ']}')
end
function response(status, headers, body) counted(status, body) end
"""

# Mixed: of every ten requests three remember, six recall and one corrects or forgets (alternately) a
# memory this thread remembered; its person is read back from the text the answer echoes.
MIXED = REMEMBER + """
local remembered, corrected = {}, {}
-- the first id shaped like a UUID in an answer is its memory's (sources' ids are the bench's own)
local uuid = "(%%x+%%-%%x+%%-%%x+%%-%%x+%%-%%x+)"
function request()
  n = n + 1
  local k, p = n %% 10, n %% #tokens + 1
  if k == 9 then
    if n %% 20 == 9 and #corrected > 0 then
      local m = table.remove(corrected, 1)
      return wrk.format("POST", "/v1/memories/" .. m[2] .. "/forget", headers(m[1]), "{}")
    elseif #remembered > 0 then
      local m = table.remove(remembered, 1)
      return wrk.format("POST", "/v1/memories/" .. m[2] .. "/correct", headers(m[1]),
        '{"text": "I like ' .. words[n %% #words + 1] .. ' ' .. run .. ' p' .. m[1] .. ' corrected ' .. n .. '"}')
    end
  end
  if k < 3 then return remember(p) end
  return wrk.format("POST", "/v1/recall", headers(p), '{"query": "' .. words[n %% #words + 1] .. '"}')
end
function response(status, headers, body)
  counted(status, body)
  if status == 201 then
    local p, id = body:match('p(%%d+) n%%d+"'), body:match(uuid)
    if p and id and #remembered < 1000 then table.insert(remembered, {tonumber(p), id}) end
  elseif status == 200 and body:find('"revision": ?2') then
    local p, id = body:match('p(%%d+) corrected'), body:match(uuid)
    if p and id and #corrected < 1000 then table.insert(corrected, {tonumber(p), id}) end
  end
end
"""


def _tokens() -> list[str]:
    return [auth(user=f"person-{i}")["Authorization"].removeprefix("Bearer ") for i in range(PEOPLE)]


def wrk(url: str, script: str, connections: int, seconds: float, work: Path) -> dict[str, Any]:
    found = shutil.which("wrk")
    if found is None:
        raise SystemExit("bench.stack: wrk not found; `make bench-tools` (as root) installs it")
    path = work / f"script-{time.monotonic_ns()}.lua"
    path.write_text(script)
    done = subprocess.run([found, "-t1", f"-c{connections}", f"-d{seconds:.0f}s", "--timeout", "30s", "-s", str(path),
                           url], capture_output=True, text=True, timeout=seconds + 120)
    line = next((x for x in done.stdout.splitlines() if x.startswith('{"wrk"')), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary: {done.stdout[-800:]} {done.stderr[-800:]}")
    result: dict[str, Any] = json.loads(line)["wrk"]
    result["per_s"] = round(result["ok"] / result["seconds"], 1)
    return result


class Floor:
    """bench/floor.py's bare FastAPI app under uvicorn, as `engram serve` runs it (uvloop, httptools)."""

    def __init__(self, work: Path) -> None:
        (work / "floor_app.py").write_text(APP)
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "floor_app:app", "--port", str(self.port),
                                      "--log-level", "warning", "--no-access-log"], cwd=work,
                                     env={**os.environ, "PYTHONPATH": str(work)})
        self.url = f"http://127.0.0.1:{self.port}"
        if not wait_healthy(self.url):
            raise RuntimeError("the bare FastAPI app did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure_floor(work: Path, seconds: float, connections: int) -> dict[str, Any]:
    floor = Floor(work)
    try:
        script = FLOOR % {"tokens": ", ".join(f'"{t}"' for t in _tokens())}
        wrk(floor.url, script, connections, 2, work)  # warm up
        before = cpu_seconds(lambda: [floor.proc.pid])
        result = wrk(floor.url, script, connections, seconds, work)
        result["server_cpu_ms"] = round((cpu_seconds(lambda: [floor.proc.pid]) - before) * 1000
                                        / max(1, result["requests"]), 3)
        return result
    finally:
        floor.stop()


def _postmaster(data_dir: Path) -> list[int]:
    found = sorted(data_dir.rglob("postmaster.pid"))
    return [int(found[0].read_text().split()[0])] if found else []


def _recaller(url: str, stop: threading.Event, took: list[float], failed: list[int]) -> None:
    """One bot's recalls beside the load, one at a time, at most 20 a second."""
    with httpx.Client(base_url=url, timeout=30) as client:
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            r = client.post("/v1/recall", json={"query": WORDS[i % len(WORDS)]}, headers=auth(user=f"person-{i % PEOPLE}"))
            took.append((time.perf_counter() - started) * 1000)
            if r.status_code != 200:
                failed.append(r.status_code)
            i += 1
            stop.wait(max(0.0, 0.05 - (time.perf_counter() - started)))


def _quantile(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[int(q * 100) - 1], 2) if len(values) >= 2 else 0.0


def measure_engram(work: Path, scenario: str, seconds: float, processes: int, env: dict[str, str],
                   run: str) -> dict[str, Any]:
    data = work / "engram-data"
    serve = EmbeddedServe(data, SECRET, ENGRAM_SERVE_PROCESSES=str(processes), **env)
    url = serve.start()
    tokens = ", ".join(f'"{t}"' for t in _tokens())
    try:
        if scenario == "mixed":  # something to recall, correct and forget, for everyone
            with httpx.Client(base_url=url, timeout=30) as seeding:
                for i in range(PEOPLE * 20):
                    seeding.post("/v1/memories", json=remember_body(f"I like {WORDS[i % len(WORDS)]} seed {i}"),
                                 headers=auth(user=f"person-{i % PEOPLE}"))
        script, connections = {
            "remember": (REMEMBER % {"tokens": tokens, "run": run}, 16),
            "receipt": (RECEIPT % {"tokens": tokens, "run": run, "batch": 1}, 16),
            "batch": (RECEIPT % {"tokens": tokens, "run": run, "batch": 20}, 16),
            "mixed": (MIXED % {"tokens": tokens, "run": run}, 32),
        }[scenario]
        wrk(url, script.replace(f'"{run}"', f'"{run}-warm"'), min(connections, 16), 2, work)  # warm up
        server_pid = [serve.proc.pid] if serve.proc is not None else []
        server, database = cpu_seconds(lambda: server_pid), cpu_seconds(lambda: _postmaster(data))
        stop, took, failed = threading.Event(), list[float](), list[int]()
        recaller = threading.Thread(target=_recaller, args=(url, stop, took, failed), daemon=True)
        if scenario == "mixed":
            recaller.start()
        result = wrk(url, script, connections, seconds, work)
        stop.set()
        if scenario == "mixed":
            recaller.join(timeout=60)
            result["recall_beside"] = {"requests": len(took), "p50_ms": _quantile(took, 0.5),
                                       "p95_ms": _quantile(took, 0.95), "failed": len(failed)}
        requests = max(1, result["requests"])
        result["cpu_ms_per_request"] = {
            "server": round((cpu_seconds(lambda: server_pid) - server) * 1000 / requests, 3),
            "postgres": round((cpu_seconds(lambda: _postmaster(data)) - database) * 1000 / requests, 3)}
        if scenario == "batch":
            result["messages_per_s"] = round(result["per_s"] * 20, 1)
        return result
    finally:
        serve.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="remember,receipt,batch,mixed")
    parser.add_argument("--processes", type=int, default=1, help="engram serve --processes")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE added to engram serve's environment")
    args = parser.parse_args()
    env = dict(e.split("=", 1) for e in args.env)
    scenarios = [s for s in args.only.split(",") if s]
    out: dict[str, Any] = {"command": "python -m bench.stack " + " ".join(sys.argv[1:]), "cores": os.cpu_count(),
                           "load_average_before": [round(x, 2) for x in os.getloadavg()], "runs": []}
    with tempfile.TemporaryDirectory(prefix="engram-stack-") as tmp:
        for round_ in range(args.rounds):
            floors: dict[int, dict[str, Any]] = {}
            for scenario in scenarios:
                connections = 32 if scenario == "mixed" else 16
                if connections not in floors:  # the floor, then Engram: alternated in every round
                    work = Path(tmp) / f"floor-{round_}-{scenario}"
                    work.mkdir()
                    floors[connections] = measure_floor(work, args.seconds, connections)
                    out["runs"].append({"round": round_ + 1, "scenario": f"floor-{connections}",
                                        **floors[connections]})
                    print(json.dumps(out["runs"][-1]), flush=True)
                work = Path(tmp) / f"{scenario}-{round_}"
                work.mkdir()
                result = measure_engram(work, scenario, args.seconds, args.processes, env, f"r{round_}{scenario}")
                result["of_floor"] = round(result["per_s"] / max(1e-9, floors[connections]["per_s"]), 3)
                out["runs"].append({"round": round_ + 1, "scenario": scenario, **result})
                print(json.dumps(out["runs"][-1]), flush=True)
                floors.pop(connections)  # the next scenario at these connections measures its floor again
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
