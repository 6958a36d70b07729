"""Duplicate and update detection (ADR 0041): precision and recall of `engram.domain.relation.relate` on
labelled pairs of an earlier confirmed memory and a later statement of the same person.

    .venv/bin/python -m bench.relations [--split tune|final|all] [--meaning] [--show-text]

The pairs live in bench/data/relations/ (README.md there): `tune.tsv` was used to write and tune the
rules; `final.tsv` was written apart, by someone who had not seen the rules, and never tuned on.
With --meaning it also embeds both sides with the packaged model (multilingual-e5-small; the earlier
side stored as int8, as Engram stores it) and reports, for each cosine threshold, how precise
"duplicate when the cosine is at least t" would be alone, and then what learning judges: the rules,
and where they see nothing, a duplicate when the cosine is at least `MEANING_DUPLICATE` and both name
the same values (`relation.same_values`; ADR 0041). Wrong pairs are printed by
id; their text only with --show-text.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from engram.domain.relation import DUPLICATE, UPDATE, relate, same_values

DATA = Path(__file__).resolve().parent / "data" / "relations"
SPLITS = ("tune", "final", "round2", "round3")  # round2: written after ADR 0042; round3 after ADR 0043, never tuned on
DIFFERENT = "different"


@dataclass(frozen=True)
class Pair:
    id: str
    lang: str
    label: str
    old: str
    new: str


def load(split: str) -> list[Pair]:
    pairs = []
    for line in (DATA / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        id_, lang, label, old, new = line.split("\t")
        pairs.append(Pair(id_, lang, label, old, new))
    return pairs


def scores(pairs: list[Pair], said: list[str]) -> dict[str, dict[str, float | int | None]]:
    out: dict[str, dict[str, float | int | None]] = {}
    for kind in (DUPLICATE, UPDATE):
        tp = sum(1 for p, s in zip(pairs, said, strict=True) if s == kind and p.label == kind)
        fp = sum(1 for p, s in zip(pairs, said, strict=True) if s == kind and p.label != kind)
        fn = sum(1 for p, s in zip(pairs, said, strict=True) if s != kind and p.label == kind)
        out[kind] = {"pairs": tp + fn, "said": tp + fp, "precision": round(tp / (tp + fp), 3) if tp + fp else None,
                     "recall": round(tp / (tp + fn), 3) if tp + fn else None}
    return out


def report(name: str, pairs: list[Pair], show_text: bool) -> list[str]:
    said = [relate(p.new, p.old) or DIFFERENT for p in pairs]
    print(f"\n## {name}: {len(pairs)} pairs, {dict(Counter(p.label for p in pairs))}")
    for lang in ("en", "zh", "all"):
        chosen = [(p, s) for p, s in zip(pairs, said, strict=True) if lang == "all" or p.lang == lang]
        figures = scores([p for p, _ in chosen], [s for _, s in chosen])
        print(f"{lang:>4}: " + "; ".join(
            f"{kind} precision {f['precision']} recall {f['recall']} ({f['said']} said, {f['pairs']} labelled)"
            for kind, f in figures.items()))
    wrong = [(p, s) for p, s in zip(pairs, said, strict=True) if s != p.label and s != DIFFERENT]
    missed = [(p, s) for p, s in zip(pairs, said, strict=True) if s != p.label and s == DIFFERENT]
    for title, rows in (("said wrongly", wrong), ("missed", missed)):
        print(f"{title}: {len(rows)}")
        for p, s in rows:
            print(f"  {p.id} {p.label} -> {s}" + (f"  | {p.old} | {p.new}" if show_text else ""))
    return said


def meaning(pairs: list[Pair]) -> None:
    """What the packaged model's cosine would add: precision and recall of `duplicate` at each threshold,
    alone and for the pairs the rules left unrelated."""
    import numpy as np

    from engram.adapters.e5_onnx import E5
    from engram.adapters.vectors import pack, unpack
    from engram.service.relations import MEANING_DUPLICATE

    model = E5(threads=2)
    old = np.stack([unpack(pack(v))[0] for v in model.passage([p.old for p in pairs])])
    new = model.passage([p.new for p in pairs])
    cosines = np.sum(old * new, axis=1)
    said = [relate(p.new, p.old) for p in pairs]
    print("\n## meaning: duplicate when cosine >= t (passage/passage)")
    for t in (0.90, 0.92, 0.94, 0.95, 0.96, 0.97):
        for scope, keep in (("all pairs", lambda s: True), ("left by the rules", lambda s: s is None)):
            chosen = [(p, c) for p, c, s in zip(pairs, cosines, said, strict=True) if keep(s)]
            hits = [p for p, c in chosen if c >= t]
            tp = sum(1 for p in hits if p.label == DUPLICATE)
            labelled = sum(1 for p, _ in chosen if p.label == DUPLICATE)
            print(f"  t {t:.2f} {scope:>17}: {len(hits):4d} said, precision "
                  f"{tp / len(hits) if hits else float('nan'):.3f}, recall {tp / labelled if labelled else 0:.3f}")
    judged = [s or (DUPLICATE if c >= MEANING_DUPLICATE and same_values(p.new, p.old) else None)
              for p, c, s in zip(pairs, cosines, said, strict=True)]
    print(f"\n## learning's judgement: the rules, then meaning (cosine >= {MEANING_DUPLICATE} and the same values)")
    for lang in ("en", "zh", "all"):
        chosen = [(p, s or DIFFERENT) for p, s in zip(pairs, judged, strict=True) if lang == "all" or p.lang == lang]
        figures = scores([p for p, _ in chosen], [s for _, s in chosen])
        print(f"{lang:>4}: " + "; ".join(
            f"{kind} precision {f['precision']} recall {f['recall']} ({f['said']} said, {f['pairs']} labelled)"
            for kind, f in figures.items()))
    wrong = [p.id for p, s in zip(pairs, judged, strict=True) if s is not None and s != p.label]
    print(f"said wrongly: {wrong}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--meaning", action="store_true", help="also measure the packaged model's cosine")
    parser.add_argument("--show-text", action="store_true")
    args = parser.parse_args()
    splits = SPLITS if args.split == "all" else (args.split,)
    for split in splits:
        pairs = load(split)
        report(split, pairs, args.show_text)
        if args.meaning:
            meaning(pairs)


if __name__ == "__main__":
    main()
