"""Recall latency, the API's resident memory and the views' size at 1,000 / 10,000 / 100,000 memories.

    .venv/bin/python -m bench.scale [--sizes 1000,10000,100000] [--clients 1,4] [--queries 300] [--processes 1]
        [--per-person 100] [--out FILE]

Each size gets a fresh embedded PostgreSQL (`synchronous_commit` off on that throwaway server) and its
own population: three companies holding 60%, 30% and 10% of the memories, `--per-person` memories a
person on average, spread over the people of a company by rank (Zipf: the busiest person of the
largest company holds about a seventh of its memories), teams of 8 with two restricted channels each,
a registered bot acting for everyone, 30% of the people writing Chinese. A memory comes from the
person's direct chat (75%), mail (10%) or a team channel (15%, restricted to the team); 5% are
questions, 10% carry a tag, 8% are corrected later. Said times are spread over the last year.

Seeding takes the path `remember` takes, without the HTTP request around it: each memory is built as
`MemoryService.remember` builds it (the id remember gives, the quoted evidence, the bot as actor), its
data key is created, and the events are stored through the event store's sealing mapper 250 at a time
(`harness.save_in_batches`); then the projector runner catches every view up as it does after any
write (blind terms, sealed texts, per-person figures). Remember over HTTP stores the same events one
request at a time. Then `VACUUM ANALYZE`, which autovacuum would do after such a load.

A separate `engram serve` (in-process projectors and background work, the embedded default's process)
on that database answers `POST /v1/recall` as the bot for a person, from one keep-alive client and
then from several concurrent ones (`--clients`): English and Chinese queries that hit (two words of
one of the person's memories) and that miss (words no memory holds), people drawn in proportion to
their memories (a person with more memories recalls more), and the busiest person of the largest
company alone (70% hits). Resident memory (VmRSS and its peak VmHWM, from /proc) of the serve process
after it started, and after the load. Table sizes (with indexes and TOAST) of the views, the event
store and the keys. Prints one JSON document (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg

from engram.adapters.blind_index import index_terms
from engram.api.identity import issue_token
from engram.domain.evidence import Evidence, Source
from engram.domain.memory import Memory
from engram.domain.scope import Caller, Scope

from bench.harness import fresh_engram, pct, save_in_batches
from bench.writes import drive, serving

WORDS = json.loads((Path(__file__).resolve().parent / "data" / "scale" / "words.json").read_text(encoding="utf-8"))
COMPANIES = (("northwind", 0.6), ("lakeside", 0.3), ("orchard", 0.1))
BOT = "assistant"
TEAM_SIZE = 8
TAGS = ("work", "home", "travel", "food")


def zipf_weights(n: int, s: float = 1.0) -> list[float]:
    return [1 / (rank ** s) for rank in range(1, n + 1)]


class Language:
    """Sentences, queries that hit and queries that miss, in one language, from bench/data/scale/words.json."""

    def __init__(self, lang: str, seed: int) -> None:
        self.lang, self.data = lang, WORDS[lang]
        r = random.Random(seed)
        self.slots: dict[str, list[str]] = {k: list(v) for k, v in self.data["slots"].items()}
        if lang == "en":
            syl = self.data["syllables"]
            self.slots["name"] = sorted({"".join(r.choice(syl) for _ in range(r.randint(2, 3))) for _ in range(2500)})
            self.slots["project"] = sorted({"".join(r.choice(syl) for _ in range(r.randint(2, 4))) + r.choice(
                ("", "x", " two", " labs")) for _ in range(4000)})
        else:
            d = self.data
            self.slots["name"] = sorted({r.choice(d["surnames"]) + "".join(r.choice(d["given"]) for _ in range(
                r.randint(1, 2))) for _ in range(2500)})
            self.slots["project"] = sorted({"".join(r.sample(d["codename"], 2)) + r.choice(("", "计划", "平台"))
                                            for _ in range(800)})
        # common values are said often, the long tail seldom
        self.cum = {k: list(itertools.accumulate(zipf_weights(len(v), 0.9))) for k, v in self.slots.items()}
        known = {t for v in self.slots.values() for w in v for t in index_terms(w)}
        known |= {t for tpl in self.data["templates"] + self.data["questions"] for t in index_terms(tpl)}
        # a miss shares no term with anything a memory could say
        self.misses = [w for w in self.data["misses"] if not set(index_terms(w)) & known]
        if len(self.misses) < 4:
            raise SystemExit(f"too few miss words survive for {lang}: {self.misses}")

    def sentence(self, r: random.Random, question: bool = False) -> tuple[str, list[str]]:
        """A memory's text and the slot values it says (what a query that hits it asks for)."""
        template = r.choice(self.data["questions" if question else "templates"])
        said: list[str] = []

        def fill(name: str) -> str:
            said.append(r.choices(self.slots[name], cum_weights=self.cum[name])[0])
            return said[-1]

        text = template
        while "{" in text:
            start = text.index("{")
            end = text.index("}", start)
            text = text[:start] + fill(text[start + 1:end]) + text[end + 1:]
        return text, said

    def hit(self, r: random.Random, said: list[str]) -> str:
        words = r.sample(said, 2) if len(said) >= 2 else said * 2
        return r.choice(self.data["query_frames"]).format(*words)

    def miss(self, r: random.Random) -> str:
        return r.choice(self.data["miss_frames"]).format(*r.sample(self.misses, 2))


@dataclass
class Person:
    company: str
    id: str
    lang: str
    team: str
    memories: int = 0
    said: list[list[str]] = field(default_factory=list)  # a reservoir of what some of their memories say


@dataclass
class Population:
    people: list[Person]
    weights: list[float]
    languages: dict[str, Language]

    def busiest(self) -> Person:
        return max(self.people, key=lambda p: p.memories)


def population(n: int, per_person: int, seed: int) -> Population:
    r = random.Random(seed)
    people: list[Person] = []
    weights: list[float] = []
    for company, share in COMPANIES:
        count = max(5, round(n * share / per_person))
        zipf = zipf_weights(count)
        total = sum(zipf)
        for i in range(count):
            people.append(Person(company, f"{company}-p{i}", "zh" if r.random() < 0.3 else "en",
                                 f"{company}-team{i // TEAM_SIZE}"))
            weights.append(share * zipf[i] / total)
    return Population(people, weights, {"en": Language("en", seed + 1), "zh": Language("zh", seed + 2)})


def directory(pop: Population, company: str) -> dict[str, Any]:
    teams: dict[str, list[str]] = {}
    for p in pop.people:
        if p.company == company:
            teams.setdefault(p.team, []).append(p.id)
    sources = {f"{team}-{kind}": {"team": team, "members": members}
               for team, members in teams.items() for kind in ("channel", "standup")}
    return {"teams": {t: {"members": m} for t, m in teams.items()}, "sources": sources,
            "bots": {BOT: {"teams": sorted(teams), "sources": sorted(sources)}}}


def memories(engram: Any, pop: Population, n: int, seed: int) -> Iterator[Memory]:
    """`n` memories as `MemoryService.remember` builds them for the bot, said over the last year."""
    r = random.Random(seed)
    now = engram.ledger.clock.now()
    start = now - timedelta(days=366)
    step = timedelta(days=365) / n
    cum = list(itertools.accumulate(pop.weights))
    for i in range(n):
        p = r.choices(pop.people, cum_weights=cum)[0]
        lang = pop.languages[p.lang]
        at = start + step * i
        roll = r.random()
        if roll < 0.75:
            source, visibility, team = {"kind": "chat", "id": f"dm-{p.id}"}, "general", None
        elif roll < 0.85:
            source, visibility, team = {"kind": "email", "id": f"mail-{p.id}"}, "general", None
        else:
            source = {"kind": "chat", "id": f"{p.team}-{r.choice(('channel', 'standup'))}"}
            visibility, team = "restricted", p.team
        source["message_id"] = f"m-{i}"
        text, said = lang.sentence(r, question=r.random() < 0.05)
        caller = Caller(p.company, p.id, "bot", bot=BOT)
        origin = Source.of(source)
        m = Memory.remember(id=engram.memories.remembered_id(caller, source, text),
                            scope=Scope(p.company, p.id, visibility, team, origin.id), source=origin.as_dict(),
                            text=text, evidence=[Evidence.quoted(text, text, origin, at).as_dict()],
                            valid_from=None, valid_to=None, actor=BOT, at=at,
                            tags=[r.choice(TAGS)] if r.random() < 0.1 else None)
        if r.random() < 0.08:  # corrected later, as `MemoryService.correct` does: the correction is its evidence
            text, said = lang.sentence(r)
            later = at + timedelta(hours=r.randint(1, 48))
            m.correct(text=text, valid_from=None, valid_to=None, reason=None, actor=BOT, at=later,
                      evidence=[Evidence.quoted(text, text, Source(caller.entry, BOT), later).as_dict()])
        p.memories += 1
        if len(p.said) < 40:
            p.said.append(said)
        elif r.random() < 0.1:
            p.said[r.randrange(40)] = said
        yield m


def seed(engram: Any, pop: Population, n: int, seed_: int) -> dict[str, Any]:
    for company, _ in COMPANIES:
        engram.governance.put_directory(Caller(company, "root", "admin"), directory(pop, company))
    t = time.perf_counter()
    save_in_batches(engram, memories(engram, pop, n, seed_))
    stored = time.perf_counter() - t
    events = engram.store.recorder.max_notification_id()
    t = time.perf_counter()
    engram.runner.catch_up_all()
    projected = time.perf_counter() - t
    t = time.perf_counter()
    with psycopg.connect(engram.database.conninfo, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    vacuumed = time.perf_counter() - t
    busiest = pop.busiest()
    return {"memories": n, "events": events, "people": len(pop.people), "companies": len(COMPANIES),
            "teams": len({(p.company, p.team) for p in pop.people}),
            "busiest_person_memories": busiest.memories,
            "median_person_memories": sorted(p.memories for p in pop.people)[len(pop.people) // 2],
            "store_s": round(stored, 1), "store_events_per_s": round(events / stored, 1),
            "project_s": round(projected, 1), "project_events_per_s": round(events / projected, 1),
            "vacuum_analyze_s": round(vacuumed, 1)}


def queries(pop: Population, count: int, seed_: int) -> dict[str, list[tuple[Person, str]]]:
    """Per kind, (person, query): people drawn by how many memories they hold."""
    r = random.Random(seed_)
    out: dict[str, list[tuple[Person, str]]] = {}
    for lang in ("en", "zh"):
        speakers = [p for p in pop.people if p.lang == lang and p.said]
        weights = [p.memories for p in speakers]
        lg = pop.languages[lang]
        hits, misses = [], []
        for p in r.choices(speakers, weights=weights, k=count):
            hits.append((p, lg.hit(r, r.choice(p.said))))
        for p in r.choices(speakers, weights=weights, k=count):
            misses.append((p, lg.miss(r)))
        out[f"{lang}_hit"], out[f"{lang}_miss"] = hits, misses
    busiest = pop.busiest()
    lg = pop.languages[busiest.lang]
    out["busiest_person"] = [(busiest, lg.hit(r, r.choice(busiest.said)) if r.random() < 0.7 else lg.miss(r))
                             for _ in range(count)]
    return out


def serve_pid(port: int) -> int:
    """The pid of this process's `engram serve --port PORT` child."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if ppid == me and b"serve" in cmd and str(port).encode() in cmd:
            return int(entry.name)
    raise RuntimeError(f"no engram serve on port {port} among this process's children")


def memory_of(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (the peak) of a process, in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: round(int(fields[name].split()[0]) / 1024, 1) for name in ("VmRSS", "VmHWM")}


def table_sizes(engram: Any) -> dict[str, Any]:
    """Bytes on disk (heap, indexes, TOAST) of each view's tables, the event store and the keys."""
    views = {name: list(p.view.tables) for name, p in engram.projections.items()}
    with psycopg.connect(engram.database.conninfo, autocommit=True) as conn:
        rows = dict(conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')").fetchall())
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    mib = 1024 * 1024
    out: dict[str, Any] = {"views_mib": {}, "tables_mib": {}}
    for name, tables in views.items():
        out["views_mib"][name] = round(sum(rows.get(t, 0) for t in tables) / mib, 1)
    for t in ("engram_recall_terms", "engram_recall_revisions", "engram_memories", "engram_data_keys", "engram_vectors"):
        out["tables_mib"][t] = round(rows.get(t, 0) / mib, 1)
    events = [t for t in rows if t.endswith("_events") or t == "stored_events"]
    out["event_store_mib"] = round(sum(rows[t] for t in events) / mib, 1)
    out["all_views_mib"] = round(sum(out["views_mib"].values()), 1)
    out["database_mib"] = round(database / mib, 1)
    return out


def sample_items(url: str, tokens: dict[tuple[str, str], str], qs: list[tuple[Person, str]],
                 count: int = 30) -> dict[str, float]:
    """Outside the timed run: how many items the first `count` queries bring back, and how many bring any."""
    found = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for p, q in qs[:count]:
            r = http.post("/v1/recall", json={"query": q},
                          headers={"Authorization": f"Bearer {tokens[(p.company, p.id)]}"})
            r.raise_for_status()
            found.append(len(r.json()["items"]))
    return {"mean_items": round(sum(found) / len(found), 1), "answered_some": round(sum(1 for f in found if f) /
                                                                                       len(found), 2)}


def fill_vectors(engram: Any, seed_: int) -> dict[str, Any]:
    """A sealed vector for every answering revision, as the embedding worker would store it, but random
    (unit length, the model's dimension): embedding 100,000 memories with the model would take hours
    here, and what a recall's search costs does not depend on what the vectors say. The query is
    still embedded by the real model at every recall."""
    import numpy as np

    from engram.adapters.vectors import CJK, LATIN, VectorStore, seal_vector

    model = engram.recall.meaning.embedder.model
    rng = np.random.default_rng(seed_)
    store = VectorStore(engram.store.datastore)
    t = time.perf_counter()
    with engram.store.datastore.get_connection() as conn:
        rows = conn.execute("SELECT memory_id, revision, company, person FROM engram_recall_revisions "
                            "WHERE is_answer ORDER BY memory_id").fetchall()
    for i in range(0, len(rows), 2000):
        batch = rows[i:i + 2000]
        keys = engram.store.keys.get_many(r["memory_id"] for r in batch)
        vectors = rng.normal(size=(len(batch), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.store(model, [(r["memory_id"], r["revision"], r["company"], r["person"],
                             seal_vector(keys[str(r["memory_id"])], r["memory_id"], r["revision"], model, v,
                                         CJK if rng.random() < 0.3 else LATIN), False)
                            for r, v in zip(batch, vectors, strict=True) if str(r["memory_id"]) in keys],
                    [(r["memory_id"], r["revision"]) for r in batch], engram.ledger.clock.now())
    return {"vectors": len(rows), "fill_s": round(time.perf_counter() - t, 1)}


def measure(bench: Any, pop: Population, args: argparse.Namespace, size: int) -> dict[str, Any]:
    tokens = {(p.company, p.id): issue_token(bench.secret, company=p.company, user=p.id, role="bot", bot=BOT)
              for p in pop.people}
    kinds = queries(pop, args.queries, size)

    def bodies(qs: list[tuple[Person, str]]) -> list[tuple[str, dict[str, Any], str]]:
        return [("/v1/recall", {"query": q}, tokens[(p.company, p.id)]) for p, q in qs]

    out: dict[str, Any] = {}
    with serving(bench, args.processes) as url:
        pid = serve_pid(int(url.rsplit(":", 1)[1]))
        time.sleep(2)  # its start-up work (catch-up, sweepers' first turn) settles
        out["rss_started_mib"] = memory_of(pid)
        warm = [b for qs in kinds.values() for b in bodies(qs[:15])]
        asyncio.run(drive(url, max(args.clients), warm, (200,)))
        out["items"] = {kind: sample_items(url, tokens, qs) for kind, qs in kinds.items()}
        for clients in args.clients:
            every: list[float] = []
            run: dict[str, Any] = {}
            for kind, qs in kinds.items():
                latencies, took, _ = asyncio.run(drive(url, clients, bodies(qs), (200,)))
                if kind != "busiest_person":
                    every += latencies
                run[kind] = {"n": len(latencies), "per_s": round(len(latencies) / took, 1), **percentiles(latencies),
                             "max_ms": round(max(latencies), 2)}
                print(f"# {size}, {clients} clients: {kind} {run[kind]}", file=sys.stderr)
            run["all"] = {"n": len(every), **percentiles(every)}
            out[f"clients_{clients}"] = run
        out["rss_after_load_mib"] = memory_of(pid)
    return out


def percentiles(latencies: list[float]) -> dict[str, float]:
    return {f"p{p}_ms": round(pct(latencies, p), 2) for p in (50, 95, 99)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--clients", default="1,4", help="concurrent keep-alive clients, one run for each")
    ap.add_argument("--queries", type=int, default=300, help="per kind (English/Chinese, hit/miss, busiest person)")
    ap.add_argument("--per-person", type=int, default=100, help="memories a person holds on average")
    ap.add_argument("--processes", type=int, default=1,
                    help="engram serve --processes (ADR 0037); the memory figures are then the main process's")
    ap.add_argument("--meaning", default="off,local",
                    help="ENGRAM_EMBEDDINGS of each measured serve, in turn on the same data (`local`: every memory "
                         "given a random sealed vector first, the query embedded by the real model)")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    report: dict[str, Any] = {"command": " ".join(["python -m bench.scale", *sys.argv[1:]]), "clients": args.clients,
                              "queries_per_kind": args.queries, "cores": os.cpu_count(),
                              "load_average_before": load_before, "sizes": {}}
    for size in (int(s) for s in args.sizes.split(",")):
        pop = population(size, args.per_person, seed=size)
        with fresh_engram(lazy_commit=True) as bench:
            t = time.perf_counter()
            seeded = seed(bench.engram, pop, size, seed_=size + 1)
            print(f"# {size}: seeded in {time.perf_counter() - t:.0f}s: {seeded}", file=sys.stderr)
            recall: dict[str, Any] = {}
            for meaning in args.meaning.split(","):
                if meaning != "off" and "vectors" not in seeded:
                    seeded.update(fill_vectors(bench.engram, size))
                    with psycopg.connect(bench.engram.database.conninfo, autocommit=True) as conn:
                        conn.execute("VACUUM ANALYZE")
                os.environ["ENGRAM_EMBEDDINGS"] = meaning
                recall[meaning] = measure(bench, pop, args, size)
            sizes = table_sizes(bench.engram)
            with open("/proc/loadavg") as f:
                load = f.read().split()[:3]
        report["sizes"][str(size)] = {"seed": seeded, "storage": sizes, "recall": recall, "load_average_after": load}
        if args.out:
            args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
