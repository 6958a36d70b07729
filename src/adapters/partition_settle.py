"""Read-your-writes in distributed mode: wait until the workers have projected a write's partition."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .kafka import APPLIED_CHANNEL, partition_for
from .outage import Outage

log = logging.getLogger("engram.kafka")


class PartitionSettle:
    """Read-your-writes when projectors run elsewhere: a write is visible once every projection has
    applied its notification id on the partition its aggregate maps to.

    One watcher thread per process polls the positions for every waiting write, so a wait holds
    neither a connection nor a thread of its own: `visible()` awaits on the event loop (the HTTP
    layer), `settle_recordings()` blocks its caller (background jobs, the command line). While it
    watches, a listener wakes it as soon as a worker commits (the workers notify `APPLIED_CHANNEL`);
    the polling, ever slower while nothing arrives, is what remains when notifications do not.
    """

    defers = True  # Ledger.save may leave the wait to the HTTP layer (service.pending_writes)

    def __init__(self, datastore: Any, projections: Sequence[str], partitions: int, timeout: float = 5.0,
                 poll: float = 0.005, slowest: float = 0.05) -> None:
        self.datastore, self.projections, self.partitions = datastore, list(projections), partitions
        self.timeout, self.poll, self.slowest = timeout, poll, slowest  # seconds between looks: first, longest
        self._waiters: dict[int, tuple[dict[int, int], Callable[[], object]]] = {}
        self._next = 0
        self._cond = threading.Condition()
        self._watching = False
        self._database = Outage(log, "visibility watcher: database")

    def wanted(self, recordings: Sequence[Any]) -> dict[int, int]:
        """Per partition, the notification id every projection must reach."""
        wanted: dict[int, int] = {}
        for r in recordings:
            part = partition_for(r.notification.originator_id, self.partitions)
            wanted[part] = max(wanted.get(part, 0), r.notification.id)
        return wanted

    def positions(self, partitions: Sequence[int]) -> dict[int, int]:
        """Per partition, the lowest position of any projection (0 where one has none yet)."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT projection, partition, notification_id FROM engram_partition_tracking "
                "WHERE projection = ANY(%s) AND partition = ANY(%s)", (self.projections, list(partitions)),
            ).fetchall()
        have = {(r["projection"], r["partition"]): int(r["notification_id"]) for r in rows}
        return {part: min(have.get((p, part), 0) for p in self.projections) for part in partitions}

    def settle_recordings(self, recordings: Sequence[Any]) -> bool:
        """Wait in the calling thread; False when the write was not visible within the timeout."""
        wanted = self.wanted(recordings)
        if not wanted:
            return True
        seen = threading.Event()
        key = self._watch(wanted, seen.set)
        try:
            if seen.wait(self.timeout):
                return True
            log.warning("projectors are lagging; answering before the write is visible everywhere")
            return False
        finally:
            self._unwatch(key)

    def settle_stored(self) -> None:
        """Nothing to wait for: in distributed mode every write, receipts too, waited for the workers
        before it answered (`Ledger.create` keeps the wait here, ADR 0063)."""

    async def visible(self, recordings: Sequence[Any], timeout: float) -> bool:
        """Wait on the running event loop, holding no thread; False when not visible within `timeout`."""
        wanted = self.wanted(recordings)
        if not wanted:
            return True
        loop = asyncio.get_running_loop()
        seen = asyncio.Event()
        key = self._watch(wanted, lambda: loop.call_soon_threadsafe(seen.set))
        try:
            await asyncio.wait_for(seen.wait(), max(timeout, 0.0))
            return True
        except TimeoutError:
            return False
        finally:
            self._unwatch(key)

    def _watch(self, wanted: dict[int, int], wake: Callable[[], object]) -> int:
        with self._cond:
            self._next += 1
            self._waiters[self._next] = (wanted, wake)
            if not self._watching:
                self._watching = True
                done = threading.Event()
                threading.Thread(target=self._watch_positions, args=(done,), name="engram-visibility",
                                 daemon=True).start()
                threading.Thread(target=self._listen, args=(done,), name="engram-visibility-listener",
                                 daemon=True).start()
            self._cond.notify()
            return self._next

    def _unwatch(self, key: int) -> None:
        with self._cond:
            self._waiters.pop(key, None)

    def _listen(self, done: threading.Event) -> None:
        """Until the watcher ends: wake it whenever a worker's transaction commits. Any failure only
        leaves the watcher to its polling for a moment."""
        while not done.is_set():
            try:
                with self.datastore.get_connection() as conn:
                    conn.execute(f"LISTEN {APPLIED_CHANNEL}")
                    try:
                        while not done.is_set():
                            for _ in conn.notifies(timeout=0.5, stop_after=1):
                                with self._cond:
                                    self._cond.notify_all()
                    finally:
                        conn.execute(f"UNLISTEN {APPLIED_CHANNEL}")  # the connection goes back to the pool
            except Exception:  # noqa: BLE001 - the database away: the watcher polls meanwhile
                done.wait(1.0)

    def _watch_positions(self, done: threading.Event) -> None:
        pause_for = self.poll
        while True:
            with self._cond:
                if not self._waiters:
                    self._cond.wait(1.0)
                    if not self._waiters:  # idle: the next waiter starts a new watcher (and listener)
                        self._watching = False
                        done.set()
                        return
                waiting = dict(self._waiters)
            try:
                have = self.positions(sorted({p for wanted, _ in waiting.values() for p in wanted}))
                self._database.ok()
            except Exception as e:  # noqa: BLE001 - waiters time out on their own; keep watching
                time.sleep(self._database.failed(e))
                continue
            woke = False
            for key, (wanted, wake) in waiting.items():
                if all(have[p] >= nid for p, nid in wanted.items()):
                    self._unwatch(key)
                    woke = True
                    try:
                        wake()
                    except RuntimeError:  # its event loop is closed: nobody waits any more
                        pass
            # Fresh waiters are checked at once; a stalled projector is polled ever less often.
            pause_for = self.poll if woke else min(pause_for * 2, self.slowest)
            with self._cond:
                if self._cond.wait(pause_for):
                    pause_for = self.poll

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass
