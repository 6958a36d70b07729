"""The local insight proposer on paraphrased repeats and on the pairs it must not join (bench/data/insights).

    .venv/bin/python -m bench.insights                   # the held-out round (final.json)
    .venv/bin/python -m bench.insights --round tune      # the tuning round, with every threshold
    .venv/bin/python -m bench.insights --json out.json

Each pair is two things one person said (`same`: the same preference or instruction again, in other
words or the other language; otherwise a contrast, a negation, a related or an unrelated one). Each
pair's two memories are remembered as one person of their own and embedded by the packaged model, then
the local proposer is run over that person's confirmed memories:

  words     the local proposer as served: its terms rule (adapters.insight_local)
  T         the same, or the two memories' vectors alike: their similarity (`Meaning.resemblance`, the
            cosine as a z-score against the background) at least T, for each T of `--alike`

A pair counts as joined when one proposal cites both. Printed per kind and language: the share joined
(for `same` pairs the higher the better, for every other kind the lower), and the similarity's
AUC against each kind (the chance a `same` pair is more alike than a pair of that kind: 0.5 is none).

Then `pooled`: every memory of the round as one person's, one group (a person who said all of it): how
many proposals, and how many of them join only memories of one `same` pair (pure). A proposal joining
two pairs' memories on one topic is not wrong in itself (two people's "coffee black" said by one), so
it is reported as `across pairs`, with whether every pair it joins is a `same` pair.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from engram.adapters import insight_local
from engram.adapters.insight_local import LocalProposer
from engram.domain.insight import Group, Proposal
from engram.domain.scope import Caller
from engram.service.pending_writes import collecting

from bench.harness import fresh_engram

DATA = Path(__file__).resolve().parent / "data" / "insights"
COMPANY = "bench"
POOLED = "pooled"


def memory_id(round_: str, pair: int, side: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"engram-insights/{round_}/{pair}/{side}")


def remember(engram: Any, person: str, text: str, mid: UUID, n: int) -> None:
    caller = Caller(COMPANY, person, "user")
    doc = engram.memories.remember(caller, text=text, source={"kind": "chat", "id": f"{person}-chat",
                                                              "message_id": f"m{n}"},
                                   occurred_at=None, visibility="general", team=None, valid_from=None,
                                   valid_to=None, id=mid)
    if doc.status != "confirmed":
        engram.memories.confirm(caller, str(doc.id), text=None, acknowledge_sensitive=True)


class AlikeProposer(LocalProposer):
    """The local proposer's rule, or the vectors at least `alike` similar (what meaning would join)."""

    def __init__(self, resemblance: Any, alike: float) -> None:
        super().__init__()
        self.resemblance, self.alike = resemblance, alike

    def propose(self, group: Group) -> list[Proposal]:
        facts = [f for f in group.facts if f.text and insight_local.is_preference(f.text)]
        if len(facts) < 2:
            return []
        alike = self.resemblance(Group(group.scope, tuple(facts)))
        keyed = [(f, insight_local.terms(f.text), insight_local.is_negated(f.text)) for f in facts]
        parent = list(range(len(keyed)))

        def root(i: int) -> int:
            while parent[i] != i:
                i = parent[i]
            return i

        for i in range(len(keyed)):
            for j in range(i + 1, len(keyed)):
                if keyed[i][2] == keyed[j][2] and (insight_local.same_thing(keyed[i][1], keyed[j][1])
                                                   or alike[i, j] >= self.alike):
                    parent[root(j)] = root(i)
        clusters: dict[int, list[str]] = defaultdict(list)
        for i, (fact, _t, _n) in enumerate(keyed):
            clusters[root(i)].append(fact.memory_id)
        return [Proposal("", tuple(sorted(m)), "alike") for m in clusters.values() if len(m) >= 2]


def auc(same: list[float], apart: list[float]) -> float | None:
    if not same or not apart:
        return None
    return round(sum((s > a) + 0.5 * (s == a) for s in same for a in apart) / (len(same) * len(apart)), 2)


def joined(proposals: list[Any], a: str, b: str) -> bool:
    return any(a in p.memory_ids and b in p.memory_ids for p in proposals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--round", choices=["tune", "final", "heldout"], default="final")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--alike", default="3,4,5,6,8", help="similarities from which meaning would join, comma-separated")
    ap.add_argument("--features", type=Path, help="each pair's similarity and terms, for a look at the misses")
    args = ap.parse_args()
    pairs = json.loads((DATA / f"{args.round}.json").read_text(encoding="utf-8"))["pairs"]
    thresholds = [float(t) for t in args.alike.split(",") if t]
    with fresh_engram() as bench:
        engram = bench.engram
        meaning = engram.recall.meaning
        assert meaning is not None, "the meaning index is off (ENGRAM_EMBEDDINGS=off?)"
        with collecting():
            for i, pair in enumerate(pairs):
                for side in ("a", "b"):
                    remember(engram, f"p{i}", pair[side], memory_id(args.round, i, side), 0 if side == "a" else 1)
                    remember(engram, POOLED, pair[side], memory_id(args.round, i, side + "-pooled"), 2 * i + (side == "b"))
        engram.runner.catch_up_all()
        worker = engram.embedding
        worker.turn_seconds = 3600
        worker.work()
        words = LocalProposer()
        shares: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        similarity: dict[str, list[float]] = defaultdict(list)
        features = []
        for i, pair in enumerate(pairs):
            groups = engram.insights.groups(COMPANY, f"p{i}")
            a, b = str(memory_id(args.round, i, "a")), str(memory_id(args.round, i, "b"))
            [group] = groups
            alike = float(meaning.resemblance(group)[0, 1])
            similarity["same" if pair["same"] else pair["kind"]].append(alike)
            row = f"{'same' if pair['same'] else 'apart'} {pair['kind']} {pair['lang']}"
            shares[row]["words"].append(float(joined(words.propose(group), a, b)))
            for t in thresholds:
                shares[row][f"{t:g}"].append(float(joined(AlikeProposer(meaning.resemblance, t).propose(group), a, b)))
            features.append({**pair, "alike": round(alike, 2)})
        table = {row: {"n": len(v["words"]), **{k: round(100 * sum(x) / len(x), 1) for k, x in v.items()}}
                 for row, v in sorted(shares.items())}
        aucs = {kind: auc(similarity["same"], v) for kind, v in sorted(similarity.items()) if kind != "same"}
        pooled = {"words": pool(engram, args.round, pairs, words),
                  **{f"{t:g}": pool(engram, args.round, pairs, AlikeProposer(meaning.resemblance, t))
                     for t in thresholds}}
    print(f"insight proposer, {args.round} round, {len(pairs)} pairs: share of pairs joined (%), "
          "words = as served, T = words or vectors at least T alike")
    cols = ["words", *[f"{t:g}" for t in thresholds]]
    print(f"{'kind':<26}{'n':>4}" + "".join(f"{c:>8}" for c in cols))
    for row, v in table.items():
        print(f"{row:<26}{v['n']:>4}" + "".join(f"{v[c]:>8}" for c in cols))
    print("similarity AUC, same pairs against:", json.dumps(aucs))
    for name, p in pooled.items():
        print(f"pooled {name}:", json.dumps(p))
    if args.features:
        args.features.write_text(json.dumps(features, ensure_ascii=False, indent=0))
    if args.json:
        args.json.write_text(json.dumps({"round": args.round, "table": table, "auc": aucs, "pooled": pooled},
                                        indent=1))


def pool(engram: Any, round_: str, pairs: list[dict[str, Any]], proposer: Any) -> dict[str, Any]:
    owner = {str(memory_id(round_, i, side + "-pooled")): i for i in range(len(pairs)) for side in ("a", "b")}
    engram.insights.max_facts = 2 * len(pairs)
    groups = engram.insights.groups(COMPANY, POOLED)
    proposals = [p for g in groups for p in proposer.propose(g)]
    pure = apart = across = across_same = 0
    for p in proposals:
        involved = {owner[m] for m in p.memory_ids}
        if len(involved) > 1:
            across += 1
            across_same += all(pairs[i]["same"] for i in involved)
        elif pairs[next(iter(involved))]["same"]:
            pure += 1
        else:
            apart += 1
    largest = max((len(p.memory_ids) for p in proposals), default=0)
    return {"proposals": len(proposals), "one same pair": pure, "one apart pair": apart, "across pairs": across,
            "across only same pairs": across_same, "largest": largest, "same pairs": sum(p["same"] for p in pairs)}


if __name__ == "__main__":
    main()
