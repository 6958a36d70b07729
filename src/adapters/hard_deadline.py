"""Asynchronous I/O run from synchronous code under a hard deadline.

The caller gets the answer, or `DeadlinePassed`, by the deadline whatever the other side does
(a connect that hangs, headers that never come, a body that trickles in): the work is cancelled
then, which closes its connection. Per-phase socket timeouts cannot promise that, since each phase
may take almost the whole allowance. One event loop thread serves the whole process, however many
calls wait at once; a name lookup runs on that loop's default executor, whose few threads bound
what a hung resolver can hold.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


class DeadlinePassed(Exception):
    """The work did not finish in time and was cancelled."""


def io_loop() -> asyncio.AbstractEventLoop:
    """The process's I/O loop, started on first use in a daemon thread."""
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="engram-io", daemon=True).start()
            _loop = loop
        return _loop


def _forget_loop() -> None:
    global _loop, _lock
    _loop, _lock = None, threading.Lock()  # a forked child has the loop object but not its thread


os.register_at_fork(after_in_child=_forget_loop)


def run_within(work: Callable[[], Awaitable[T]], seconds: float) -> T:
    """`work()` run on the I/O loop; its result or exception, or `DeadlinePassed` after `seconds`."""
    if seconds <= 0:
        raise DeadlinePassed()

    async def bounded() -> T:
        async with asyncio.timeout(seconds):  # ends the work on the loop too, not only the wait
            return await work()

    future = asyncio.run_coroutine_threadsafe(bounded(), io_loop())
    try:
        return future.result(timeout=seconds)
    except (TimeoutError, concurrent.futures.CancelledError):
        future.cancel()
        raise DeadlinePassed() from None
