"""A second look at what the sensitive rules hold, by meaning (ADR 0043).

The rules (`sensitive_rules`) hold a sentence for review when it has a sensitive word and what that word
needs around it. Everyday chat mentions conditions, medicines and money without a fact about anyone: a
pharmacology student revising beta blockers, a podcast on pensions, a nurse shortage in the news. A
linear probe over the packaged model's vector of the sentence tells most of those from a person's own
fact; a sentence the rules hold and the probe finds ordinary with confidence is let through. The probe
never holds what the rules let through, and never sees a secret (those are refused before).

The weights (`sensitive-probe-*.npz`, written by `bench/sensitive_probe.py` from the labelled sets in
`bench/data/`) belong to one model: with another embedder, or none, the rules decide alone. Nothing is
stored: the vector lives for one call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import probe_weights
from .embedders import Embedder

WEIGHTS = "sensitive-probe-multilingual-e5-small-q4-384.npz"


class SensitiveProbe:
    """`ordinary(text)`: True when the probe is confident a held sentence holds no one's sensitive fact."""

    def __init__(self, embedder: Embedder, path: Path | None = None) -> None:
        data = probe_weights.load(WEIGHTS, embedder, path)
        self.threshold = float(data["threshold"])
        self._mean = data["mean"].astype(np.float32)
        self._scale = data["scale"].astype(np.float32)
        self._weights = data["weights"].astype(np.float32)
        self._bias = float(data["bias"])
        self._embedder = embedder

    def probability(self, text: str) -> float:
        """The probe's probability that the sentence holds someone's sensitive fact."""
        vector = self._embedder.query(text)
        z = float(((vector - self._mean) / self._scale) @ self._weights + self._bias)
        return float(1.0 / (1.0 + np.exp(-z)))

    def ordinary(self, text: str) -> bool:
        return self.probability(text) < self.threshold
