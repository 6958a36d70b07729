"""Heavy reads (an export, a recall of more than `LARGE_RECALL` items) share a few slots, one at a time
per person: one person's exports or wide recalls wait for each other and never take every worker
thread from their colleagues (ADR 0058)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from engram.domain.errors import DomainError
from engram.domain.scope import Caller

LARGE_RECALL = 50  # items: a recall asking for more is a heavy read


class HeavyReadBusy(DomainError):
    code, status, title = "rate_limited", 429, "Too many requests"

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class HeavyReads:
    def __init__(self, slots: int = 2, wait: float = 10.0) -> None:
        """`slots`: heavy reads running at once in this process (ENGRAM_HEAVY_READS); one waits at most
        `wait` seconds for a slot."""
        self.slots = threading.BoundedSemaphore(slots)
        self.wait = wait
        self._running: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, caller: Caller) -> Iterator[None]:
        """One heavy read of `caller`'s person: refused (429) while another of theirs runs; else it waits
        for a free slot."""
        person = (caller.company, caller.person)
        with self._lock:
            if self._running[person]:
                raise HeavyReadBusy("one export or large recall at a time per person: retry when the first is done")
            self._running[person] += 1
        try:
            if not self.slots.acquire(timeout=self.wait):
                raise HeavyReadBusy("every slot for exports and large recalls is busy: retry shortly", retry_after=2)
            try:
                yield
            finally:
                self.slots.release()
        finally:
            with self._lock:
                self._running[person] -= 1
                if not self._running[person]:
                    del self._running[person]
