"""Train and measure the sensitive probe (adapters/sensitive_probe.py, ADR 0043).

    .venv/bin/python -m bench.sensitive_probe            # cross-validated figures, and the rounds held out
    .venv/bin/python -m bench.sensitive_probe --write    # ... and write the weights the package ships

A logistic regression over the packaged model's vector of a sentence (its query vector, standardised),
trained on every labelled sentence of bench/data/sensitive (secrets aside) and the everyday chat rounds
of bench/data/everyday except those in HELD_OUT, classes weighted equally, L2 0.01. It only ever lets
through what the rules hold, so it is measured on the rules' holds:
- five-fold cross-validation on the training sentences chooses the threshold, by a rule fixed before
  any held-out round was scored: the highest of THRESHOLDS at which the labelled sets' recall (rules and
  probe) stays within one point of the rules' own;
- the rounds in HELD_OUT were written after the probe was designed and are scored once, rules alone and
  rules with the probe (`bench/sensitive.py --everyday ROUND --probe` gives the same figures).
Deterministic: the same data give the same weights (fixed folds, plain gradient descent).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from engram.adapters.content_rules import ContentRules
from engram.adapters.embedders import LocalEmbedder
from engram.adapters.sensitive_probe import WEIGHTS

from bench import sensitive as bench  # the labelled data's loaders

HELD_OUT = ("round5",)
THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
L2, EPOCHS, RATE = 0.01, 1500, 0.1
OUT = Path(__file__).resolve().parents[1] / "src" / "adapters" / WEIGHTS


def rows() -> list[tuple[str, str, bool]]:
    """(part, text, sensitive) of every sentence the probe may learn from or be measured on."""
    out = [(f"labelled-{split}", r.text, r.label == "sensitive") for split in bench.SPLITS for r in bench.load(split)
           if r.label != "secret"]
    return out + [(f"everyday-{split}", r.text, r.label == "sensitive") for split in bench.EVERYDAY_SPLITS
                  for r in bench.load_everyday(split)]


def train(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    w, b = np.zeros(x.shape[1]), 0.0
    weight = np.where(y, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(EPOCHS):
        g = (1 / (1 + np.exp(-(x @ w + b))) - y) * weight
        w -= RATE * (x.T @ g / len(y) + L2 * w)
        b -= RATE * float(g.mean())
    return w, b


def probability(x: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-(x @ w + b))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"write the weights to {OUT.name}")
    args = parser.parse_args()
    data = rows()
    parts = np.array([p for p, _, _ in data])
    y = np.array([s for _, _, s in data])
    rules = ContentRules()
    held = np.array([rules.classify(t) == "sensitive" for _, t, _ in data])
    embedder = LocalEmbedder()
    start = time.perf_counter()
    vectors = np.stack([embedder.query(t) for _, t, _ in data])
    print(f"{len(data)} sentences embedded in {time.perf_counter() - start:.0f} s")
    training = ~np.isin(parts, [f"everyday-{r}" for r in HELD_OUT])
    mean, scale = vectors[training].mean(0), vectors[training].std(0)
    x = (vectors - mean) / scale
    labelled = np.char.startswith(parts.astype(str), "labelled-")
    everyday = training & ~labelled

    index = np.where(training)[0]
    folds = np.random.default_rng(0).integers(0, 5, len(index))
    p_cv = np.zeros(len(data))
    for k in range(5):
        w, b = train(x[index[folds != k]], y[index[folds != k]])
        p_cv[index[folds == k]] = probability(x[index[folds == k]], w, b)
    rules_recall = (held & y & labelled).sum() / (y & labelled).sum()
    print(f"rules alone: labelled recall {rules_recall:.3f}, everyday (training rounds) wrongly held "
          f"{(held & ~y & everyday).sum()} of {everyday.sum()}")
    chosen = THRESHOLDS[0]
    for threshold in THRESHOLDS:
        kept = held & (p_cv >= threshold)
        recall = (kept & y & labelled).sum() / (y & labelled).sum()
        print(f"  threshold {threshold:.2f} (cross-validated): labelled recall {recall:.3f}, everyday wrongly held "
              f"{(kept & ~y & everyday).sum()}")
        if recall >= rules_recall - 0.010:
            chosen = threshold
    print(f"threshold chosen: {chosen}")

    w, b = train(x[training], y[training])
    p = probability(x, w, b)
    for split in HELD_OUT:
        part = parts == f"everyday-{split}"
        for name, kept in (("rules alone", held), ("rules and probe", held & (p >= chosen))):
            wrong = (kept & ~y & part).sum()
            print(f"held out {split}, {name}: wrongly held {wrong} of {part.sum()} ({100 * wrong / part.sum():.2f}%), "
                  f"sensitive found {(kept & y & part).sum()} of {(y & part).sum()}")
    if args.write:
        np.savez(OUT, model=np.array(embedder.model), threshold=np.array(chosen), mean=mean.astype(np.float32),
                 scale=scale.astype(np.float32), weights=w.astype(np.float32), bias=np.array(b))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
