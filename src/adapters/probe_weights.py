"""The weights a probe over the packaged model's vectors ships with (ADR 0043): read from the package,
and refused when they belong to another model than the embedder the probe would read."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from .embedders import Embedder


def load(name: str, embedder: Embedder, path: Path | None = None) -> dict[str, np.ndarray]:
    """Every array of the `.npz` file `name` in this package (or at `path`), by its name."""
    with np.load(path or Path(str(resources.files("engram.adapters").joinpath(name)))) as data:
        arrays = {key: data[key] for key in data.files}
    trained_on = str(arrays["model"])
    if embedder.model != trained_on:
        raise ValueError(f"the probe was trained on {trained_on}, not on {embedder.model}")
    return arrays
