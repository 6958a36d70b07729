"""Faults under load: the distributed deployment as separate processes, one dependency failing at a time.

    .venv/bin/python -m bench.faults [--faults postgres,broker,hindsight,worker,api] [--clients 4]
        [--baseline 5] [--outage 8] [--recovery 20] [--drain 180] [--no-hindsight] [--out FILE] [--keep]

On an embedded PostgreSQL in a temporary directory, the tansu broker and a real Hindsight 1.1.0 (on
the same PostgreSQL, as in docker-compose.yml; the suite's fake LLM and embeddings), `engram serve`,
`engram relay` and two `engram worker` processes run in distributed mode. A few async clients, each a
person of one company, drive a steady mixed load: remember, receipts (learned into candidates),
confirm, forget, and recall of both live memories' and forgotten memories' words.

Each fault in turn, after the deployment has settled (writes visible at once, no projector lag):

- `postgres`: the server stopped as if killed (`pg_ctl -m immediate`: no checkpoint; it recovers from its
  write-ahead log at start) for `--outage` seconds, then started again;
- `broker`: tansu killed and started empty on the same port after `--outage` seconds;
- `hindsight`: Hindsight stopped for `--outage` seconds, then started again;
- `worker`: one of the two workers killed (-9); nothing is brought back during the fault (the other
  takes its partitions); a replacement is started afterwards, as a supervisor would;
- `api`: `engram serve` killed (-9) and started again on its port after `--outage` seconds (the
  supervisor's restart).

Load runs `--baseline` seconds before the fault and `--recovery` seconds after its dependency is
back. Then every write acknowledged with a 2xx since the start is checked: read from the event store
by id (`GET /v1/memories/{id}`: the text as given, or null when its forget was acknowledged), listed
from the recall view, recalled by its word (every forgotten one, which must not come back, and the
live ones written in this fault's window), receipts and forget statuses found; every recall the load
made of a forgotten memory's word after its forget was answered is checked as it comes. A forget
whose answer never came (the API killed, a timeout) may or may not have happened: its memory is
counted apart, not judged. Then, without load, at most `--drain` seconds for the projector lag (and
Hindsight's due sync work) to reach 0. Prints one JSON object per fault, then a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from engram.adapters.database import Database, EmbeddedPostgres

from bench.harness import start_hindsight
from tests.support.broker import TansuBroker
from tests.support.deployment import Deployment, pg_ctl, postmaster, start_postgres
from tests.support.helpers import token, wait_until_ready

COMPANY = "acme"
FAULTS = ("postgres", "broker", "hindsight", "worker", "api")
SYLLABLES = ("ba", "de", "fi", "go", "hu", "ka", "le", "mi", "no", "pu", "ra", "se", "ti", "vo", "wu", "ya")
WORD = re.compile(r"\bkw[a-z]+\b")  # every memory's own word: recall finds it, and only it


def word(n: int) -> str:
    """A word no other memory of the run holds: `kw` and n in syllables."""
    out = ""
    for _ in range(4):
        out += SYLLABLES[n % len(SYLLABLES)]
        n //= len(SYLLABLES)
    return "kw" + out + (SYLLABLES[n % len(SYLLABLES)] if n else "")


# -- what was acknowledged ------------------------------------------------------------------------

@dataclass
class Remembered:
    """A memory a 2xx stored: by an explicit remember or a confirmed candidate."""

    id: str
    person: str
    text: str
    word: str
    acked_at: float
    forget_id: str | None = None
    forgotten_at: float | None = None  # when the forget's 202 arrived
    forget_unanswered: bool = False  # a forget was sent and never answered: either outcome is right
    forgetting: bool = False


@dataclass
class Call:
    op: str
    started: float
    ended: float
    status: int  # 0: no answer (refused, reset, timed out)
    code: str = ""
    degraded: bool = False
    visible: bool = True


@dataclass
class Record:
    """Everything the load was told, across every fault of the run."""

    memories: dict[str, Remembered] = field(default_factory=dict)
    receipts: dict[str, str] = field(default_factory=dict)  # receipt id -> person
    served: list[dict[str, Any]] = field(default_factory=list)  # forgotten memories a recall returned
    words: int = 0

    def next_word(self) -> str:
        self.words += 1
        return word(self.words)


# -- the deployment -------------------------------------------------------------------------------

@dataclass
class Stack:
    tmp: Path
    pg: EmbeddedPostgres
    database: Database
    broker: TansuBroker
    system: Deployment
    hindsight: Any = None

    @property
    def pgdata(self) -> Path:
        return self.tmp / "pg"


def _url(db: Database) -> str:
    return f"postgresql://{db.user}@/{db.dbname}?host={db.host}&port={db.port}"


@contextmanager
def deployment(*, hindsight: bool, workers: int = 2, keep: bool = False) -> Iterator[Stack]:
    """PostgreSQL, broker, Hindsight (optional), relay, workers and API; all stopped, and the directory
    removed unless `keep`, on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="engram-faults-"))
    pg = EmbeddedPostgres(tmp)
    server = pg.start()
    broker = hs = system = None
    try:
        database = server.with_dbname("engram_faults")
        database.ensure_exists()
        broker = TansuBroker().start()
        master = base64.urlsafe_b64encode(os.urandom(32)).decode()
        # a recall is degraded when Hindsight is away, not merely slow on a busy machine (the default is 150 ms)
        env = {"ENGRAM_MASTER_KEY": master, "ENGRAM_WORKER_INTERVAL": "0.2", "ENGRAM_HINDSIGHT_DEADLINE_MS": "1000"}
        if hindsight:
            hs = start_hindsight(server, tmp, master)
            env.update({"ENGRAM_HINDSIGHT_URL": hs.url,
                        "ENGRAM_HINDSIGHT_DATABASE_URL": _url(server.with_dbname("hindsight_bench"))})
        (tmp / "run").mkdir()
        system = Deployment(database, broker, tmp / "run", **env)
        system.start("relay", "relay")
        for i in range(1, workers + 1):
            system.start(f"worker-{i}", "worker")
        system.serve()
        stack = Stack(tmp, pg, database, broker, system, hs)
        wait_ready(stack, 120)
        yield stack
    finally:
        if system is not None:
            system.stop()
        if hs is not None:
            hs.close()
        if broker is not None:
            broker.stop()
        pg.stop()
        if keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def wait_ready(stack: Stack, timeout: float) -> None:
    wait_until_ready(stack.system.procs["api"], stack.system.url, lambda: stack.system.log("api")[-3000:], timeout)


def headers(person: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(company=COMPANY, user=person)}"}


# -- the load -------------------------------------------------------------------------------------

OPS = {"remember": 30, "receipt": 10, "confirm": 8, "forget": 10, "recall": 42}


class Load:
    """`clients` async clients in a thread of their own, each one person, until stopped (or `limit`
    seconds, whichever comes first). A call that fails is retried by nobody: the next call is another."""

    def __init__(self, url: str, record: Record, clients: int, pause: float = 0.03, limit: float = 600,
                 seed: int = 0) -> None:
        self.url, self.record, self.clients, self.pause, self.limit = url, record, clients, pause, limit
        self.calls: list[Call] = []
        self.seed = seed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    async def _run(self) -> None:
        await asyncio.gather(*(self._client(i) for i in range(self.clients)))

    async def _client(self, i: int) -> None:
        person = f"person-{i}"
        auth = headers(person)
        rng = random.Random(self.seed * 100 + i)
        ops, weights = list(OPS), list(OPS.values())
        candidates: list[dict[str, Any]] = []
        ends = time.monotonic() + self.limit
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            while not self._stop.is_set() and time.monotonic() < ends:
                op = rng.choices(ops, weights)[0]
                try:
                    call = await getattr(self, "_" + op)(http, person, auth, rng, candidates)
                except Exception as e:  # noqa: BLE001 - a bug here must not stop the load silently
                    call = Call(op, time.monotonic(), time.monotonic(), -1, type(e).__name__)
                if call is not None:
                    self.calls.append(call)
                await asyncio.sleep(self.pause if call is None or 200 <= call.status < 300 else 0.2)

    async def _send(self, http: httpx.AsyncClient, op: str, method: str, path: str, auth: dict[str, str],
                    body: Any = None) -> tuple[Call, dict[str, Any]]:
        started = time.monotonic()
        try:
            r = await http.request(method, path, headers=auth, json=body)
        except httpx.HTTPError as e:
            return Call(op, started, time.monotonic(), 0, type(e).__name__), {}
        ended = time.monotonic()
        try:
            answer = r.json() if r.content else {}
        except ValueError:
            answer = {}
        answer = answer if isinstance(answer, dict) else {}
        code = str(answer.get("code", "")) if r.status_code >= 400 else ""
        return Call(op, started, ended, r.status_code, code, visible=answer.get("visible", True) is not False), answer

    async def _remember(self, http: httpx.AsyncClient, person: str, auth: dict[str, str], rng: random.Random,
                        _: Any) -> Call:
        w = self.record.next_word()
        text = f"I prefer {w} notebooks for the quarterly planning review"
        call, body = await self._send(http, "remember", "POST", "/v1/memories", auth, {
            "text": text, "explicit": True, "source": {"kind": "chat", "id": f"chat-{person}", "message_id": w}})
        if 200 <= call.status < 300 and body.get("status") == "confirmed" and body.get("id"):
            self.record.memories[body["id"]] = Remembered(body["id"], person, text, w, call.ended)
        return call

    async def _receipt(self, http: httpx.AsyncClient, person: str, auth: dict[str, str], rng: random.Random,
                       _: Any) -> Call:
        w = self.record.next_word()
        rid = f"r-{w}"
        call, body = await self._send(http, "receipt", "POST", "/v1/receipts", auth, {
            "receipt_id": rid, "author": "user", "text": f"I prefer {w} folders for the weekly team sync.",
            "occurred_at": "2026-11-02T09:00:00+00:00",
            "source": {"kind": "chat", "id": f"chat-{person}", "message_id": rid}, "visibility": "general"})
        if call.status == 202 and body.get("state") in ("queued", "ignored"):
            self.record.receipts[rid] = person
        return call

    async def _confirm(self, http: httpx.AsyncClient, person: str, auth: dict[str, str], rng: random.Random,
                       candidates: list[dict[str, Any]]) -> Call:
        if not candidates:
            call, body = await self._send(http, "candidates", "GET", "/v1/candidates", auth)
            candidates.extend(c for c in body.get("items", []) if c.get("review") == "normal" and c.get("text"))
            if not candidates:
                return call
            self.calls.append(call)
        candidate = candidates.pop(0)
        call, body = await self._send(http, "confirm", "POST", f"/v1/candidates/{candidate['id']}/confirm", auth, {})
        found = WORD.search(body.get("text") or "")
        if call.status == 200 and body.get("id") and found:
            self.record.memories[body["id"]] = Remembered(body["id"], person, body["text"], found.group(),
                                                          call.ended)
        return call

    async def _forget(self, http: httpx.AsyncClient, person: str, auth: dict[str, str], rng: random.Random,
                      _: Any) -> Call | None:
        live = [m for m in self.record.memories.values()
                if m.person == person and m.forgotten_at is None and not m.forgetting and not m.forget_unanswered]
        if len(live) < 5:  # keep some to recall
            return None
        m = rng.choice(live)
        m.forgetting = True
        call, body = await self._send(http, "forget", "POST", f"/v1/memories/{m.id}/forget", auth)
        m.forgetting = False
        if call.status == 202 and body.get("forget_id"):
            m.forget_id, m.forgotten_at = body["forget_id"], call.ended
        elif (call.status == 0 and call.code != "ConnectError") or call.status >= 500:
            m.forget_unanswered = True  # sent, and it may have committed before the answer was lost
        return call

    async def _recall(self, http: httpx.AsyncClient, person: str, auth: dict[str, str], rng: random.Random,
                      _: Any) -> Call | None:
        mine = [m for m in self.record.memories.values() if m.person == person]
        forgotten = [m for m in mine if m.forgotten_at is not None]
        pool = forgotten if forgotten and rng.random() < 0.5 else mine
        if not pool:
            return None
        query = rng.choice(pool).word
        call, body = await self._send(http, "recall", "POST", "/v1/recall", auth, {"query": query, "limit": 10})
        call.degraded = bool(body.get("degraded"))
        for item in body.get("items", []):
            m = self.record.memories.get(item.get("id", ""))
            if m is not None and m.forgotten_at is not None and m.forgotten_at < call.started:
                self.record.served.append({"id": m.id, "forgotten_s_before": round(call.started - m.forgotten_at, 3),
                                           "text_served": item.get("text") is not None})
        return call


# -- what /metrics says ---------------------------------------------------------------------------

@dataclass
class Sample:
    at: float
    lag: float | None  # summed over projections and partitions; None when /metrics did not answer
    head: float = 0  # the event store's head position
    applied: float = 0  # the lowest position any projection has reached on any partition
    unpublished: float = 0
    hindsight_pending: float = 0
    hindsight_due: int | None = None  # pending wishes whose next attempt is due now (None: not read)
    hindsight_wait_s: float = 0  # the longest any pending wish waits for its next attempt (its backoff)


_METRIC = re.compile(r"^(engram_[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", re.M)


SYNC_DUE = ("SELECT count(*) FILTER (WHERE next_attempt_at IS NULL OR next_attempt_at <= now()) AS due, "
            "coalesce(extract(epoch FROM max(next_attempt_at) - now()), 0) AS wait "
            "FROM engram_hindsight_sync WHERE state = 'pending'")


class Monitor:
    """Reads /metrics every `every` seconds until stopped; with `conninfo`, also which Hindsight sync
    wishes are due now and which wait for their backoff (the syncer's own table: /metrics has no such
    split)."""

    def __init__(self, url: str, every: float = 0.5, conninfo: str | None = None) -> None:
        self.url, self.every, self.conninfo = url, every, conninfo
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=3) as http:
            while not self._stop.wait(self.every):
                sample = self.read(http)
                if self.conninfo and sample.lag is not None:
                    try:
                        with psycopg.connect(self.conninfo, connect_timeout=2) as conn:
                            due, wait = conn.execute(SYNC_DUE).fetchone()
                        sample.hindsight_due, sample.hindsight_wait_s = int(due), max(0.0, float(wait))
                    except psycopg.Error:
                        pass
                self.samples.append(sample)

    @staticmethod
    def read(http: httpx.Client) -> Sample:
        now = time.monotonic()
        try:
            text = http.get("/metrics").text
        except httpx.HTTPError:
            return Sample(now, None)
        found: dict[str, float] = Counter()
        lags = []
        for name, labels, value in _METRIC.findall(text):
            if name == "engram_hindsight_sync" and 'state="pending"' not in labels:
                continue
            if name == "engram_projection_lag":
                lags.append(float(value))
            found[name] += float(value)
        if not lags or "engram_events_total" not in found:
            return Sample(now, None)
        head = found["engram_events_total"]
        return Sample(now, sum(lags), head, head - max(lags), found["engram_tombstones_unpublished"],
                      found["engram_hindsight_sync"])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def answered(self, after: float) -> list[Sample]:
        return [s for s in self.samples if s.at >= after and s.lag is not None]

    def backlog_applied(self, after: float) -> Sample | None:
        """The first reading in which every projection on every partition has applied every event that was
        stored when the first reading after `after` was taken (the backlog of the fault; the load goes on)."""
        samples = self.answered(after)
        if not samples:
            return None
        return next((s for s in samples if s.applied >= samples[0].head and s.unpublished == 0), None)

    def lag_zero(self, after: float) -> Sample | None:
        """The first reading after `after` with no projector lag and no unpublished tombstone: under load
        that may only come once the load stops."""
        return next((s for s in self.answered(after) if s.lag == 0 and s.unpublished == 0), None)

    def synced(self, after: float) -> Sample | None:
        """The first reading after `after` with no Hindsight sync wish pending."""
        return next((s for s in self.answered(after) if s.hindsight_pending == 0), None)

    def sync_due_done(self, after: float) -> Sample | None:
        """The first reading after `after` in which no pending Hindsight wish is due: the syncer has done
        all it will do now, the rest waiting out their backoff (or the doubt of a retain whose answer was
        lost: ADR 0018)."""
        return next((s for s in self.answered(after) if s.hindsight_due == 0), None)


# -- faults ---------------------------------------------------------------------------------------

def fault_postgres(stack: Stack, outage: float) -> float:
    socket_dir = postmaster(stack.pgdata)[4]
    pg_ctl(stack.pgdata, "-m", "immediate", "-w", "stop")  # as if killed: no checkpoint, crash recovery at start
    time.sleep(outage)
    start_postgres(stack.pgdata, socket_dir)  # returns once it accepts connections
    return time.monotonic()


def fault_broker(stack: Stack, outage: float) -> float:
    stack.broker.stop()
    time.sleep(outage)
    stack.broker.start()  # empty: the broker keeps its topics in memory
    return time.monotonic()


def fault_hindsight(stack: Stack, outage: float) -> float:
    stack.hindsight.stop()
    time.sleep(outage)
    try:
        stack.hindsight.start(timeout=400)  # returns once it answers /health: minutes on a busy machine
    except (RuntimeError, TimeoutError):
        print((stack.tmp / "hindsight.log").read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    return time.monotonic()


def fault_worker(stack: Stack, outage: float) -> float:
    stack.system.kill("worker-1")
    return time.monotonic()  # nothing comes back: the other worker is to take its partitions on its own


def fault_api(stack: Stack, outage: float) -> float:
    stack.system.kill("api")
    time.sleep(outage)
    stack.system.serve()  # "back" is the restart; its start-up is part of the time to the first answer
    return time.monotonic()


INJECT: dict[str, Callable[[Stack, float], float]] = {
    "postgres": fault_postgres, "broker": fault_broker, "hindsight": fault_hindsight, "worker": fault_worker,
    "api": fault_api}


def after_fault(stack: Stack, name: str) -> None:
    """What a supervisor does once the fault's window is over: the killed worker replaced."""
    if name == "worker":
        stack.system.start("worker-1", "worker")


def settle(stack: Stack, timeout: float = 120) -> float:
    """Until five writes in a row are visible at once and nothing lags: seconds it took."""
    started = time.monotonic()
    auth = headers("settler")
    in_a_row = 0
    with httpx.Client(base_url=stack.system.url, timeout=10) as http:
        while time.monotonic() - started < timeout:
            try:
                w = f"settle-{time.monotonic_ns()}"
                r = http.post("/v1/memories", headers=auth, json={
                    "text": f"I prefer settled {w}", "source": {"kind": "chat", "id": "settle", "message_id": w}})
                in_a_row = in_a_row + 1 if r.status_code == 201 else 0
                if in_a_row >= 5 and Monitor.read(http).lag == 0:  # nothing behind: a fault starts from zero
                    return time.monotonic() - started
            except httpx.HTTPError:
                in_a_row = 0
            time.sleep(0.2)
    raise TimeoutError("the deployment did not settle")


# -- checks ---------------------------------------------------------------------------------------

def verify(url: str, record: Record, *, timeout: float = 90, recall_sample: set[str] | None = None) -> dict[str, Any]:
    """Every acknowledged write, checked until it passes or `timeout` runs out (a 202 `visible: false`
    write becomes visible once the workers catch up). What still fails then is lost."""
    failing: dict[str, str] = {}
    memories = list(record.memories.values())
    deadline = time.monotonic() + timeout

    def check_memory(http: httpx.Client, m: Remembered) -> str | None:
        auth = headers(m.person)
        r = http.get(f"/v1/memories/{m.id}", headers=auth)
        if r.status_code != 200:
            return f"get {r.status_code}"
        text = r.json().get("text")
        if m.forgotten_at is not None:
            if text is not None:
                return "forgotten text served by get"
        elif not m.forget_unanswered and text != m.text:
            return "text differs" if text else "text gone"
        if m.forget_unanswered or (recall_sample is not None and m.forgotten_at is None and m.id not in recall_sample):
            return None
        r = http.post("/v1/recall", headers=auth, json={"query": m.word, "limit": 10})
        if r.status_code != 200:
            return f"recall {r.status_code}"
        ids = {item["id"] for item in r.json()["items"]}
        if m.forgotten_at is not None and m.id in ids:
            return "forgotten memory recalled"
        if m.forgotten_at is None and m.id not in ids:
            return "not recallable"
        if m.forget_id is not None:
            r = http.get(f"/v1/forgets/{m.forget_id}", headers=auth)
            if r.status_code != 200:
                return f"forget status {r.status_code}"
        return None

    def listed(http: httpx.Client, person: str) -> dict[str, Any]:
        """The recall view's rows of one person, forgotten ones included: id -> text."""
        rows: dict[str, Any] = {}
        cursor = None
        while True:
            r = http.get("/v1/memories", headers=headers(person),
                         params={"limit": 200, "status": "all", **({"cursor": cursor} if cursor else {})})
            r.raise_for_status()
            rows.update({item["id"]: item.get("text") for item in r.json()["items"]})
            cursor = r.json()["next_cursor"]
            if not cursor:
                return rows

    todo_memories, todo_receipts = memories, list(record.receipts.items())
    with httpx.Client(base_url=url, timeout=15) as http, ThreadPoolExecutor(8) as pool:
        while True:
            failing = {}

            def one(m: Remembered) -> tuple[str, str | None]:
                try:
                    return m.id, check_memory(http, m)
                except httpx.HTTPError as e:
                    return m.id, type(e).__name__

            for memory_id, why in pool.map(one, todo_memories):
                if why:
                    failing[memory_id] = why
            for rid, person in todo_receipts:
                try:
                    r = http.get(f"/v1/receipts/{rid}", headers=headers(person))
                    if r.status_code != 200:
                        failing[rid] = f"receipt {r.status_code}"
                except httpx.HTTPError as e:
                    failing[rid] = type(e).__name__
            try:
                views = {p: listed(http, p) for p in {m.person for m in memories}}
                for m in memories:
                    if m.forget_unanswered or m.id in failing:
                        continue
                    row = views[m.person]
                    if m.forgotten_at is None and row.get(m.id) != m.text:
                        failing[m.id] = "not in the recall view" if m.id not in row else "view text differs"
                    elif m.forgotten_at is not None and row.get(m.id) is not None:
                        failing[m.id] = "forgotten text in the recall view"
            except httpx.HTTPError as e:
                failing["list"] = type(e).__name__
            if not failing or time.monotonic() > deadline:
                break
            todo_memories = [m for m in memories if m.id in failing or "list" in failing]
            todo_receipts = [(rid, p) for rid, p in record.receipts.items() if rid in failing]
            time.sleep(1.0)
    served_now = sum(1 for why in failing.values() if "forgotten" in why)
    return {
        "checked": len(memories) + len(record.receipts),
        "memories": len(memories),
        "receipts": len(record.receipts),
        "forgotten": sum(m.forgotten_at is not None for m in memories),
        "forget_unanswered": sum(m.forget_unanswered for m in memories),
        "lost": len(failing) - served_now,
        "forgotten_served": served_now,
        "why": dict(Counter(failing.values())),
    }


# -- one fault ------------------------------------------------------------------------------------

def tally(calls: list[Call]) -> dict[str, dict[str, int]]:
    ok: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for c in calls:
        if 200 <= c.status < 300:
            ok[f"{c.op} {c.status}" + ("" if c.visible else " visible:false") + (" degraded" if c.degraded else "")] += 1
        else:
            failed[f"{c.op} {c.status} {c.code}".strip()] += 1
    return {"ok": dict(sorted(ok.items())), "failed": dict(sorted(failed.items()))}


def latency(calls: list[Call]) -> dict[str, float]:
    """p50 and p95 of the answered calls (any status), milliseconds."""
    ms = [(c.ended - c.started) * 1000 for c in calls if c.status > 0]
    if len(ms) < 2:
        return {}
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"p50": round(q[49], 1), "p95": round(q[94], 1), "max": round(max(ms), 1)}


def first(calls: list[Call], after: float, keep: Callable[[Call], bool]) -> float | None:
    """Seconds from `after` to the answer of the first call started then that `keep` accepts."""
    times = [c.ended for c in calls if c.started >= after and keep(c)]
    return round(min(times) - after, 2) if times else None


def run_fault(stack: Stack, name: str, record: Record, *, clients: int, baseline: float, outage: float,
              recovery: float, seed: int, drain: float = 180) -> dict[str, Any]:
    settled = settle(stack)
    served_before = len(record.served)
    monitor = Monitor(stack.system.url, conninfo=stack.database.conninfo if stack.hindsight else None)
    load = Load(stack.system.url, record, clients, seed=seed)
    time.sleep(baseline)
    injected = time.monotonic()
    back = INJECT[name](stack, outage)
    time.sleep(recovery)
    load.stop()
    stopped = time.monotonic()
    checked = verify(stack.system.url, record,
                     recall_sample={m.id for m in record.memories.values() if m.acked_at >= injected - baseline})
    running = {n: stack.system.running(n) for n in stack.system.procs}
    hindsight = stack.hindsight is not None
    while time.monotonic() - stopped < drain and not (monitor.lag_zero(back)
                                                      and (not hindsight or monitor.synced(back)
                                                           or monitor.sync_due_done(stopped))):
        time.sleep(0.5)  # what the load left behind, drained with no load
    monitor.stop()
    checked["forget_status"] = forget_statuses(stack.system.url, record, since=injected - baseline)
    after_fault(stack, name)
    calls = load.calls
    before = [c for c in calls if c.started < injected]
    during = [c for c in calls if injected <= c.started < back]
    after = [c for c in calls if c.started >= back]
    applied, zero, synced = monitor.backlog_applied(back), monitor.lag_zero(back), monitor.synced(back)
    answered = monitor.answered(injected)
    report: dict[str, Any] = {
        "fault": name,
        "settled_before_s": round(settled, 2),
        "times_s": {"baseline": baseline, "fault_to_back": round(back - injected, 2),
                    "back_to_load_stop": round(stopped - back, 2)},
        "requests": {"before": tally(before), "during": tally(during), "after": tally(after)},
        "latency_ms": {"before": latency(before), "during": latency(during), "after": latency(after)},
        "first_ok_after_back_s": first(calls, back, lambda c: 200 <= c.status < 300),
        "first_visible_write_after_back_s": first(calls, back, lambda c: c.op == "remember" and c.status == 201),
        "first_undegraded_recall_after_back_s": first(calls, back, lambda c: c.op == "recall" and c.status == 200
                                                      and not c.degraded),
        "acknowledged": checked,
        "forgotten_served_during_load": len(record.served) - served_before,
        "projector_lag": {"max": max((s.lag or 0 for s in answered), default=None),
                          "backlog_applied": applied is not None,
                          "backlog_applied_after_back_s": round(applied.at - back, 2) if applied else None,
                          "back_to_zero": zero is not None,
                          "back_to_zero_after_back_s": round(zero.at - back, 2) if zero else None,
                          "zero_under_load": bool(zero and zero.at < stopped)},
        "processes_running": running,
    }
    if hindsight:
        last = answered[-1] if answered else None
        report["hindsight_sync_pending"] = {
            "max": max((s.hindsight_pending for s in answered), default=None),
            "drained": synced is not None, "drained_after_back_s": round(synced.at - back, 2) if synced else None,
            "at_end": last.hindsight_pending if last else None,
            "at_end_longest_backoff_s": round(last.hindsight_wait_s, 1) if last else None}
    if name == "worker":
        report["note"] = "fault_to_back is 0: nothing is restarted; the other worker takes the killed one's partitions"
    return report


def forget_statuses(url: str, record: Record, since: float) -> dict[str, int]:
    """How far the forgets acknowledged since `since` have got: `stopped_using` or `purge_complete`."""
    found: Counter[str] = Counter()
    with httpx.Client(base_url=url, timeout=15) as http:
        for m in record.memories.values():
            if m.forget_id is not None and m.forgotten_at is not None and m.forgotten_at >= since:
                r = http.get(f"/v1/forgets/{m.forget_id}", headers=headers(m.person))
                found[r.json().get("status", str(r.status_code)) if r.status_code == 200 else str(r.status_code)] += 1
    return dict(found)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--baseline", type=float, default=5)
    ap.add_argument("--outage", type=float, default=8)
    ap.add_argument("--recovery", type=float, default=20)
    ap.add_argument("--drain", type=float, default=180,
                    help="after the checks, wait at most this long, without load, for lag and sync to reach 0")
    ap.add_argument("--no-hindsight", action="store_true")
    ap.add_argument("--out", help="also write the reports, one JSON object a line, here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs) and say where")
    args = ap.parse_args()
    names = [n.strip() for n in args.faults.split(",") if n.strip()]
    unknown = set(names) - set(FAULTS)
    if unknown or ("hindsight" in names and args.no_hindsight):
        raise SystemExit(f"unknown or impossible faults: {sorted(unknown) or ['hindsight']}")
    record = Record()
    reports = []
    with deployment(hindsight=not args.no_hindsight, keep=args.keep) as stack:
        for seed, name in enumerate(names):
            report = run_fault(stack, name, record, clients=args.clients, baseline=args.baseline,
                               outage=args.outage, recovery=args.recovery, seed=seed, drain=args.drain)
            print(json.dumps(report), flush=True)
            reports.append(report)
        logs = {n: stack.system.log(n) for n in stack.system.procs}
    summary = {"faults": names, "lost": sum(r["acknowledged"]["lost"] for r in reports),
               "forgotten_served": sum(r["acknowledged"]["forgotten_served"] + r["forgotten_served_during_load"]
                                       for r in reports),
               "tracebacks": {n: text.count("Traceback") for n, text in logs.items() if "Traceback" in text}}
    print(json.dumps(summary), flush=True)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in [*reports, summary]))


if __name__ == "__main__":
    main()
