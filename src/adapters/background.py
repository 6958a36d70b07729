"""The background recall calibrates meaning against (ADR 0040): everyday statements in each script
(background.json, written for Engram), embedded by the model in use. A memory's similarity to a question
is judged by how far its cosine stands above what unrelated text in its script scores for the same
question: a z-score, comparable across questions, scripts and models, where raw cosines are not (one
model's cosines between two Chinese texts run about 0.05 above those between two English ones).

The shipped model's background vectors ship beside the sentences (`python -m engram.adapters.background`
writes them); another model's are embedded when it is first warmed.

    python -m engram.adapters.background     # rewrite the shipped model's background vectors
"""

from __future__ import annotations

import json
import logging
import threading
from importlib import resources
from typing import Any

import numpy as np

from .vectors import CJK, LATIN

log = logging.getLogger("engram.embeddings")


def sentences() -> dict[int, list[str]]:
    data = json.loads(resources.files(__package__).joinpath("background.json").read_text(encoding="utf-8"))
    return {LATIN: list(data["en"]), CJK: list(data["zh"])}


def _file_name(model: str) -> str:
    return "background-" + "".join(c if c.isalnum() else "-" for c in model) + ".npy"


class Background:
    """Per script, the background's vectors; `calibration(query)` gives each script's mean and spread of
    the query's cosines against them."""

    def __init__(self) -> None:
        self._vectors: dict[str, dict[int, np.ndarray]] = {}
        self._lock = threading.Lock()

    def load(self, embedder: Any) -> None:
        """The vectors of `embedder.model`: shipped, or embedded now (and held for this process)."""
        model = embedder.model
        if model in self._vectors:
            return
        shipped = resources.files(__package__).joinpath(_file_name(model))
        texts = sentences()
        if shipped.is_file():
            with shipped.open("rb") as f:
                matrix = np.load(f).astype(np.float32)
            vectors = {LATIN: matrix[:len(texts[LATIN])], CJK: matrix[len(texts[LATIN]):]}
        else:
            log.info("embedding the recall background for %s (%d sentences)", model, sum(map(len, texts.values())))
            vectors = {script: np.asarray(embedder.passages(t), dtype=np.float32) for script, t in texts.items()}
        with self._lock:
            self._vectors[embedder.model] = vectors  # a remote model names its dimension once it has answered

    def calibration(self, model: str, query: np.ndarray) -> np.ndarray | None:
        """(2, 2): per script, the mean and standard deviation of the query's cosines against the
        background; None when this model's background is not loaded yet."""
        vectors = self._vectors.get(model)
        if vectors is None:
            return None
        out = np.zeros((2, 2), dtype=np.float32)
        for script, matrix in vectors.items():
            cos = matrix @ query
            out[script] = (float(cos.mean()), max(float(cos.std()), 1e-3))
        return out

    def calibrations(self, model: str, rows: np.ndarray) -> np.ndarray | None:
        """(n, 2, 2): `calibration` of each of these unit rows at once."""
        vectors = self._vectors.get(model)
        if vectors is None:
            return None
        out = np.zeros((len(rows), 2, 2), dtype=np.float32)
        for script, matrix in vectors.items():
            cos = rows @ matrix.T
            out[:, script, 0] = cos.mean(axis=1)
            out[:, script, 1] = np.maximum(cos.std(axis=1), 1e-3)
        return out


def main() -> None:
    from pathlib import Path

    from .embedders import LocalEmbedder

    embedder = LocalEmbedder()
    texts = sentences()
    matrix = np.vstack([embedder.passages(texts[LATIN]), embedder.passages(texts[CJK])]).astype(np.float16)
    path = Path(__file__).with_name(_file_name(embedder.model))
    np.save(path, matrix)
    print(f"wrote {path} ({matrix.shape[0]} vectors of {matrix.shape[1]})")


if __name__ == "__main__":
    main()
