"""Read-your-writes, one request at a time.

The HTTP layer opens `PendingWrites` around a write request; `MemoryService.save` puts there what it
stored instead of waiting for the projectors in the request's thread (when they run elsewhere); the
HTTP layer then waits without holding a thread, and a write not visible in time answers 202 with
`visible: false`. Callers without an open collector (background jobs, the command line) still wait
in their own thread, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class PendingWrites:
    """What one request stored and has not yet seen projected."""

    def __init__(self) -> None:
        self.recordings: list[Any] = []

    def add(self, recordings: Sequence[Any]) -> None:
        self.recordings.extend(recordings)

    def __bool__(self) -> bool:
        return bool(self.recordings)


_collector: ContextVar[PendingWrites | None] = ContextVar("engram_pending_writes", default=None)


@contextmanager
def collecting() -> Iterator[PendingWrites]:
    """For the duration of one request (the worker threads it uses share the same collector)."""
    pending = PendingWrites()
    token = _collector.set(pending)
    try:
        yield pending
    finally:
        _collector.reset(token)


def collector() -> PendingWrites | None:
    return _collector.get()
