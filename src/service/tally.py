"""A count one process keeps for /metrics (degraded recalls, failed receipt runs): it starts at 0
with the process, and Prometheus' rate() reads a restart as a reset."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Tally:
    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()  # routes run in a thread pool; sweepers in threads of their own
        self._mirrors: list[Callable[[int], None]] = []

    def add(self, n: int = 1) -> None:
        with self._lock:
            self._count += n
        for mirror in self._mirrors:
            mirror(n)

    def mirror(self, to: Callable[[int], None]) -> None:
        """Count every later `add` with `to` as well: a count shared by several serving processes (ADR 0037)."""
        self._mirrors.append(to)

    @property
    def count(self) -> int:
        return self._count
