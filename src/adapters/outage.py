"""How long-running loops (relay, workers, the tombstone fence) live with dependencies that come and go."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import psycopg
from aiokafka.errors import KafkaError
from eventsourcing.persistence import PersistenceError

DATABASE_ERRORS: tuple[type[BaseException], ...] = (PersistenceError, psycopg.Error)
BROKER_ERRORS: tuple[type[BaseException], ...] = (KafkaError, OSError, asyncio.TimeoutError)


class Outage:
    """One dependency as one loop sees it: a log line when it goes away and one when it is back,
    never one per retry, and a pause that doubles between tries up to `longest`."""

    def __init__(self, log: logging.Logger, what: str, first: float = 0.2, longest: float = 5.0) -> None:
        self.log, self.what = log, what
        self.first, self.longest = first, longest
        self.since: float | None = None
        self._pause = first

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException, detail: str | None = None) -> float:
        """Note a failed try; the pause to wait before the next one. `detail`, said instead of the
        exception's type, must be content-free (a status, an exception class)."""
        if self.since is None:
            self.since = time.monotonic()
            self.log.warning("%s unavailable (%s); retrying with backoff", self.what, detail or type(exc).__name__)
        pause, self._pause = self._pause, min(self._pause * 2, self.longest)
        return pause

    def ok(self) -> None:
        if self.since is not None:
            self.log.warning("%s available again after %.1f s", self.what, time.monotonic() - self.since)
            self.since = None
        self._pause = self.first


async def pause(stop: threading.Event, seconds: float) -> None:
    """Sleep, but wake within a tenth of a second of `stop`."""
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def drop_broken_connections(datastore: object) -> None:
    """After a database error, close the pooled connections that died with it (a restarted server,
    terminated backends), so the next try does not meet them one by one."""
    pool = getattr(datastore, "pool", None)
    if pool is None:
        return
    try:
        pool.check()
    except Exception:  # noqa: BLE001 - the next try reports what is still wrong
        pass
