"""A count one process keeps for /metrics (degraded recalls, failed receipt runs): it starts at 0
with the process, and Prometheus' rate() reads a restart as a reset."""

from __future__ import annotations

import threading


class Tally:
    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()  # routes run in a thread pool; sweepers in threads of their own

    def add(self, n: int = 1) -> None:
        with self._lock:
            self._count += n

    @property
    def count(self) -> int:
        return self._count
