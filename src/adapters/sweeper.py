"""A background thread that runs one housekeeping task every `interval` seconds and outlives its failures."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .availability import UNAVAILABLE_ERRORS
from .outage import Outage

log = logging.getLogger("engram")


class Sweeper:
    def __init__(self, task: Callable[[], object], interval: float) -> None:
        self.task, self.interval = task, interval
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
        while not self._stop.wait(delay):
            delay = self.interval
            try:
                self.task()
            except UNAVAILABLE_ERRORS as exc:  # an outage: one line when it starts, a growing pause meanwhile
                delay = max(self.interval, self._outage.failed(exc))
                continue
            except Exception:  # noqa: BLE001 - housekeeping must outlive a bad item
                log.exception("sweep failed; will retry")
            self._outage.ok()
