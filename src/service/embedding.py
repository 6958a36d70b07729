"""The embedding worker (ADR 0040): answering revisions queued by the recall view's projection are
embedded off the request path, a few at a time, and their vectors stored sealed under each memory's key.

A forget while a batch is embedded leaves nothing behind (a vector is stored only while its revision
answers and its key exists). The model down: the batch waits for its lease to end and is tried again;
recall meanwhile finds those memories by their words. A text the model fails on alone, `GIVE_UP` times,
leaves the backlog (counted): it never holds up the others."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from engram.adapters.embedders import Embedder, EmbedderUnavailable
from engram.adapters.vectors import VectorStore, script_of, seal_vector
from engram.adapters.view_cipher import unseal_from_view
from engram.domain.clock import Clock

from .tally import Tally

log = logging.getLogger("engram.embeddings")

GIVE_UP = 3


NICE = 10  # the worker's thread gives way to the requests' threads for the CPU (Linux schedules threads apart)
_niced = threading.local()


def _lower_this_threads_priority() -> None:
    """The model's engine runs in the calling thread: at a lower priority, embedding takes the CPU the
    requests leave, instead of a share of what a burst of writes needs."""
    if getattr(_niced, "done", False):
        return
    _niced.done = True
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    except (AttributeError, OSError):  # not Linux, or not allowed: it only runs at the usual priority
        pass


class EmbeddingWorker:
    def __init__(self, store: VectorStore, keys: Any, embedder: Embedder, clock: Clock, *, batch: int = 8,
                 lease_seconds: float = 60.0, turn_seconds: float = 2.0,
                 warm: Callable[[], None] = lambda: None) -> None:
        self.warm = warm  # the model and its background, where they were not ready at start
        self.store = store
        self.keys = keys
        self.embedder = embedder
        self.clock = clock
        self.batch = batch
        self.lease_seconds = lease_seconds
        self.turn_seconds = turn_seconds
        self.embedded = Tally()  # vectors stored (/metrics)
        self.failed = Tally()  # texts the model failed on alone, given up after GIVE_UP tries
        self.unavailable = Tally()  # batches the model did not answer
        self._backfilled = False
        self._tidied = 0.0

    def work(self) -> int:
        """One turn: batches until the backlog is empty or `turn_seconds` have passed. Returns how many
        vectors were stored."""
        _lower_this_threads_priority()
        if self.embedder.model.endswith("/?"):  # a remote model that has not answered yet
            self.warm()
            if self.embedder.model.endswith("/?"):
                return 0
        if not self._backfilled:
            queued = self.store.backfill(self.embedder.model)
            if queued:
                log.info("%d answering revisions queued to be embedded by %s", queued, self.embedder.model)
            self._backfilled = True
        if time.monotonic() - self._tidied > 600:
            self._tidied = time.monotonic()
            self.store.tidy(self.embedder.model)
        stored = 0
        ends = time.monotonic() + self.turn_seconds
        while time.monotonic() < ends:
            leased = self.store.lease(self.embedder.model, self.batch, self.lease_seconds, self.clock.now())
            if not leased:
                break
            n = self._embed(leased)
            if n is None:
                break  # the model is down: its leases lapse and the batch comes again
            stored += n
        return stored

    def _embed(self, leased: list[dict[str, Any]]) -> int | None:
        done: list[tuple[Any, int]] = []
        due: list[tuple[dict[str, Any], bytes, str]] = []
        for r in leased:
            done.append((r["memory_id"], r["revision"]))
            key = self.keys.unwrap_row(r["memory_id"], r["wrapped"]) if r["sealed_text"] is not None else None
            if r["embedded"] or key is None:
                continue  # embedded already, forgotten, or no longer an answer
            text = unseal_from_view(key, r["memory_id"], "text", r["sealed_text"])
            if text:
                due.append((r, key, text))
        vectors: list[tuple[Any, int, str, str, bytes, bool]] = []
        alone = 0  # stored one at a time, after the batch failed
        if due:
            try:
                rows = self.embedder.passages([t for _, _, t in due])
            except EmbedderUnavailable:
                self.unavailable.add()
                return None
            except Exception:  # noqa: BLE001 - one text the engine fails on must not stop the rest
                if len(due) == 1:
                    return self._failed_alone(due[0][0], done)
                rows = None
            model = self.embedder.model  # a remote model names its dimension once it has answered
            for i, (r, key, text) in enumerate(due):
                if rows is None:  # the batch failed: each on its own, to find the one
                    n = self._embed([r])
                    if n is None:
                        return None
                    alone += n
                    continue
                vectors.append((r["memory_id"], r["revision"], r["company"], r["person"],
                                seal_vector(key, r["memory_id"], r["revision"], model, rows[i], script_of(text)),
                                len(text) > self.embedder.max_chars))
            if rows is None:
                done = [d for d in done if d not in {(r["memory_id"], r["revision"]) for r, _, _ in due}]
        stored = self.store.store(self.embedder.model, vectors, done, self.clock.now())
        self.embedded.add(stored)
        return stored + alone

    def _failed_alone(self, row: dict[str, Any], done: list[tuple[Any, int]]) -> int:
        if row["attempts"] >= GIVE_UP:
            self.failed.add()
            log.warning("memory %s revision %d: the model failed on it %d times; it is found by its words only",
                        row["memory_id"], row["revision"], row["attempts"])
            self.store.store(self.embedder.model, [], done, self.clock.now())
        return 0  # else its lease lapses and it is tried again
