"""The packaged model as a judge of how a new statement stands to a person's confirmed memories, when no
chat model is configured (ADR 0043).

Learning asks it where the rules and the vectors alone said nothing, about at most a few of the person's
own memories in the same scope, nearest in meaning (`service/relations.py`). For each pair it reads the
passage vectors of both sides (their product, their difference and their cosine) through a three-way
logistic regression (`bench/relation_probe.py` trains it from the labelled pairs in
bench/data/relations) and says `duplicate` or `update` only above the thresholds chosen there for
precision; otherwise nothing. A wrong duplicate would fold a new fact into another memory when the person
confirms, so its threshold is the higher one; an update is only offered as a correction.

The weights belong to one model: with another embedder, the judge is not built. Nothing is stored or
logged: the vectors live for one call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engram.domain.relation import DUPLICATE, UPDATE

from . import probe_weights
from .embedders import Embedder

WEIGHTS = "relation-probe-multilingual-e5-small-q4-384.npz"
CLASSES = ("different", DUPLICATE, UPDATE)


def pair_features(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """One row a pair: the two unit vectors' product and absolute difference, then their cosine."""
    return np.concatenate([old * new, np.abs(old - new), (old * new).sum(-1, keepdims=True)], axis=-1)


class RelationProbe:
    """A `service.relations.Judge` that calls no model and spends no budget."""

    def __init__(self, embedder: Embedder, path: Path | None = None) -> None:
        data = probe_weights.load(WEIGHTS, embedder, path)
        self.thresholds = {DUPLICATE: float(data["duplicate"]), UPDATE: float(data["update"])}
        self._mean = data["mean"].astype(np.float32)
        self._scale = data["scale"].astype(np.float32)
        self._weights = data["weights"].astype(np.float32)
        self._bias = data["bias"].astype(np.float32)
        self._embedder = embedder

    def probabilities(self, new: str, olds: list[str]) -> np.ndarray:
        """One row an old memory: the probabilities of different, duplicate and update."""
        vectors = self._embedder.passages([new, *olds])
        x = (pair_features(vectors[1:], vectors[:1]) - self._mean) / self._scale
        z = x @ self._weights + self._bias
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return np.asarray(p / p.sum(axis=1, keepdims=True))

    def judge(self, company: str, person: str, new: str, olds: list[str]) -> list[str | None]:
        if not olds:
            return []
        said: list[str | None] = []
        for row in self.probabilities(new, olds):
            kinds = [k for k in (DUPLICATE, UPDATE) if row[CLASSES.index(k)] >= self.thresholds[k]]
            said.append(kinds[0] if kinds else None)
        return said
