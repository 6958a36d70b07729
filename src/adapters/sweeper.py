"""A background thread that runs one housekeeping task every `interval` seconds and outlives its failures."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .availability import UNAVAILABLE_ERRORS
from .outage import Outage

log = logging.getLogger("engram")


class Sweeper:
    """`yield_to` (optional) counts the requests others made (writes, recalls): while it moves between
    two runs, the task runs at most every `busy_interval` seconds instead of every `interval` (it gives
    way to a burst of requests, and is never starved by one)."""

    def __init__(self, task: Callable[[], object], interval: float, *, yield_to: Callable[[], int] | None = None,
                 busy_interval: float | None = None) -> None:
        self.task, self.interval = task, interval
        self.yield_to, self.busy_interval = yield_to, busy_interval if busy_interval is not None else 10 * interval
        self.deferred = 0  # runs put off for others' writes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engram-sweeper", daemon=True)
        self._outage = Outage(log, f"database (sweep {getattr(task, '__qualname__', 'task')})", first=interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        delay = self.interval
        seen = self.yield_to() if self.yield_to is not None else 0
        last = time.monotonic()
        while not self._stop.wait(delay):
            delay = self.interval
            if self.yield_to is not None:
                if self.yield_to() != seen and time.monotonic() - last < self.busy_interval:
                    self.deferred += 1
                    continue
            try:
                self.task()
            except UNAVAILABLE_ERRORS as exc:  # an outage: one line when it starts, a growing pause meanwhile
                delay = max(self.interval, self._outage.failed(exc))
                continue
            except Exception:  # housekeeping must outlive a bad item
                log.exception("sweep failed; will retry")
            finally:
                if self.yield_to is not None:
                    seen, last = self.yield_to(), time.monotonic()  # its own writes are not others'
            self._outage.ok()
