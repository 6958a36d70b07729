"""Whether PostgreSQL answers: one tracker per process, told by every failed call, probing while it is lost.

While the database is lost every call fails at once with `DatabaseUnavailable` (503 at the edge) instead
of waiting on the pool; a background probe notices its return and the pool is refreshed. Each change of
state is logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import psycopg
from eventsourcing import persistence
from psycopg_pool import PoolTimeout

log = logging.getLogger("engram.database")

RETRY_AFTER_SECONDS = 5

# Everything a call to the database raises when the database, not the data, is at fault.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError, psycopg.InterfaceError, persistence.OperationalError, persistence.InterfaceError,
)

# Server answers that mean "not now", not "gone": a statement or lock wait ran out, or the session idled.
_TIMEOUT_STATES = frozenset({"57014", "55P03", "25P03", "53300"})


class DatabaseUnavailable(psycopg.OperationalError):
    """The database does not answer; the caller may retry later.

    psycopg's class, so loops that retry transient failures treat it so; not eventsourcing's, whose
    recorders would retry it ten times before giving up."""

    detail = "the database is not answering; retry later"


class DatabaseTimeout(DatabaseUnavailable):
    """The database answers but not in time (statement or lock timeout, or no free connection)."""

    detail = "the database did not answer in time; retry later"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def failure_kind(exc: BaseException) -> str | None:
    """'timeout', 'suspect' (the connection or the server may be gone), or None (not the database's fault)."""
    chain = _chain(exc)
    for e in chain:
        if getattr(getattr(e, "diag", None), "sqlstate", None) in _TIMEOUT_STATES:
            return "timeout"
    if any(isinstance(e, UNAVAILABLE_ERRORS) for e in chain):
        return "suspect"
    return None


class Availability:
    """Up or lost. `failed()` decides what a failed call becomes; a probe thread watches while lost."""

    def __init__(self, conninfo: str, *, connect_timeout: float = 2.0, probe_interval: float = 1.0,
                 on_back: Callable[[], None] | None = None) -> None:
        self.conninfo = conninfo
        self.connect_timeout = connect_timeout
        self.probe_interval = probe_interval
        self.on_back = on_back
        self._up = True
        self._lost_at = 0.0
        self._lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._last_probe = (0.0, True)
        self._closed = threading.Event()
        self._prober: threading.Thread | None = None

    @property
    def up(self) -> bool:
        return self._up

    def check(self) -> None:
        """Fail fast while the database is known to be lost."""
        if not self._up:
            raise DatabaseUnavailable(DatabaseUnavailable.detail)

    def failed(self, exc: BaseException) -> DatabaseUnavailable | None:
        """A call failed with `exc`: the error to raise instead, or None to re-raise `exc` (the database
        answers, so a stale pooled connection broke and the caller's retry may take a fresh one)."""
        chain = _chain(exc)
        known = next((e for e in chain if isinstance(e, DatabaseUnavailable)), None)
        if known is not None:
            return type(known)(type(known).detail)
        kind = failure_kind(exc)
        if kind is None:
            return None
        if kind == "timeout":
            return DatabaseTimeout(DatabaseTimeout.detail)
        if self.probe():
            if any(isinstance(e, PoolTimeout) for e in chain):
                return DatabaseTimeout(DatabaseTimeout.detail)  # every connection busy: shed load, don't queue
            if self.on_back is not None:
                self.on_back()  # drop the other stale connections before the retry picks one
            return None
        self.lost(exc)
        return DatabaseUnavailable(DatabaseUnavailable.detail)

    def ready(self) -> bool:
        """Does the database answer now? (for /readyz)"""
        if not self._up:
            return False
        if self.probe():
            return True
        self.lost(None)
        return False

    def probe(self) -> bool:
        """Open a fresh connection and ask; one probe at a time, an answer reused for `probe_interval`."""
        with self._probe_lock:
            at, ok = self._last_probe
            if time.monotonic() - at < self.probe_interval:
                return ok
            ok = self._ask()
            self._last_probe = (time.monotonic(), ok)
            return ok

    def _ask(self) -> bool:
        try:
            with psycopg.connect(self.conninfo, connect_timeout=max(2, round(self.connect_timeout)),
                                 autocommit=True) as conn:
                conn.execute("SELECT 1")
            return True
        except Exception:  # noqa: BLE001 - any failure to answer is "not answering"
            return False

    def lost(self, exc: BaseException | None) -> None:
        with self._lock:
            if not self._up or self._closed.is_set():
                return
            self._up = False
            self._lost_at = time.monotonic()
            log.warning("database lost (%s); answering 503 until it answers again",
                        type(exc).__name__ if exc is not None else "no answer")
            self._prober = threading.Thread(target=self._watch, name="engram-db-probe", daemon=True)
            self._prober.start()

    def _watch(self) -> None:
        while not self._closed.wait(self.probe_interval):
            if self.probe():
                if self.on_back is not None:
                    try:
                        self.on_back()
                    except Exception:  # noqa: BLE001 - the pool heals itself later too
                        log.warning("refreshing the connection pool failed; it will reconnect on demand")
                with self._lock:
                    self._up = True
                    log.warning("database back after %.1f s", time.monotonic() - self._lost_at)
                return

    def close(self) -> None:
        self._closed.set()
        if self._prober is not None and self._prober is not threading.current_thread():
            self._prober.join(timeout=5)
