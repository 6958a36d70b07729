"""Train and measure the relation probe (adapters/relation_probe.py, ADR 0043).

    .venv/bin/python -m bench.relation_probe            # cross-validated figures, and the parts held out
    .venv/bin/python -m bench.relation_probe --write    # ... and write the weights the package ships

A three-way logistic regression (different, duplicate, update) over the packaged model's passage vectors
of both sides of a pair (their product, their absolute difference, their cosine; standardised), trained on
the labelled pairs of bench/data/relations except the parts in HELD_OUT, L2 0.03. Thresholds are chosen
by a rule fixed before any held-out part was scored: each part trained on is held out in turn (the model
trained on the others), and each class's threshold is the lowest of THRESHOLDS at which its precision over
those held-out predictions is at least PRECISION[class]. The parts in HELD_OUT are then scored once, as
learning judges (the rules; then a duplicate by meaning, cosine >= MEANING_DUPLICATE and the same values;
then the probe, for a pair at least MEANING_ASK alike). Deterministic: the same data give the same weights.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from engram.adapters.embedders import LocalEmbedder
from engram.adapters.relation_probe import CLASSES, WEIGHTS, pair_features
from engram.domain.relation import DUPLICATE, UPDATE, relate, same_values
from engram.service.relations import MEANING_ASK, MEANING_DUPLICATE

from bench import relations as bench  # the labelled pairs' loader

HELD_OUT = ("round3",)
THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
PRECISION = {DUPLICATE: 0.97, UPDATE: 0.95}  # a wrong duplicate folds a fact away; an update is only offered
L2, EPOCHS, RATE = 0.03, 2000, 0.1
OUT = Path(__file__).resolve().parents[1] / "src" / "adapters" / WEIGHTS


def train(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, b, target = np.zeros((x.shape[1], len(CLASSES))), np.zeros(len(CLASSES)), np.eye(len(CLASSES))[y]
    for _ in range(EPOCHS):
        g = (softmax(x @ w + b) - target) / len(y)
        w -= RATE * (x.T @ g + L2 * w)
        b -= RATE * g.sum(0)
    return w, b


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return np.asarray(p / p.sum(axis=1, keepdims=True))


def scores(said: list[str | None], labels: list[str]) -> str:
    out = []
    for kind in (DUPLICATE, UPDATE):
        n = sum(s == kind for s in said)
        right = sum(s == kind and label == kind for s, label in zip(said, labels, strict=True))
        out.append(f"{kind} precision {right / n if n else float('nan'):.3f} recall "
                   f"{right / labels.count(kind):.3f} ({n} said, {labels.count(kind)} labelled)")
    return "; ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"write the weights to {OUT.name}")
    args = parser.parse_args()
    splits = [s for s in bench.SPLITS if s not in HELD_OUT]
    held = [s for s in HELD_OUT if s in bench.SPLITS]
    pairs = [(s, p) for s in splits + held for p in bench.load(s)]
    parts = np.array([s for s, _ in pairs])
    y = np.array([CLASSES.index(p.label) for _, p in pairs])
    embedder = LocalEmbedder()
    old, new = embedder.passages([p.old for _, p in pairs]), embedder.passages([p.new for _, p in pairs])
    features = pair_features(old, new)
    training = np.isin(parts, splits)
    mean, scale = features[training].mean(0), features[training].std(0) + 1e-6
    x = (features - mean) / scale

    p_cv = np.zeros((len(pairs), len(CLASSES)))
    for part in splits:
        w, b = train(x[training & (parts != part)], y[training & (parts != part)])
        p_cv[parts == part] = softmax(x[parts == part] @ w + b)
    chosen = {}
    for kind in (DUPLICATE, UPDATE):
        k = CLASSES.index(kind)
        chosen[kind] = THRESHOLDS[-1]
        for threshold in THRESHOLDS:
            said = training & (p_cv[:, k] >= threshold)
            right = (said & (y == k)).sum()
            precision = right / max(said.sum(), 1)
            print(f"  {kind} >= {threshold:.2f} (each part held out in turn): precision {precision:.3f}, "
                  f"recall {right / (training & (y == k)).sum():.3f}")
            if precision >= PRECISION[kind]:
                chosen[kind] = threshold
                break
    print(f"thresholds chosen: {chosen}")

    w, b = train(x[training], y[training])
    p = softmax(x @ w + b)
    cosine = (old * new).sum(1)
    for part in held:
        rows = np.where(parts == part)[0]
        labels = [pairs[i][1].label for i in rows]
        rules = [relate(pairs[i][1].new, pairs[i][1].old) for i in rows]
        learning: list[str | None] = []
        for i, said in zip(rows, rules, strict=True):
            pair = pairs[i][1]
            if said is None and cosine[i] >= MEANING_DUPLICATE and same_values(pair.new, pair.old):
                said = DUPLICATE
            if said is None and cosine[i] >= MEANING_ASK:
                said = next((kind for kind in (DUPLICATE, UPDATE)
                             if p[i, CLASSES.index(kind)] >= chosen[kind]), None)
            learning.append(said)
        print(f"held out {part} ({len(rows)} pairs, {dict(Counter(labels))}):")
        print(f"  the rules alone: {scores(rules, labels)}")
        print(f"  as learning judges, with the probe: {scores(learning, labels)}")
    if args.write:
        np.savez(OUT, model=np.array(embedder.model), duplicate=np.array(chosen[DUPLICATE]),
                 update=np.array(chosen[UPDATE]), mean=mean.astype(np.float32), scale=scale.astype(np.float32),
                 weights=w.astype(np.float32), bias=b.astype(np.float32))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
