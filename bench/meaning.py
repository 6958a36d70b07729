"""Recall by meaning on fresh paraphrase, cross-lingual and no-answer questions (bench/data/paraphrase).

    .venv/bin/python -m bench.meaning                    # the held-out round (final.json), every ranking
    .venv/bin/python -m bench.meaning --round tune       # the tuning round
    .venv/bin/python -m bench.meaning --round tune --dump tune.pkl   # for bench/fusion.py
    .venv/bin/python -m bench.meaning --json out.json

Every memory of every person is remembered through the memory service (a memory the review rules hold
as sensitive is confirmed by its person), the embedding worker embeds them all (its rate is printed),
then each question is asked as its person four ways:

  words        RecallService without the meaning index (BM25 over the blind terms, as with ENGRAM_EMBEDDINGS=off)
  meaning      the meaning index alone: the question's nearest vectors, by similarity, no floor
  fused        RecallService as served: words and meaning fused (service.recall.Fusion), the relevance floor
  fused-nofloor  the same ranking without the floor (what the floor costs in recall)

For `paraphrase` and `cross` questions: recall@1 and @5 (the memory among the first 5 items). For `none`
questions (a topic the person never talked about) and `near` ones (a detail never said, on a topic the
person did talk about: harder, and a related memory is a fair answer to it): the share answered with no
item at all. Latency of
each ranking in process (p50/p95), and the query embedding's own.

`--dump FILE` (only with `--round tune`): every question's fusion components (words' BM25, every
similarity of the person's memories), for bench/fusion.py, which searches the fusion's constants on this
round and on bench/quality.py's together. The held-out round is never tuned on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from engram.domain.scope import Caller
from engram.service.pending_writes import collecting

from bench.harness import dump_fusion_components, fresh_engram, pct

DATA = Path(__file__).resolve().parent / "data" / "paraphrase"
COMPANY = "bench"


def memory_id(mid: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram-meaning/{mid}")


def remember_all(engram: Any, people: list[dict[str, Any]]) -> int:
    held = 0
    with collecting():
        for p in people:
            caller = Caller(COMPANY, p["person"], "user")
            for i, m in enumerate(p["memories"]):
                doc = engram.memories.remember(caller, text=m["text"], source={"kind": "chat", "id": f"{p['person']}-chat",
                                                                               "message_id": f"m{i}"},
                                               occurred_at=None, visibility="general", team=None, valid_from=None,
                                               valid_to=None, id=memory_id(m["id"]))
                if doc.status != "confirmed":
                    held += 1
                    engram.memories.confirm(caller, str(doc.id), text=None, acknowledge_sensitive=True)
    engram.runner.catch_up_all()
    return held


def embed_all(engram: Any) -> tuple[int, float]:
    started = time.perf_counter()
    worker = engram.embedding
    worker.turn_seconds = 3600
    n = worker.work()
    return n, time.perf_counter() - started


def rank_words(engram: Any, meaning: Any, q: dict[str, Any]) -> list[str]:
    engram.recall.meaning = None
    try:
        answer = engram.recall.recall(Caller(COMPANY, q["person"], "user"), query=q["text"], as_of=None,
                                      max_bytes=1 << 20, limit=10)
    finally:
        engram.recall.meaning = meaning
    return [i.id for i in answer.items]


def rank_fused(engram: Any, q: dict[str, Any]) -> list[str]:
    answer = engram.recall.recall(Caller(COMPANY, q["person"], "user"), query=q["text"], as_of=None,
                                  max_bytes=1 << 20, limit=10)
    assert not answer.degraded, "the model missed its deadline: raise ENGRAM_EMBEDDINGS_DEADLINE_MS for the bench"
    return [i.id for i in answer.items]


def rank_meaning(engram: Any, q: dict[str, Any]) -> list[str]:
    now = engram.ledger.clock.now()
    near = engram.recall.meaning.nearest(COMPANY, q["person"], q["text"], as_of=now, teams=[], sources=[],
                                         revoked=[], depth=10)
    return [m for m, _ in near.best]


def score(questions: list[dict[str, Any]], ranked: dict[str, list[str]]) -> dict[str, Any]:
    groups: dict[str, list[float]] = defaultdict(list)
    for q in questions:
        got = ranked[q["id"]]
        if q["kind"] in ("none", "near"):
            groups[f"{q['kind']} {q['lang']} empty"].append(float(not got))
            continue
        answers = {str(memory_id(a)) for a in q["answers"]}
        for k in (1, 5):
            groups[f"{q['kind']} {q['lang']} @{k}"].append(float(bool(answers & set(got[:k]))))
            groups[f"{q['kind']} @{k}"].append(float(bool(answers & set(got[:k]))))
    return {g: {"n": len(v), "pct": round(100 * sum(v) / len(v), 1)} for g, v in sorted(groups.items())}


def timed(questions: list[dict[str, Any]], rank: Any) -> tuple[dict[str, list[str]], list[float]]:
    out, times = {}, []
    for q in questions[:5]:
        rank(q)
    for q in questions:
        started = time.perf_counter()
        out[q["id"]] = rank(q)
        times.append((time.perf_counter() - started) * 1000)
    return out, times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--round", choices=["tune", "final"], default="final")
    ap.add_argument("--dump", type=Path, help="the fusion's components per question, for bench/fusion.py (tune only)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.dump and args.round != "tune":
        sys.exit("--dump only on the tuning round: the held-out round is never tuned on")
    data = json.loads((DATA / f"{args.round}.json").read_text(encoding="utf-8"))
    questions = data["questions"]
    with fresh_engram() as bench:
        engram = bench.engram
        meaning = engram.recall.meaning
        assert meaning is not None, "the meaning index is off (ENGRAM_EMBEDDINGS=off?)"
        meaning.queries.deadline = 5.0  # the bench measures ranking, not the deadline
        meaning.queries._cached = 0  # every question embedded afresh
        n_memories = sum(len(p["memories"]) for p in data["people"])
        started = time.perf_counter()
        held = remember_all(engram, data["people"])
        print(f"# remembered {n_memories} memories of {len(data['people'])} people in "
              f"{time.perf_counter() - started:.1f}s ({held} held as sensitive, then confirmed)", file=sys.stderr)
        n, took = embed_all(engram)
        print(f"# embedded {n} memories in {took:.1f}s: {n / took:.1f} a second", file=sys.stderr)
        if args.dump:
            dump_fusion_components(engram, [(Caller(COMPANY, q["person"], "user"),
                                             {**q, "query": q["text"], "as_of": None,
                                              "answer_ids": [str(memory_id(a)) for a in q["answers"]]})
                                            for q in questions], args.dump)
        results: dict[str, Any] = {}
        embed_times = []
        for q in questions:
            t = time.perf_counter()
            meaning.embedder.query(q["text"])
            embed_times.append((time.perf_counter() - t) * 1000)
        for name, rank in (("words", lambda q: rank_words(engram, meaning, q)),
                           ("meaning", lambda q: rank_meaning(engram, q)),
                           ("fused", lambda q: rank_fused(engram, q))):
            ranked, times = timed(questions, rank)
            results[name] = {"figures": score(questions, ranked), "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}
        floor, engram.recall.fusion = engram.recall.fusion, replace(engram.recall.fusion, floor=0.0)
        ranked, times = timed(questions, lambda q: rank_fused(engram, q))
        results["fused-nofloor"] = {"figures": score(questions, ranked), "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}
        engram.recall.fusion = floor
    names = list(results)
    groups = sorted({g for r in results.values() for g in r["figures"]})
    print(f"{'round ' + args.round:<26}" + "".join(f"{n:>15}" for n in names))
    for g in groups:
        n = next(r["figures"][g]["n"] for r in results.values() if g in r["figures"])
        print(f"{g + f' (n={n})':<26}" + "".join(f"{results[k]['figures'].get(g, {}).get('pct', float('nan')):>15.1f}"
                                                 for k in names))
    print(f"{'latency p50 / p95 ms':<26}" + "".join(f"{results[k]['p50_ms']:>8.1f} /{results[k]['p95_ms']:>5.1f}"
                                                   for k in names))
    print(f"query embedding p50 / p95 ms: {pct(embed_times, 50):.1f} / {pct(embed_times, 95):.1f}")
    if args.json:
        args.json.write_text(json.dumps({"round": args.round, "embedded_per_s": n / took, "held": held,
                                         "rankings": results}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
