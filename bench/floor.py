"""The floor under issue 17's write targets on this machine: what the chosen stack costs before Engram
does anything, measured the way `bench/writes.py` measures a remember.

    .venv/bin/python -m bench.floor [--requests 3000] [--clients 16] [--commits 3000]

- `http_async` and `http_thread`: uvicorn (as `engram serve` runs it: uvloop, httptools) serving a
  FastAPI app whose `POST /v1/memories` reads a body of a remember's shape into a pydantic model and
  answers 201 with a small JSON document, doing nothing else: an `async def` endpoint, and a plain `def`
  one (run on a worker thread, as Engram's endpoints are). Driven by `bench/writes.py`'s clients (httpx,
  keep-alive, `--clients` at once) on the same cores.
- `commits`: the embedded PostgreSQL, `--clients` connections each inserting one row of 600 bytes and
  committing (synchronous commit, as Engram's writes), `--commits` in all.

Each prints requests (or commits) a second and the CPU each cost the server process, PostgreSQL and the
clients. A remember can cost no less than `http_thread`'s server and client CPU plus one commit's
PostgreSQL CPU; on 2 cores the sum of the three bounds the rate. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from engram.adapters.database import EmbeddedPostgres

from bench.harness import free_port, wait_healthy
from bench.writes import cpu_seconds, drive, figures

APP = '''
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

class Source(BaseModel):
    kind: str
    id: str
    message_id: str | None = None

class Remember(BaseModel):
    text: str
    explicit: bool = False
    source: Source

app = FastAPI()

@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}

@app.post("/v1/memories", status_code=201)
async def remember_async(body: Remember) -> JSONResponse:
    return JSONResponse({"id": "00000000-0000-0000-0000-000000000000", "status": "confirmed"}, status_code=201)

@app.post("/v1/memories/thread", status_code=201)
def remember_thread(body: Remember) -> JSONResponse:
    return JSONResponse({"id": "00000000-0000-0000-0000-000000000000", "status": "confirmed"}, status_code=201)
'''


def http_floor(tmp: Path, requests: int, clients: int) -> dict[str, Any]:
    (tmp / "floor_app.py").write_text(APP)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "floor_app:app", "--port", str(port), "--log-level",
                             "warning", "--no-access-log"], cwd=tmp, env={**os.environ, "PYTHONPATH": str(tmp)})
    url = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    try:
        if not wait_healthy(url):
            raise RuntimeError("the bare FastAPI app did not start")
        body = {"text": "I prefer tea in the morning meetings", "explicit": True,
                "source": {"kind": "chat", "id": "chat-1", "message_id": "m-1"}}
        for name, path in (("http_async", "/v1/memories"), ("http_thread", "/v1/memories/thread")):
            asyncio.run(drive(url, 4, [(path, body, "t")] * 200, (201,)))  # warm up
            server, client = cpu_seconds(lambda: [proc.pid]), time.process_time()
            latencies, took, _ = asyncio.run(drive(url, clients, [(path, body, "t")] * requests, (201,)))
            result = figures(latencies, took, requests)
            result["cpu_ms_per_request"] = {
                "server": round((cpu_seconds(lambda: [proc.pid]) - server) * 1000 / requests, 3),
                "clients": round((time.process_time() - client) * 1000 / requests, 3)}
            out[name] = result
            print(f"# {name}: {result}", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def commit_floor(tmp: Path, commits: int, clients: int) -> dict[str, Any]:
    pg = EmbeddedPostgres(tmp / "pg-floor")
    db = pg.start()
    try:
        with psycopg.connect(db.conninfo, autocommit=True) as conn:
            conn.execute("CREATE TABLE floor (id bigserial PRIMARY KEY, body bytea NOT NULL)")
        pids = sorted((tmp / "pg-floor").rglob("postmaster.pid"))
        postmaster = int(pids[0].read_text().split()[0])
        payload = os.urandom(600)
        left = iter(range(commits))
        lock = threading.Lock()

        def writer() -> None:
            with psycopg.connect(db.conninfo) as conn:
                while True:
                    with lock:
                        if next(left, None) is None:
                            return
                    conn.execute("INSERT INTO floor (body) VALUES (%s)", (payload,))
                    conn.commit()

        database, client = cpu_seconds(lambda: [postmaster]), time.process_time()
        started = time.perf_counter()
        threads = [threading.Thread(target=writer) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - started
        result = {"per_s": round(commits / took, 1), "seconds": round(took, 2), "cpu_ms_per_commit": {
            "postgres": round((cpu_seconds(lambda: [postmaster]) - database) * 1000 / commits, 3),
            "clients": round((time.process_time() - client) * 1000 / commits, 3)}}
        print(f"# commits: {result}", file=sys.stderr)
        return result
    finally:
        pg.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--commits", type=int, default=3000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="engram-floor-"))
    try:
        out = {"machine": f"{os.cpu_count()} cores (shared)", "load_average": os.getloadavg(), "args": vars(args),
               **http_floor(tmp, args.requests, args.clients), "commits": commit_floor(tmp, args.commits, args.clients)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
