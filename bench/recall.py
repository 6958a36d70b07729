"""Recall latency: seed N confirmed memories across 10 people, print p50/p95 in-process and over HTTP.

    .venv/bin/python -m bench.recall [--sizes 1000,10000] [--queries 300]
    .venv/bin/python -m bench.recall --hindsight [--sizes 1000] [--people 10] [--deadline-ms 1000]
        [--slow-every 10] [--sweep] [--before FILE]

Runs on a fresh embedded PostgreSQL in a temporary directory. The HTTP figures come from a separate
`engram serve` process on the same database, driven by one keep-alive client.

`--hindsight` starts a real Hindsight 1.1.0 from `.venv-hindsight` (`make hindsight`) on the same
PostgreSQL, behind Engram's guard, with the test suite's local fake for its LLM and embeddings;
the syncer retains every memory through the real path (and, with the default `ENGRAM_EMBEDDINGS=local`,
the embedding worker embeds them all), then the same queries run several ways on the same data: SQL
only (words, no meaning), words + meaning (recall as the default install serves it: the packaged model,
no Hindsight), Hindsight-ranked recall (Engram asks Hindsight within the deadline, then
re-reads and re-authorizes), the same through a proxy that trickles one answer in `--slow-every`
slowly (the deadline must hold whatever Hindsight does), and Hindsight queried directly (one bank,
no Engram work). `hints` is the mean number of hints recall read per query; `ask p95`/`ask max`
time the call for hints alone (Hindsight, answered or given up on), without the SQL work. `--sweep` adds rows
for several bounds on Hindsight's answer (`max_tokens`, hints read) and how much of the unbounded
top 10 each keeps; `--before FILE` adds the rows of an earlier `adapters/hindsight.py` (e.g. one
`git show <commit>:src/adapters/hindsight.py` wrote). Every mode answers each query in turn, so the
machine's load falls on all of them alike.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

import httpx

from engram.adapters.database import EmbeddedPostgres
from engram.api.bootstrap import Engram
from engram.api.identity import issue_token
from engram.contract.responses import RecallOut
from engram.domain.evidence import Evidence, Source
from engram.domain.memory import Memory
from engram.domain.scope import Caller, Scope
from engram.service.settings import Settings

from bench.harness import free_port, pct, start_hindsight, wait_healthy

PEOPLE = [f"person-{i}" for i in range(10)]
rng = random.Random(7)
VOCAB = [
    "".join(rng.choice("bcdfghjklmnpqrstvwz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
    for _ in range(3000)
]
TEMPLATES = [
    "I prefer {} {} for {} meetings",
    "my {} is {} and the {} stays on {}",
    "from now on send {} reports about {} {}",
    "remember that the {} project uses {} and {}",
]


def sentence(r: random.Random) -> str:
    t = r.choice(TEMPLATES)
    # Zipf-ish: common words are reused often, rare ones seldom
    words = [VOCAB[min(int(r.paretovariate(1.1)) - 1, len(VOCAB) - 1) * 7 % len(VOCAB)] if r.random() < 0.5
             else r.choice(VOCAB) for _ in range(t.count("{}"))]
    return t.format(*words)


def seed(engram: Engram, n: int, start: int) -> None:
    r = random.Random(start)
    app, keys = engram.store, engram.store.keys
    batch = []
    now = engram.ledger.clock.now()
    for i in range(n):
        person = PEOPLE[i % len(PEOPLE)]
        text = sentence(r)
        memory_id = uuid4()
        keys.create(memory_id, "acme")
        src = {"kind": "chat", "id": f"chat-{i % 50}", "message_id": f"m-{start + i}"}
        batch.append(Memory.remember(id=memory_id, scope=Scope("acme", person), source=src, text=text,
                                     evidence=[Evidence(text, Source.of(src), now).as_dict()], valid_from=None, valid_to=None,
                                     actor=person, at=now))
        if len(batch) == 200:
            app.save(*batch)
            batch = []
    if batch:
        app.save(*batch)
    engram.runner.catch_up_all()
    with app.factory.datastore.get_connection() as conn:
        conn.execute("ANALYZE")  # what autovacuum would soon do after a bulk load


def queries(count: int) -> list[tuple[str, str]]:
    r = random.Random(99)
    return [(PEOPLE[i % len(PEOPLE)], " ".join(sentence(r).split()[1:4])) for i in range(count)]


def bench_inprocess(engram: Engram, qs: list[tuple[str, str]]) -> list[float]:
    times = []
    for person, q in qs:
        t = time.perf_counter()
        engram.recall.recall(Caller("acme", person, "bot", bot="b-1"), query=q, as_of=None,
                              max_bytes=17500, limit=20)
        times.append((time.perf_counter() - t) * 1000)
    return times


def bench_http(url: str, secret: str, qs: list[tuple[str, str]]) -> list[float]:
    tokens = {p: issue_token(secret, company="acme", user=p, role="bot", bot="b-1") for p in PEOPLE}
    times = []
    with httpx.Client(base_url=url, timeout=10) as client:
        for person, q in qs[:20]:  # warm-up
            client.post("/v1/recall", json={"query": q}, headers={"Authorization": f"Bearer {tokens[person]}"})
        for person, q in qs:
            t = time.perf_counter()
            r = client.post("/v1/recall", json={"query": q}, headers={"Authorization": f"Bearer {tokens[person]}"})
            times.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text
    return times


SWEEP = [(4096, None), (2048, 100), (1024, 50), (512, 30), (256, 20)]  # (max_tokens, most hints); None: all


def bench_hindsight(engram: Engram, size: int, qs: list[tuple[str, str]], server: object,
                    deadline_ms: float, *, slow_every: int, sweep: bool, before: Path | None) -> None:
    """Every mode answers each query in turn (interleaved), so the machine's load falls on all alike."""
    from engram.adapters.hindsight import HindsightClient, SemanticIndex, bank_for

    from tests.support.slow_proxy import SlowProxy

    assert engram.syncer is not None
    t = time.perf_counter()
    synced = 0
    while (done := engram.syncer.sync(limit=200)):
        synced += done
    took = time.perf_counter() - t
    print(f"# synced {synced} memories to Hindsight in {took:.1f}s ({synced / max(took, 1e-9):.1f}/s); "
          f"backlog {engram.syncer.backlog()}", file=sys.stderr)
    key = engram.master.hindsight_signing_key()
    url = server.url  # type: ignore[attr-defined]
    upstream = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
    proxies: list[SlowProxy] = []

    def trickled() -> str:
        """A proxy of its own per mode, so each mode sees one answer in `slow_every` trickled."""
        proxies.append(SlowProxy(upstream, mode="trickle", every=slow_every, chunk=512, gap=0.03))
        return proxies[-1].url

    def recall(person: str, q: str) -> RecallOut:
        return engram.recall.recall(Caller("acme", person, "bot", bot="b-1"), query=q, as_of=None,
                                     max_bytes=17500, limit=20)

    meaning = engram.recall.meaning
    if meaning is not None and engram.embedding is not None:  # every memory embedded: recall by meaning as served
        engram.embedding.turn_seconds = 3600
        t = time.perf_counter()
        embedded = engram.embedding.work()
        print(f"# embedded {embedded} memories in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    modes: list[tuple[str, object]] = [("sql only", None), ("hindsight-ranked", SemanticIndex(
        HindsightClient(url, signing_key=key), deadline_ms)), (f"ranked, 1/{slow_every} trickled", SemanticIndex(
            HindsightClient(trickled(), signing_key=key), deadline_ms))]
    if before is not None:  # the adapter as it was, on the same data and load
        import importlib.util

        spec = importlib.util.spec_from_file_location("hindsight_before", before)
        assert spec is not None and spec.loader is not None
        old = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
        spec.loader.exec_module(old)
        modes += [("before: hindsight-ranked", old.SemanticIndex(old.HindsightClient(url, signing_key=key), deadline_ms)),
                  (f"before: 1/{slow_every} trickled", old.SemanticIndex(
                      old.HindsightClient(trickled(), signing_key=key), deadline_ms))]
    direct = HindsightClient(url, signing_key=key)
    modes.append(("hindsight direct", lambda person, q: direct.recall(bank_for(Scope("acme", person)), q, deadline=30)))
    if meaning is not None:  # recall as the default install serves it: words and the packaged model, no Hindsight
        modes.insert(1, ("words + meaning", "meaning"))
    if sweep:  # the bounds on Hindsight's answer: latency, hints read, and how far the top 10 moves
        modes += [(f"max_tokens {mt} most {most or 'all'}", SemanticIndex(HindsightClient(url, signing_key=key),
                                                                          deadline_ms, max_tokens=mt, most=most))
                  for mt, most in SWEEP]

    hinted: dict[str, list[int]] = {label: [] for label, _ in modes}
    asking: dict[str, list[float]] = {label: [] for label, _ in modes}
    for label, mode in modes:  # count the hints each recall reads, and time the asking alone
        if mode is not None and not callable(mode) and mode != "meaning":
            def counting(scopes, query, ask=mode.hints, seen=hinted[label], took=asking[label]):  # type: ignore[attr-defined]
                started = time.perf_counter()
                try:
                    found = ask(scopes, query)
                finally:
                    took.append((time.perf_counter() - started) * 1000)
                seen.append(len(found.facts) + len(found.observations))
                return found

            mode.hints = counting  # type: ignore[attr-defined]

    def ask(mode: object, person: str, q: str) -> object:
        if callable(mode):
            return mode(person, q)
        engram.recall.meaning = meaning if mode == "meaning" else None  # the other modes rank as they did before it
        engram.recall.semantic = None if mode == "meaning" else mode  # type: ignore[assignment]
        return recall(person, q)

    for person, q in qs[:20]:  # warm-up
        for _, mode in modes:
            ask(mode, person, q)
    for kept in (*hinted.values(), *asking.values()):
        kept.clear()
    times: dict[str, list[float]] = {label: [] for label, _ in modes}
    answers: dict[str, list[object]] = {label: [] for label, _ in modes}
    for person, q in qs:
        for label, mode in modes:
            started = time.perf_counter()
            answers[label].append(ask(mode, person, q))
            times[label].append((time.perf_counter() - started) * 1000)
    engram.recall.semantic = None
    for p in proxies:
        p.close()
    n = len(qs)
    for label, _ in modes:
        ts, seen = times[label], hinted[label]
        degraded = sum(bool(isinstance(a, RecallOut) and a.degraded) for a in answers[label])
        mean_hints = f"{statistics.mean(seen):>6.1f}" if seen else f"{'-':>6}"
        took = asking[label]
        ask_figures = f"{pct(took, 95):>8.2f} {max(took):>8.2f}" if took else f"{'-':>8} {'-':>8}"
        print(f"{size:>9} {label:<26} {pct(ts, 50):>8.2f} {pct(ts, 95):>8.2f} {max(ts):>8.2f} "
              f"{mean_hints} {ask_figures}   {degraded}/{n} degraded", flush=True)
    engram.recall.meaning = None
    if sweep:  # how much of the unbounded top 10 each bound keeps, asked without a deadline to miss
        tops: list[list[list[str]]] = []
        for mt, most in SWEEP:
            engram.recall.semantic = SemanticIndex(HindsightClient(url, signing_key=key), 10_000, max_tokens=mt,
                                                   most=most)
            tops.append([[i.id for i in recall(person, q).items[:10]] for person, q in qs[:100]])
        engram.recall.semantic = None
        for (mt, most), top in zip(SWEEP, tops, strict=True):
            shared = [len(set(t) & set(f)) / len(f) for t, f in zip(top, tops[0], strict=True) if f]
            print(f"# max_tokens {mt} most {most or 'all'}: the top 10 keeps {statistics.mean(shared):.1%} of the "
                  f"unbounded top 10 ({len(shared)} queries, deadline 10 s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--hindsight", action="store_true", help="compare SQL, Hindsight-ranked and Hindsight direct")
    ap.add_argument("--deadline-ms", type=float, default=1000.0,
                    help="Hindsight-ranked recall's deadline (the service default is 150)")
    ap.add_argument("--slow-every", type=int, default=10,
                    help="the trickled row: one Hindsight answer in this many is trickled in slowly")
    ap.add_argument("--before", type=Path,
                    help="also rank through an earlier adapters/hindsight.py (a file), interleaved with this one")
    ap.add_argument("--people", type=int, default=10, help="memories are spread over this many people (banks)")
    ap.add_argument("--sweep", action="store_true",
                    help="also rank with several bounds on Hindsight's answer (max_tokens, hints read)")
    args = ap.parse_args()
    PEOPLE[:] = [f"person-{i}" for i in range(args.people)]
    sizes = [int(s) for s in (args.sizes if args.sizes != "1000,10000" or not args.hindsight else "1000").split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    secret = "bench-secret-" + "z" * 32
    settings = Settings(data_dir=tmp, database_url=None, master_key=master, token_secret=secret)
    pg = EmbeddedPostgres(tmp)
    db = pg.start()
    hindsight = None
    if args.hindsight:
        hindsight = start_hindsight(db, tmp, master)
        settings = Settings(data_dir=tmp, database_url=None, master_key=master, token_secret=secret,
                            hindsight_url=hindsight.url)
    engram = Engram.open(settings, database=db, background=False)
    engram.recall.semantic = None  # bench_hindsight switches it per mode
    engram.governance.put_directory(Caller("acme", "root", "admin"), {"bots": {"b-1": {}}})
    url_db = f"postgresql://{db.user}@/{db.dbname}?host={db.host}&port={db.port}"
    seeded = 0
    if args.hindsight:
        print(f"{'memories':>9} {'mode':<26} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'hints':>6} "
              f"{'ask p95':>8} {'ask max':>8}")
    else:
        print(f"{'memories':>9} {'mode':<11} {'p50 ms':>8} {'p95 ms':>8} {'mean items':>10}")
    try:
        for n in sizes:
            t = time.perf_counter()
            seed(engram, n - seeded, seeded)
            seeded = n
            print(f"# seeded {n} memories in {time.perf_counter() - t:.1f}s", file=sys.stderr)
            qs = queries(args.queries)
            if hindsight is not None:
                bench_hindsight(engram, n, qs, hindsight, args.deadline_ms, slow_every=args.slow_every,
                                sweep=args.sweep, before=args.before)
                continue
            bench_inprocess(engram, qs[:20])
            ip = bench_inprocess(engram, qs)
            items = statistics.mean(
                len(engram.recall.recall(Caller("acme", p, "user"), query=q, as_of=None, max_bytes=17500,
                                          limit=20).items) for p, q in qs[:50])
            print(f"{n:>9} {'in-process':<11} {pct(ip, 50):>8.2f} {pct(ip, 95):>8.2f} {items:>10.1f}")
            port = free_port()
            env = {**os.environ, "ENGRAM_DATABASE_URL": url_db, "ENGRAM_MASTER_KEY": master,
                   "ENGRAM_TOKEN_SECRET": secret, "ENGRAM_DATA_DIR": str(tmp)}
            engram_bin = Path(sys.executable).parent / "engram"
            proc = subprocess.Popen([str(engram_bin), "serve", "--port", str(port)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                url = f"http://127.0.0.1:{port}"
                wait_healthy(url, 200)
                hp = bench_http(url, secret, qs)
                print(f"{n:>9} {'http':<11} {pct(hp, 50):>8.2f} {pct(hp, 95):>8.2f}")
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    finally:
        engram.close()
        if hindsight is not None:
            hindsight.close()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
