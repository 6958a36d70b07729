"""Heavy reads (an export, a recall of more than `LARGE_RECALL` items) share a few slots, one at a time
per person: one person's exports or wide recalls wait for each other and for the slots, and never take
every core from their colleagues, whose ordinary requests are not held (ADR 0058)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from engram.domain.errors import RateLimited
from engram.domain.scope import Caller

LARGE_RECALL = 50  # items: a recall asking for more is a heavy read
WAITING = 8  # a person's heavy reads holding a worker thread at once (running or waiting); more: 429 at once


class HeavyReadBusy(RateLimited):
    def __init__(self, detail: str, retry_after: int = 2) -> None:
        super().__init__(detail, retry_after)


class _Turn:
    """A person's turn at heavy reads, with how many of theirs wait for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0


class HeavyReads:
    def __init__(self, slots: int = 2, wait: float = 30.0) -> None:
        """`slots`: heavy reads running at once in this process (ENGRAM_HEAVY_READS); one waits at most
        `wait` seconds in all for its person's turn and a slot, then is refused (429)."""
        self.slots = threading.BoundedSemaphore(slots)
        self.wait = wait
        self._turns: dict[tuple[str, str], _Turn] = {}
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, caller: Caller) -> Iterator[None]:
        """One heavy read of `caller`'s person: after the ones of theirs before it, in a free slot."""
        deadline = time.monotonic() + self.wait
        person = (caller.company, caller.person)
        with self._lock:
            turn = self._turns.setdefault(person, _Turn())
            if turn.holders >= WAITING:  # the waiting would hold the worker threads everyone shares
                raise HeavyReadBusy(f"{WAITING} exports and large recalls of this person are running or waiting "
                                    "already: retry when they are done")
            turn.holders += 1
        try:
            if not turn.lock.acquire(timeout=self.wait):
                raise HeavyReadBusy("this person's exports and large recalls run one at a time, and the ones "
                                    "before this took too long: retry shortly")
            try:
                if not self.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    raise HeavyReadBusy("every slot for exports and large recalls is busy: retry shortly")
                try:
                    yield
                finally:
                    self.slots.release()
            finally:
                turn.lock.release()
        finally:
            with self._lock:
                turn.holders -= 1
                if not turn.holders:
                    del self._turns[person]
