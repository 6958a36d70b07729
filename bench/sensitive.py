"""Sensitive-content rules: precision, recall and F1 on a labelled set of English and Chinese sentences.

    .venv/bin/python -m bench.sensitive [--split tune|heldout1|...|heldout6|all] [--show-text]

The set lives in bench/data/sensitive/ (README.md there gives the labelling policy and its history):
the rules were tuned in rounds; each `heldoutN_*.tsv` was written after round N, measured once as
it stood, then tuned on in round N+1. `heldout6_*.tsv`, the last, was never tuned on.
A sentence counts as flagged when `ContentRules.classify` says sensitive or secret (both keep it
out of memory until the person acts). Sentences labelled `secret` are scored on their own: they
must be refused, and no other sentence may be. Misclassified sentences are printed by id; their
text only with --show-text (the set is synthetic, but the habit is not to print text).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from engram.adapters.content_rules import ContentRules, sensitive_kind
from engram.domain.review import NORMAL_CONTENT, SECRET_CONTENT

DATA = Path(__file__).resolve().parent / "data" / "sensitive"
SPLITS = ("tune", "heldout1", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6")


@dataclass(frozen=True)
class Row:
    id: str
    lang: str
    label: str  # sensitive, normal or secret
    category: str
    hard: bool
    text: str


@dataclass(frozen=True)
class Scored:
    row: Row
    verdict: str  # what ContentRules.classify said
    kind: str | None  # which sensitive rule fired, if any

    @property
    def flagged(self) -> bool:
        return self.verdict != NORMAL_CONTENT


def load(split: str = "all") -> list[Row]:
    rows: list[Row] = []
    for name in SPLITS if split == "all" else (split,):
        for path in sorted(DATA.glob(f"{name}_*.tsv")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip() or line.startswith("#"):
                    continue
                id_, label, category, hard, text = line.split("\t")
                rows.append(Row(id_, id_.split("-")[0], label, category, hard == "1", text))
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids)), "duplicate ids in the labelled set"
    return rows


def score(rows: list[Row], rules: ContentRules | None = None) -> list[Scored]:
    rules = rules or ContentRules()
    return [Scored(r, rules.classify(r.text), sensitive_kind(r.text)) for r in rows]


@dataclass(frozen=True)
class Figures:
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def figures(scored: list[Scored]) -> Figures:
    """Sensitive versus normal; secret-labelled sentences are left out (see secret_figures)."""
    pairs = [(s.row.label == "sensitive", s.flagged) for s in scored if s.row.label != "secret"]
    return Figures(tp=sum(a and b for a, b in pairs), fp=sum(b and not a for a, b in pairs),
                   fn=sum(a and not b for a, b in pairs), tn=sum(not a and not b for a, b in pairs))


def secret_figures(scored: list[Scored]) -> tuple[int, int, list[str]]:
    """(secrets refused, secrets in the set, ids of other sentences that were refused)."""
    secrets = [s for s in scored if s.row.label == "secret"]
    wrongly = [s.row.id for s in scored if s.row.label != "secret" and s.verdict == SECRET_CONTENT]
    return sum(s.verdict == SECRET_CONTENT for s in secrets), len(secrets), wrongly


def misses(scored: list[Scored]) -> tuple[list[Scored], list[Scored]]:
    """(false negatives, false positives), secret-labelled sentences left out."""
    rest = [s for s in scored if s.row.label != "secret"]
    return ([s for s in rest if s.row.label == "sensitive" and not s.flagged],
            [s for s in rest if s.row.label == "normal" and s.flagged])


def print_misses(scored: list[Scored], show_text: bool) -> None:
    fn, fp = misses(scored)
    for name, group in (("false negatives", fn), ("false positives", fp)):
        print(f"{name} ({len(group)}): {' '.join(s.row.id for s in group) or '-'}")
        if show_text:
            for s in group:
                print(f"    {s.row.id} [{s.kind}] {s.row.text}")
    print()


def _line(name: str, f: Figures) -> str:
    return (f"{name:<24} precision {f.precision:.3f}  recall {f.recall:.3f}  F1 {f.f1:.3f}   "
            f"tp {f.tp:>3} fp {f.fp:>3} fn {f.fn:>3} tn {f.tn:>3}")


def report(title: str, scored: list[Scored], show_text: bool) -> None:
    rows = [s for s in scored if s.row.label != "secret"]
    print(f"== {title}: {len(scored)} sentences "
          f"({sum(s.row.lang == 'en' for s in scored)} en, {sum(s.row.lang == 'zh' for s in scored)} zh; "
          f"{sum(s.row.label == 'sensitive' for s in scored)} sensitive, {sum(s.row.label == 'normal' for s in scored)} "
          f"normal, {sum(s.row.label == 'secret' for s in scored)} secret)")
    print(_line("overall", figures(rows)))
    for lang in ("en", "zh"):
        print(_line(f"  {lang}", figures([s for s in rows if s.row.lang == lang])))
    print("recall by labelled category (sensitive):")
    for cat in sorted({s.row.category for s in rows if s.row.label == "sensitive"}):
        group = [s for s in rows if s.row.label == "sensitive" and s.row.category == cat]
        print(f"  {cat:<22} {sum(s.flagged for s in group):>3}/{len(group):<3} recall {figures(group).recall:.3f}")
    print("precision by the rule that fired:")
    for kind in sorted({s.kind for s in rows if s.flagged}, key=str):
        group = [s for s in rows if s.flagged and s.kind == kind]
        right = sum(s.row.label == "sensitive" for s in group)
        print(f"  {str(kind):<22} {right:>3}/{len(group):<3} precision {right / len(group):.3f}")
    print("held for review by labelled category (normal):")
    for cat in sorted({s.row.category for s in rows if s.row.label == "normal"}):
        group = [s for s in rows if s.row.label == "normal" and s.row.category == cat]
        print(f"  {cat:<22} {sum(s.flagged for s in group):>3}/{len(group):<3} held")
    hard = [s for s in rows if s.row.hard]
    print(_line("hard cases", figures(hard)))
    refused, total, wrongly = secret_figures(scored)
    print(f"secrets refused {refused}/{total}; other sentences refused as secrets: {len(wrongly)} {wrongly}")
    print_misses(scored, show_text)


EVERYDAY = Path(__file__).resolve().parent / "data" / "everyday"
EVERYDAY_SPLITS = ("tune", "final", "round2", "round3", "round4", "round5")  # in the order written and tuned on (README there)


def load_everyday(split: str) -> list[Row]:
    """Everyday chat turns (bench/data/everyday/README.md): mostly ordinary, a few the speaker's own or a
    named person's sensitive facts, as they come up in conversation."""
    rows: list[Row] = []
    for path in sorted(EVERYDAY.glob(f"{split}_*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            id_, _conversation, label, category, text = line.split("\t")
            rows.append(Row(id_, id_.split("-")[0], label, category, False, text))
    return rows


def report_everyday(title: str, scored: list[Scored], show_text: bool) -> None:
    """What a person sees of it: the share of all turns held for a sensitive review (target at most 0.5%)
    and how many of them should not have been, beside the sensitive turns found."""
    f = figures(scored)
    held = f.tp + f.fp
    print(f"== everyday {title}: {len(scored)} turns "
          f"({sum(s.row.lang == 'en' for s in scored)} en, {sum(s.row.lang == 'zh' for s in scored)} zh; "
          f"{f.tp + f.fn} sensitive)")
    print(f"held {held} of {len(scored)} turns ({100 * held / max(len(scored), 1):.2f}%); wrongly held {f.fp} "
          f"({100 * f.fp / max(len(scored), 1):.2f}% of turns)")
    print(_line("overall", f))
    for lang in ("en", "zh"):
        group = [s for s in scored if s.row.lang == lang]
        g = figures(group)
        print(_line(f"  {lang}", g) + f"   held {100 * (g.tp + g.fp) / max(len(group), 1):.2f}%")
    print("wrongly held by labelled category:")
    for cat in sorted({s.row.category for s in scored if s.row.label == "normal"}):
        group = [s for s in scored if s.row.label == "normal" and s.row.category == cat]
        print(f"  {cat:<12} {sum(s.flagged for s in group):>3}/{len(group)}")
    print_misses(scored, show_text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--everyday", choices=(*EVERYDAY_SPLITS, "all"), default=None,
                    help="the everyday chat turns instead (bench/data/everyday): the share held for review")
    ap.add_argument("--split", choices=(*SPLITS, "all"), default=None,
                    help="one split only (default: each split, then all)")
    ap.add_argument("--show-text", action="store_true", help="print misclassified sentences' text too")
    ap.add_argument("--probe", action="store_true",
                    help="the rules and the probe that may let their holds through, as `engram serve` runs them "
                         "(ADR 0043; bench/sensitive_probe.py trains it)")
    args = ap.parse_args()
    rules = ContentRules()
    if args.probe:
        from engram.adapters.embedders import LocalEmbedder
        from engram.adapters.sensitive_probe import SensitiveProbe

        rules = ContentRules(SensitiveProbe(LocalEmbedder()).ordinary)
    rules.classify("warm-up")  # the first call imports detect-secrets
    if args.everyday:
        for split in EVERYDAY_SPLITS if args.everyday == "all" else (args.everyday,):
            report_everyday(split, score(load_everyday(split), rules), args.show_text)
        return
    for split in (args.split,) if args.split else (*SPLITS, "all"):
        rows = load(split)
        start = time.perf_counter()
        scored = score(rows, rules)
        elapsed = time.perf_counter() - start
        report(f"{split} ({elapsed * 1000 / max(len(rows), 1):.2f} ms per sentence)", scored, args.show_text)


if __name__ == "__main__":
    main()
