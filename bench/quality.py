"""Recall quality on the conversational benchmark in bench/data/quality (see bench/quality_data.py).

    .venv/bin/python -m bench.quality                      # Engram SQL only and plain BM25, both languages
    .venv/bin/python -m bench.quality --lang zh --limit 60 # a quick run
    .venv/bin/python -m bench.quality --hindsight          # also Engram with Hindsight, and Hindsight direct
    .venv/bin/python -m bench.quality --json figures.json

Every turn of every dialogue, the person's and the assistant's, is remembered through the memory
service as a confirmed memory of that person (source kind chat, id = the conversation, message_id =
the turn, occurred_at = the turn's time, no valid time; a turn the review rules hold as sensitive is
confirmed by the person, and counted). Then each question is asked as its person:

  engram sql          RecallService without a semantic index (query = the question, as_of = its time)
  engram+hindsight    RecallService with Hindsight as its semantic index (`--hindsight`)
  hindsight direct    Hindsight's recall on the person's bank, its results' documents in order (`--hindsight`)
  bm25                plain Okapi BM25 (k1 1.2, b 0.75) over the person's turns in plaintext: words split
                      on anything not a letter or digit, lower-cased, no stop words or stemming; Chinese
                      (CJK) runs as character bigrams

Recall@k of a question is the fraction of its evidence turns among the first k results; the figures
are means over questions, in percent, per language, per question kind and overall, with each
ranking's latency (p50/p95 of the calls, in process). Hindsight's LLM is the suite's local fake
(one fact per turn: its text); its embeddings are the fake's too (a hash of the text: no meaning), or
with `--embeddings minilm` all-MiniLM-L6-v2 served by bench/minilm.py.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from engram.domain.scope import Caller, Scope
from engram.service.pending_writes import collecting

from bench.harness import Bench, dump_fusion_components, fresh_engram, pct

DATA = Path(__file__).resolve().parent / "data" / "quality"
COMPANY = "bench"
KS = (5, 10)
KINDS = ("fact", "paraphrase", "reply", "date_absolute", "date_relative", "multi_hop", "update")

STOP = threading.Event()  # set on SIGTERM: the sync workers stop after their current batch
Ranker = Callable[[dict[str, Any]], list[str]]  # a question -> turn ids, best first


# -- the data ---------------------------------------------------------------------------------------

def load(langs: list[str]) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Every person's turns (with their conversation) and the questions, in file order."""
    turns: dict[str, list[dict[str, Any]]] = defaultdict(list)
    questions: list[dict[str, Any]] = []
    for lang in langs:
        data = json.loads((DATA / f"{lang}.json").read_text(encoding="utf-8"))
        for conv in data["conversations"]:
            for msg in conv["messages"]:
                turns[conv["person"]].append({**msg, "conversation": conv["id"]})
        questions += [{**q, "lang": lang} for q in data["questions"]]
    return turns, questions


def spread(questions: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """`limit` questions taken evenly through the list (so every person and kind keeps a share)."""
    if not limit or limit >= len(questions):
        return questions
    step = len(questions) / limit
    return [questions[int(i * step)] for i in range(limit)]


def memory_id(turn_id: str) -> str:
    return str(uuid5(NAMESPACE_URL, f"engram-quality/{turn_id}"))


def instant(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


# -- plain BM25 -------------------------------------------------------------------------------------

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_]+")
_IS_CJK = re.compile(rf"[{_CJK}]")


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for run in _TOKEN.findall(text.lower()):
        if _IS_CJK.match(run):
            out.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
        else:
            out.append(run)
    return out


class BM25:
    """Okapi BM25 over one person's turns, idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""

    def __init__(self, docs: list[tuple[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.ids = [doc_id for doc_id, _ in docs]
        self.tf = [Counter(tokens(text)) for _, text in docs]
        self.len = [sum(tf.values()) for tf in self.tf]
        self.avgdl = sum(self.len) / max(len(docs), 1)
        self.k1, self.b = k1, b
        df: Counter[str] = Counter()
        self.postings: dict[str, list[int]] = defaultdict(list)
        for i, tf in enumerate(self.tf):
            df.update(tf.keys())
            for term in tf:
                self.postings[term].append(i)
        n = len(docs)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def search(self, query: str, k: int) -> list[str]:
        scores: dict[int, float] = defaultdict(float)
        for term in set(tokens(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i in self.postings[term]:
                tf = self.tf[i][term]
                scores[i] += idf * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * self.len[i] / self.avgdl))
        best = sorted(scores, key=lambda i: (-scores[i], i))[:k]
        return [self.ids[i] for i in best]


# -- loading into Engram ----------------------------------------------------------------------------

class Deferred:
    """Stands in for the projector runner during the load: writes are collected, not settled one by
    one; the projections then catch up once (as after `engram import`), in batches: far fewer round
    trips, the same projections."""

    defers = True

    def settle_recordings(self, recordings: list[Any]) -> None:
        raise AssertionError("the load settles once, at its end")


def remember_all(bench: Bench, turns: dict[str, list[dict[str, Any]]], threads: int = 3) -> int:
    """Every turn as a confirmed memory of its person, through the memory service (a few people at a
    time, as concurrent requests would); returns how many the review rules held as sensitive (the
    person then confirmed them)."""
    memories, ledger = bench.engram.memories, bench.engram.ledger

    def remember(person: str) -> int:
        held = 0
        caller = Caller(COMPANY, person, "user")
        with collecting():
            for turn in turns[person]:
                source = {"kind": "chat", "id": turn["conversation"], "message_id": turn["id"]}
                doc = memories.remember(caller, text=turn["text"], source=source,
                                        occurred_at=instant(turn["occurred_at"]), visibility="general", team=None,
                                        valid_from=None, valid_to=None, id=UUID(memory_id(turn["id"])))
                if doc.status != "confirmed":
                    held += 1
                    memories.confirm(caller, str(doc.id), text=None, acknowledge_sensitive=True)
        return held

    settler, ledger.settler = ledger.settler, Deferred()
    try:
        with ThreadPoolExecutor(threads) as pool:
            held = sum(pool.map(remember, list(turns)))
    finally:
        ledger.settler = settler
    bench.engram.runner.catch_up_all()
    with bench.engram.store.factory.datastore.get_connection() as conn:
        conn.execute("ANALYZE")  # what autovacuum would soon do after a bulk load
    return held


def sync_hindsight(bench: Bench, threads: int = 4) -> None:
    """Every memory into Hindsight through the syncer, a few workers at a time (as several workers
    would: each claims its own rows)."""
    syncer = bench.engram.syncer
    assert syncer is not None

    def work(_: int) -> int:
        synced = 0
        while not STOP.is_set() and (done := syncer.sync(limit=50)):
            synced += done
        return synced

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        synced = sum(pool.map(work, range(threads)))
    took = time.perf_counter() - started
    print(f"# synced {synced} memories to Hindsight in {took:.1f}s; backlog {syncer.backlog()}", file=sys.stderr)


# -- rankings ---------------------------------------------------------------------------------------

class EngramRanker:
    """Recall through the service as the question's person; counts the answers marked degraded
    (Hindsight configured but down or slower than the deadline, so SQL ranked alone). `meaning`: the
    meaning index recall uses (None: words only, as with ENGRAM_EMBEDDINGS=off)."""

    def __init__(self, bench: Bench, turn_of: dict[str, str], semantic: Any, meaning: Any = None) -> None:
        self.recall, self.turn_of, self.semantic, self.meaning = bench.engram.recall, turn_of, semantic, meaning
        self.degraded = 0

    def __call__(self, q: dict[str, Any]) -> list[str]:
        self.recall.semantic = self.semantic
        self.recall.meaning = self.meaning
        answer = self.recall.recall(Caller(COMPANY, q["person"], "user"), query=q["question"],
                                    as_of=instant(q.get("asked_at")) or datetime.now(UTC),
                                    max_bytes=1 << 20, limit=max(KS))
        self.degraded += bool(answer.degraded)
        return [self.turn_of[item.id] for item in answer.items if item.id in self.turn_of]


def hindsight_ranker(bench: Bench, turn_of: dict[str, str]) -> Ranker:
    from engram.adapters.hindsight import HindsightClient, bank_for, memory_id_of

    client = HindsightClient(bench.hindsight.url, signing_key=bench.engram.master.hindsight_signing_key())

    def rank(q: dict[str, Any]) -> list[str]:
        out: list[str] = []
        for hint in client.recall(bank_for(Scope(COMPANY, q["person"])), q["question"], deadline=30):
            docs = hint.source_document_ids if hint.kind == "observation" else (hint.document_id,)
            for doc in docs:
                turn = turn_of.get(memory_id_of(doc) or "")
                if turn is not None and turn not in out:
                    out.append(turn)
        return out[:max(KS)]
    return rank


def semantic_index(bench: Bench, deadline_ms: float) -> Any:
    from engram.adapters.hindsight import HindsightClient, SemanticIndex

    client = HindsightClient(bench.hindsight.url, signing_key=bench.engram.master.hindsight_signing_key())
    return SemanticIndex(client, deadline_ms)


def bm25_ranker(turns: dict[str, list[dict[str, Any]]]) -> Ranker:
    indexes = {person: BM25([(t["id"], t["text"]) for t in person_turns]) for person, person_turns in turns.items()}
    return lambda q: indexes[q["person"]].search(q["question"], max(KS))


# -- measuring and reporting ------------------------------------------------------------------------

def measure(name: str, rank: Ranker, questions: list[dict[str, Any]]) -> dict[str, Any]:
    for q in questions[:10]:  # warm-up
        rank(q)
    per_question, times = [], []
    degraded = getattr(rank, "degraded", 0)
    for q in questions:
        started = time.perf_counter()
        ranked = rank(q)
        times.append((time.perf_counter() - started) * 1000)
        evidence = set(q["evidence"])
        per_question.append({"id": q["id"], "lang": q["lang"], "kind": q["kind"],
                             **{f"r@{k}": len(evidence & set(ranked[:k])) / len(evidence) for k in KS},
                             "ranked": ranked[:max(KS)]})
    return {"name": name, "questions": per_question, "p50_ms": pct(times, 50), "p95_ms": pct(times, 95),
            "max_ms": max(times), "degraded": getattr(rank, "degraded", 0) - degraded}


def summary(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in result["questions"]:
        groups["all"].append(row)
        groups[row["lang"]].append(row)
        groups[row["kind"]].append(row)
    return {g: {"n": len(rows), **{f"r@{k}": 100 * sum(r[f"r@{k}"] for r in rows) / len(rows) for k in KS}}
            for g, rows in groups.items()}


def report(results: list[dict[str, Any]], langs: list[str]) -> dict[str, Any]:
    sums = {r["name"]: summary(r) for r in results}
    width = max(18, *(len(r["name"]) + 2 for r in results))

    def row(label: str, cells: list[str]) -> None:
        print(f"{label:<22}" + "".join(f"{c:>{width}}" for c in cells))

    print()
    row("recall@5 / @10 (%)", [r["name"] for r in results])
    for g in ["all", *langs, *KINDS]:
        n = sums[results[0]["name"]].get(g, {}).get("n", 0)
        if n:
            row(f"{g} (n={n})", [f"{sums[r['name']][g]['r@5']:.1f} / {sums[r['name']][g]['r@10']:5.1f}" for r in results])
    row("latency p50 / p95 ms", [f"{r['p50_ms']:.1f} / {r['p95_ms']:5.1f}" for r in results])
    row("latency max ms", [f"{r['max_ms']:.1f}" for r in results])
    if any(r["degraded"] for r in results):
        row("degraded answers", [str(r["degraded"]) for r in results])
    return {"rankings": {r["name"]: {"recall": sums[r["name"]], "p50_ms": r["p50_ms"], "p95_ms": r["p95_ms"],
                                     "max_ms": r["max_ms"], "degraded": r["degraded"], "questions": r["questions"]}
                         for r in results}}


def stop(*_: Any) -> None:
    """SIGTERM: leave through the `finally`s, which stop the servers this program started."""
    STOP.set()
    sys.exit(143)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", choices=["en", "zh", "all"], default="all")
    ap.add_argument("--limit", type=int, default=None, help="ask only this many questions (spread evenly)")
    ap.add_argument("--people", type=int, default=None,
                    help="only the first N people of each language (recall is per person: a smaller sample, "
                         "not an easier one)")
    ap.add_argument("--hindsight", action="store_true", help="also Engram with Hindsight, and Hindsight direct")
    ap.add_argument("--deadline-ms", default=None,
                    help="Hindsight-ranked recall's deadlines, comma-separated, one column each "
                         "(default: the service's, 150)")
    ap.add_argument("--embeddings", choices=["fake", "minilm"], default="fake",
                    help="Hindsight's embeddings: the test suite's fake (a hash of the text) or all-MiniLM-L6-v2 "
                         "(bench/minilm.py; `make bench-model` installs its weights)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures (and per-question results) here")
    ap.add_argument("--dump", type=Path, default=None,
                    help="write each question's fusion components (words' BM25, every similarity) here, for tuning")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, stop)
    langs = ["en", "zh"] if args.lang == "all" else [args.lang]
    turns, questions = load(langs)
    if args.people:
        chosen = {p for lang in langs for p in list(dict.fromkeys(q["person"] for q in questions
                                                                   if q["lang"] == lang))[:args.people]}
        questions = [q for q in questions if q["person"] in chosen]
    questions = spread(questions, args.limit)
    asked = {q["person"] for q in questions}
    turns = {p: t for p, t in turns.items() if p in asked}
    n_turns = sum(len(t) for t in turns.values())
    with fresh_engram(hindsight=args.hindsight, lazy_commit=True, minilm=args.embeddings == "minilm") as bench:
        started = time.perf_counter()
        held = remember_all(bench, turns)
        print(f"# remembered {n_turns} turns of {len(turns)} people in {time.perf_counter() - started:.1f}s "
              f"({held} held as sensitive, then confirmed); {len(questions)} questions", file=sys.stderr)
        turn_of = {memory_id(t["id"]): t["id"] for person_turns in turns.values() for t in person_turns}
        semantic, meaning = bench.engram.recall.semantic, bench.engram.recall.meaning
        rankers: list[tuple[str, Ranker]] = [("engram sql", EngramRanker(bench, turn_of, None))]
        if meaning is not None:
            meaning.queries.deadline = 5.0  # the figures are the ranking's: no answer cut short by the deadline
            started, worker = time.perf_counter(), bench.engram.embedding
            worker.turn_seconds = 3600
            embedded = worker.work()
            print(f"# embedded {embedded} memories in {time.perf_counter() - started:.1f}s", file=sys.stderr)
            rankers.append(("engram words+meaning", EngramRanker(bench, turn_of, None, meaning)))
            if args.dump:
                dump_fusion_components(bench.engram, [
                    (Caller(COMPANY, q["person"], "user"),
                     {**q, "query": q["question"], "as_of": instant(q.get("asked_at")) or datetime.now(UTC),
                      "answer_ids": [memory_id(e) for e in q["evidence"]]}) for q in questions], args.dump)
        if args.hindsight:
            sync_hindsight(bench)
            for deadline in (args.deadline_ms or "").split(",") if args.deadline_ms else [None]:
                index = semantic if deadline is None else semantic_index(bench, float(deadline))
                label = "engram+hindsight" + ("" if deadline is None else f" {float(deadline):g}ms")
                rankers.append((label, EngramRanker(bench, turn_of, index)))
                if meaning is not None:
                    rankers.append((label.replace("engram", "engram meaning"),
                                    EngramRanker(bench, turn_of, index, meaning)))
            rankers.append(("hindsight direct", hindsight_ranker(bench, turn_of)))
        rankers.append(("bm25", bm25_ranker(turns)))
        results = []
        for name, rank in rankers:
            started = time.perf_counter()
            results.append(measure(name, rank, questions))
            print(f"# {name}: {time.perf_counter() - started:.1f}s", file=sys.stderr)
        bench.engram.recall.semantic, bench.engram.recall.meaning = semantic, meaning
    figures = report(results, langs)
    if args.json is not None:
        figures.update({"turns": n_turns, "held_as_sensitive": held, "questions": len(questions), "langs": langs,
                        "embeddings": args.embeddings if args.hindsight else None})
        args.json.write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
