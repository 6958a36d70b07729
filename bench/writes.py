"""The write path: remember and receipts over HTTP, in-process projection and the recall view's rebuild.

    .venv/bin/python -m bench.writes [--remembers 600] [--clients 1,16] [--receipts 600] [--batch 20]
        [--events 6000] [--profile] [--lazy-commit] [--processes 1] [--out FILE]

On a fresh embedded PostgreSQL in a temporary directory, a separate `engram serve` process (projectors
in-process, the default deployment; `--processes N` serving processes, ADR 0037, whose CPU counts as
the server's) answers:

- `remember`: `POST /v1/memories`, each with new text, from 1 and from 16 concurrent keep-alive clients
  (requests/s, p50/p95 ms);
- `receipts`: `POST /v1/receipts`, one message per request and `{"messages": [...]}` of `--batch`
  messages, from the same numbers of clients (messages/s and requests/s, p50/p95 ms), and the CPU time each
  request cost the server process and PostgreSQL (steadier than the rates on a shared machine).

Then, in this process: `--events` events (`Remembered` and `Corrected`, half each) stored straight into
the event store and projected by the projector runner into every view (events/s), and the recall view
rebuilt from all events (events/s). `--profile` adds, for one remember and one receipt batch through the
services in-process, the database statements, key fetches, seals/unseals and JSON codings each costs, and
the top cumulative entries of cProfile for remember, catch-up and rebuild, and the same counts per remember
when 16 threads remember at once (as 16 clients' requests do in the server). Prints one JSON document.
The clients run on the same machine as the server: on 2 cores they take a share of the CPU too.

`--kafka N` runs the HTTP part in distributed mode instead: a tansu broker, `engram relay` and N
`engram worker` processes project what `engram serve` stores, and a write answers once the workers
have applied it (read-your-writes through the broker, ADR 0039); their CPU is counted as the
projectors'. The in-process part is then left out (the views are the workers').
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from engram.api.bootstrap import Engram
from engram.api.identity import issue_token
from engram.domain.scope import Caller

from bench.harness import free_port, fresh_engram, pct, seed_corrected, wait_healthy
from tests.support.helpers import counted_exchange

PEOPLE = [f"person-{i}" for i in range(10)]
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "si", "tu", "va", "ze")
         for b in ("bar", "den", "fil", "gor", "hum", "jat", "kel", "mon", "pix", "quo", "rud", "tav")]


def sentence(r: random.Random) -> str:
    return "I prefer " + " ".join(r.choice(WORDS) for _ in range(r.randint(6, 12))) + " for meetings"


def figures(latencies: list[float], took: float, count: int) -> dict[str, float]:
    return {"per_s": round(count / took, 1), "p50_ms": round(pct(latencies, 50), 2),
            "p95_ms": round(pct(latencies, 95), 2), "seconds": round(took, 2)}


async def drive(url: str, clients: int, bodies: list[tuple[str, dict[str, Any], str]],
                ok: tuple[int, ...]) -> tuple[list[float], float, Counter[int]]:
    """Send every (path, body, token) with `clients` concurrent keep-alive connections."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    queue = iter(bodies)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for path, body, token in queue:
                t = time.perf_counter()
                r = await http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
                latencies.append((time.perf_counter() - t) * 1000)
                statuses[r.status_code] += 1
                if r.status_code not in ok:
                    raise RuntimeError(f"{path} answered {r.status_code}: {r.text[:300]}")

    t = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, time.perf_counter() - t, statuses


def cpu_seconds(pids: Callable[[], list[int]]) -> float:
    """CPU time (user + system) of these processes so far, their ended children included: on a machine
    shared with other work, what a request costs in CPU is steadier than how long it takes."""
    import psutil

    total = 0.0
    for pid in pids():
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
            for q in procs:
                t = q.cpu_times()
                total += t.user + t.system + (t.children_user + t.children_system if q is proc else 0.0)
        except psutil.NoSuchProcess:
            continue
    return total


def postmaster(bench: Any) -> list[int]:
    found = sorted(bench.tmp.rglob("postmaster.pid"))
    return [int(found[0].read_text().split()[0])] if found else []


@contextmanager
def serving(bench: Any, processes: int = 1, kafka: int = 0) -> Iterator[str]:
    """`engram serve` on the bench's database, the way an operator runs it, with `processes` serving
    processes (ADR 0037); its URL once every one of them has started. With `kafka`, in distributed
    mode with a broker, a relay and that many workers (their pids in `bench.projector_pids`)."""
    db = bench.db
    port = free_port()
    env = {**os.environ, "ENGRAM_DATABASE_URL": f"postgresql://{db.user}@/{db.dbname}?host={db.host}&port={db.port}",
           "ENGRAM_MASTER_KEY": bench.master, "ENGRAM_TOKEN_SECRET": bench.secret, "ENGRAM_DATA_DIR": str(bench.tmp),
           "ENGRAM_SERVE_PROCESSES": str(processes)}
    engram_bin = str(Path(sys.executable).parent / "engram")
    broker, helpers = None, []
    bench.projector_pids = []
    if kafka:
        from tests.support.broker import TansuBroker

        broker = TansuBroker().start()
        env.update({"ENGRAM_KAFKA_BOOTSTRAP": broker.bootstrap, "ENGRAM_KAFKA_PARTITIONS": "8"})
        helpers = [subprocess.Popen([engram_bin, *cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for cmd in [["relay"], *[["worker"]] * kafka]]
        bench.projector_pids = [broker.proc.pid, *(h.pid for h in helpers)]
    log = open(bench.tmp / "serve.log", "ab")  # closed below
    proc = subprocess.Popen([engram_bin, "serve", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    bench.serve_pid = proc.pid
    try:
        if not wait_healthy(url):
            raise RuntimeError(f"engram serve did not start; see {bench.tmp / 'serve.log'}")
        if processes > 1:  # every serving process has said so in the log
            for _ in range(600):
                if (bench.tmp / "serve.log").read_text().count("Application startup complete") >= processes:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"not every serving process started; see {bench.tmp / 'serve.log'}")
        yield url
    finally:
        for p in [proc, *helpers]:
            p.send_signal(signal.SIGTERM)
        for p in [proc, *helpers]:
            p.wait(timeout=30)
        log.close()
        if broker is not None:
            broker.stop()


def http_phase(bench: Any, args: argparse.Namespace) -> dict[str, Any]:
    tokens = {p: issue_token(bench.secret, company="acme", user=p, role="bot", bot="b-1") for p in PEOPLE}
    r = random.Random(11)
    out: dict[str, Any] = {}
    counter = iter(range(10**9))

    def remember() -> tuple[str, dict[str, Any], str]:
        i = next(counter)
        person = PEOPLE[i % len(PEOPLE)]
        return "/v1/memories", {"text": sentence(r), "source": {"kind": "chat", "id": f"chat-{i % 40}",
                                                                "message_id": f"m-{i}"}}, tokens[person]

    def message(i: int) -> dict[str, Any]:
        return {"receipt_id": f"r-{i}", "author": "user", "text": sentence(r),
                "source": {"kind": "chat", "id": f"chat-{i % 40}", "message_id": f"rm-{i}"}}

    def receipt() -> tuple[str, dict[str, Any], str]:
        i = next(counter)
        return "/v1/receipts", message(i), tokens[PEOPLE[i % len(PEOPLE)]]

    def batch() -> tuple[str, dict[str, Any], str]:
        i = next(counter)
        return "/v1/receipts", {"messages": [message(i * 1000 + j) for j in range(args.batch)]}, \
            tokens[PEOPLE[i % len(PEOPLE)]]

    with serving(bench, args.processes, args.kafka) as url:
        warm = [remember() for _ in range(30)] + [receipt() for _ in range(30)]
        asyncio.run(drive(url, 4, warm, (200, 201, 202)))
        if args.kafka:  # the workers joined and project: a write answers as visible (201, not 202)
            for _ in range(100):
                _, _, statuses = asyncio.run(drive(url, 1, [remember()], (200, 201, 202)))
                if statuses.get(201):
                    break
                time.sleep(0.2)
        for clients in args.clients:
            for name, make, n, per in (("remember", remember, args.remembers, 1),
                                       ("receipts_single", receipt, args.receipts, 1),
                                       ("receipts_batch", batch, max(1, args.receipts // args.batch), args.batch)):
                bodies = [make() for _ in range(n)]
                server = cpu_seconds(lambda: [bench.serve_pid])
                database = cpu_seconds(lambda: postmaster(bench))
                projectors = cpu_seconds(lambda: bench.projector_pids)
                client = time.process_time()
                latencies, took, statuses = asyncio.run(drive(url, clients, bodies, (200, 201, 202)))
                result = figures(latencies, took, n)
                result["cpu_ms_per_request"] = {  # the server process (all its threads), PostgreSQL (all its processes)
                    "server": round((cpu_seconds(lambda: [bench.serve_pid]) - server) * 1000 / n, 2),
                    "postgres": round((cpu_seconds(lambda: postmaster(bench)) - database) * 1000 / n, 2),
                    # and this program's, the clients (on the same cores, they bound what the others can use)
                    "clients": round((time.process_time() - client) * 1000 / n, 2)}
                if args.kafka:  # the broker, the relay and the workers
                    result["cpu_ms_per_request"]["projectors"] = round(
                        (cpu_seconds(lambda: bench.projector_pids) - projectors) * 1000 / n, 2)
                if per > 1:
                    result["messages_per_s"] = round(n * per / took, 1)
                result["statuses"] = dict(statuses)
                out[f"{name}_c{clients}"] = result
                print(f"# {name} with {clients} clients: {result}", file=sys.stderr)
    return out


def projection_phase(engram: Engram, args: argparse.Namespace, profile: dict[str, Any] | None) -> dict[str, Any]:
    r = random.Random(5)
    engram.runner.catch_up_all()  # what the server wrote is already projected; start level
    seeded = seed_corrected(engram, args.events // 2, lambda _: sentence(r), lambda _: r.choice(WORDS))
    t = time.perf_counter()
    with profiled(profile, "catch_up"):
        engram.runner.catch_up_all()
    took = time.perf_counter() - t
    head = engram.store.recorder.max_notification_id()
    t = time.perf_counter()
    with profiled(profile, "rebuild_recall"):
        applied = engram.operations.rebuild("recall")
    rebuilt = time.perf_counter() - t
    return {"projection": {"events": seeded, "views": len(engram.projections), "seconds": round(took, 2),
                           "events_per_s": round(seeded / took, 1)},
            "rebuild_recall": {"events": head, "applied": applied, "seconds": round(rebuilt, 2),
                               "events_per_s": round((head or 0) / rebuilt, 1)}}


@contextmanager
def profiled(into: dict[str, Any] | None, name: str, top: int = 25) -> Iterator[None]:
    if into is None:
        yield
        return
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
        into[f"cprofile_{name}"] = [line for line in text.getvalue().splitlines()[7:] if line.strip()]


class Counts:
    """Counts what one command costs: round trips to the database and the statements among them (a
    pipelined executemany counts each row), key fetches, seals, unseals, JSON codings."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.undo: list[Callable[[], None]] = []
        self.lock = threading.Lock()  # writers in several threads

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] += n

    def wrap(self, owner: Any, attr: str, name: str, count: Callable[..., int] | None = None) -> None:
        original = getattr(owner, attr)

        def counted(*a: Any, **k: Any) -> Any:
            self.add(name, count(*a, **k) if count else 1)
            return original(*a, **k)

        setattr(owner, attr, counted)
        self.undo.append(lambda: setattr(owner, attr, original))

    def exchanges(self, gen: Any) -> Any:
        """psycopg's generator for one exchange with the server, counted as a round trip."""
        return (yield from counted_exchange(gen, lambda: self.add("round_trips")))

    def restore(self) -> None:
        for undo in reversed(self.undo):
            undo()


def counting(engram: Engram) -> Counts:
    import psycopg

    from engram.adapters import crypto, keystore, mapper, view_cipher

    c = Counts()
    c.wrap(psycopg.Cursor, "execute", "statements")
    c.wrap(psycopg.Cursor, "executemany", "statements", lambda _self, _q, rows, *a, **k: len(list(rows)) or 1)
    original_wait = psycopg.Connection.wait

    def wait(conn: Any, gen: Any, *a: Any, **k: Any) -> Any:
        return original_wait(conn, c.exchanges(gen), *a, **k)

    psycopg.Connection.wait = wait  # type: ignore[method-assign]
    c.undo.append(lambda: setattr(psycopg.Connection, "wait", original_wait))
    original_command = psycopg.Connection._exec_command

    def command(conn: Any, cmd: Any, *a: Any, **k: Any) -> Any:
        if cmd == b"COMMIT":  # a transaction's end (one that wrote waits for the disk)
            c.add("commits")
        return original_command(conn, cmd, *a, **k)

    psycopg.Connection._exec_command = command  # type: ignore[method-assign]
    c.undo.append(lambda: setattr(psycopg.Connection, "_exec_command", original_command))
    c.wrap(keystore.KeyStore, "get_many", "key_fetches")
    for made in ("new", "create"):  # `new` (made in memory, stored with the events) where the source has it
        if hasattr(keystore.KeyStore, made):
            c.wrap(keystore.KeyStore, made, "key_creates")
    c.wrap(crypto.MasterKey, "unwrap", "key_unwraps")
    for module in (mapper, view_cipher):
        c.wrap(module, "seal", "seals")
        c.wrap(module, "unseal", "unseals")
    transcoder = engram.store.mapper.json
    c.wrap(transcoder, "encode", "json_encodes")
    c.wrap(transcoder, "decode", "json_decodes")
    c.wrap(engram.store.recorder, "select_notifications", "notification_reads")
    return c


def per_command(engram: Engram, args: argparse.Namespace, into: dict[str, Any]) -> None:
    """One remember and one receipt batch through the services, with what each costs."""
    r = random.Random(17)
    caller = Caller("acme", "person-0", "bot", bot="b-1")
    for i in range(5):  # warm caches the way a running service has them
        engram.memories.remember(caller, text=sentence(r), source={"kind": "chat", "id": "c", "message_id": f"w{i}"},
                                 occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None)
    rounds = 20
    c = counting(engram)
    try:
        for i in range(rounds):
            engram.memories.remember(caller, text=sentence(r), source={"kind": "chat", "id": "c", "message_id": f"p{i}"},
                                     occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None)
    finally:
        c.restore()
    into["per_remember"] = {k: round(v / rounds, 1) for k, v in sorted(c.counts.items())}
    messages = [{"receipt_id": f"pr-{j}", "author": "user", "kind": "message", "text": sentence(r),
                 "occurred_at": None, "source": {"kind": "chat", "id": "c", "message_id": f"pm-{j}"},
                 "visibility": "general", "team": None} for j in range(args.batch)]
    c = counting(engram)
    try:
        engram.learning.receive_many(caller, messages)
    finally:
        c.restore()
    into[f"per_receipt_batch_of_{args.batch}"] = dict(sorted(c.counts.items()))
    threads, each = 16, 10
    c = counting(engram)
    t = time.perf_counter()
    try:
        with ThreadPoolExecutor(threads) as pool:  # a burst: 16 writers at once, as 16 clients' requests
            list(pool.map(lambda w: [engram.memories.remember(
                Caller("acme", PEOPLE[w % len(PEOPLE)], "bot", bot="b-1"), text=sentence(random.Random(w * 100 + i)),
                source={"kind": "chat", "id": "c", "message_id": f"t{w}-{i}"}, occurred_at=None, visibility="general",
                team=None, valid_from=None, valid_to=None) for i in range(each)], range(threads)))
    finally:
        c.restore()
    took = time.perf_counter() - t
    into[f"per_remember_{threads}_threads"] = {**{k: round(v / (threads * each), 1) for k, v in sorted(c.counts.items())},
                                              "remembers_per_s": round(threads * each / took, 1)}
    with profiled(into, "remember_x200"):
        for i in range(200):
            engram.memories.remember(caller, text=sentence(r), source={"kind": "chat", "id": "c", "message_id": f"q{i}"},
                                     occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remembers", type=int, default=600, help="remember requests per client count")
    ap.add_argument("--clients", default="1,16", help="concurrent clients, comma-separated")
    ap.add_argument("--receipts", type=int, default=600, help="receipt messages per client count and form")
    ap.add_argument("--batch", type=int, default=20, help="messages per {\"messages\": [...]} request")
    ap.add_argument("--events", type=int, default=6000, help="events seeded for the in-process projection")
    ap.add_argument("--profile", action="store_true", help="per-command counts and cProfile tops (slower)")
    ap.add_argument("--skip-http", action="store_true", help="only the in-process parts")
    ap.add_argument("--lazy-commit", action="store_true", help="synchronous_commit off on the throwaway server")
    ap.add_argument("--processes", type=int, default=1, help="engram serve --processes (ADR 0037)")
    ap.add_argument("--kafka", type=int, default=0, help="distributed mode over a broker with this many workers")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    report: dict[str, Any] = {"machine": f"{os.cpu_count()} cores (shared)", "args": {
        k: v for k, v in vars(args).items() if k != "out"}}
    with fresh_engram(lazy_commit=args.lazy_commit) as bench:
        engram = bench.engram
        engram.governance.put_directory(Caller("acme", "root", "admin"), {"bots": {"b-1": {}}})
        if not args.skip_http:
            report["http"] = http_phase(bench, args)
        profile: dict[str, Any] | None = {} if args.profile else None
        if profile is not None:
            per_command(engram, args, profile)
        if not args.kafka:
            report.update(projection_phase(engram, args, profile))
        if profile is not None:
            report["profile"] = profile
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
