"""Search recall's fusion constants (service.recall.Fusion) on the tuning rounds, offline.

    .venv/bin/python -m bench.meaning --round tune --dump /tmp/meaning.pkl
    .venv/bin/python -m bench.quality --dump /tmp/quality.pkl
    .venv/bin/python -m bench.fusion /tmp/meaning.pkl /tmp/quality.pkl

Each dump holds, per question, the words' BM25 rows and the similarity (a z-score against the
background, adapters/background.py) of every memory of its person, so
every combination of a grid of constants is scored here in seconds, with the formula the service uses
(`Fusion.score`, the floor, the top 5 and 10). Printed: for each share of the no-answer questions (kind
`none`) left empty (0, 25, 35, 50%), the best combinations by the mean of paraphrase+cross recall@5
(the meaning round) plus dialogue recall@10 (bench/quality.py, evidence share). bench/meaning.py's held-out
round is never dumped, so never tuned on.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

from engram.service.recall import Fusion, bm25_unit


def ranked(fusion: Fusion, q: dict[str, Any]) -> list[str]:
    """The service's order: words' value, the similarity of each memory with a vector, max-fused, floored."""
    similar = dict(zip(q["ids"], q["scores"], strict=True))
    near = sorted(similar, key=lambda m: -similar[m])[:fusion.depth]
    pool = set(q["words"]) | set(near)
    scored = {m: fusion.score(bm25_unit(q["words"][m]) if m in q["words"] else 0.0,
                              fusion.scaled(similar[m]) if m in similar else None, None, q.get("dated", False))
              for m in pool}
    return sorted((m for m in scored if scored[m] >= fusion.floor), key=lambda m: -scored[m])[:10]


def figures(fusion: Fusion, questions: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for q in questions:
        got, kind = ranked(fusion, q), q["q"]["kind"]
        answers = set(q["q"]["answer_ids"])
        if kind in ("none", "near"):
            out.setdefault(f"{kind} empty", []).append(float(not got))
        elif "evidence" in q["q"]:  # the dialogue benchmark: the share of its evidence in the first 10
            out.setdefault("dialogue r@10", []).append(len(answers & set(got[:10])) / len(answers))
        else:
            out.setdefault(f"{kind} r@5", []).append(float(bool(answers & set(got[:5]))))
    return {k: round(100 * sum(v) / len(v), 1) for k, v in sorted(out.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dumps", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    questions = [q for path in args.dumps for q in pickle.loads(path.read_bytes()).values()]
    base = Fusion()
    results = []
    for low, high, words, both, floor in itertools.product(
            [0.0, 0.5, 1.0, 1.5], [3.0, 4.0, 5.0, 6.0], [0.25, 0.5, 0.75, 1.0], [0.0, 0.25, 0.5],
            [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]):
        fusion = replace(base, low=low, high=high, words=words, both=both, floor=floor)
        f = figures(fusion, questions)
        meant = [f[k] for k in ("paraphrase r@5", "cross r@5") if k in f]
        goal = (sum(meant) / len(meant) if meant else 0.0) + f.get("dialogue r@10", 0.0)
        results.append((goal, f, fusion))
    for empty in (0.0, 25.0, 35.0, 50.0):  # the trade-off: no-answer questions left empty against recall
        ok = [r for r in results if r[1].get("none empty", 100.0) >= empty]
        print(f"-- at least {empty:.0f}% of the no-answer questions empty:")
        for _goal, f, fusion in sorted(ok, key=lambda r: -r[0])[:args.top]:
            print(f"low {fusion.low} high {fusion.high} words {fusion.words} both {fusion.both} floor {fusion.floor}: "
                  + ", ".join(f"{k} {v}" for k, v in f.items()))


if __name__ == "__main__":
    main()
