"""Group commit: writes that arrive while another is committing share the next transaction.

No timer: a write that finds nobody committing goes at once, alone. Writes that arrive meanwhile queue;
when the commit under way ends, the first of them commits the whole queue in one transaction (one lock
of the event table, one disk flush) and hands each its own result. If that shared transaction fails,
nothing of it was stored, and each of its writes is committed again on its own: one bad write (a lost
race, a forgotten id) never fails another, and each gets exactly the answer it would have had alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    __slots__ = ("item", "done", "value", "error")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.value: R | None = None
        self.error: BaseException | None = None

    def succeed(self, value: R) -> None:
        self.value, self.done = value, True

    def fail(self, error: BaseException) -> None:
        self.error, self.done = error, True

    def result(self) -> R:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class GroupCommit(Generic[T, R]):
    """`together(items)` commits several in one transaction (one result each, in order); `alone(item)`
    commits one (with its own retries)."""

    def __init__(self, together: Callable[[Sequence[T]], Sequence[R]], alone: Callable[[T], R]) -> None:
        self._together, self._alone = together, alone
        self._cond = threading.Condition()
        self._queue: list[_Slot[T, R]] = []
        self._committing = False
        self.groups = 0  # shared transactions committed (for tests and benchmarks)

    def submit(self, item: T) -> R:
        slot: _Slot[T, R] = _Slot(item)
        with self._cond:
            self._queue.append(slot)
            while self._committing and not slot.done:
                self._cond.wait()
            group: list[_Slot[T, R]] | None = None
            if not slot.done:  # nobody is committing: this thread commits what has queued, itself included
                self._committing = True
                group, self._queue = self._queue, []
        if group is not None:
            try:
                self._commit(group)
            finally:
                with self._cond:
                    self._committing = False
                    self._cond.notify_all()
        return slot.result()

    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def _commit(self, group: list[_Slot[T, R]]) -> None:
        try:
            if len(group) > 1:
                try:
                    values = self._together([s.item for s in group])
                except Exception:  # noqa: BLE001 - nothing of it was stored: each again, on its own
                    pass
                else:
                    for s, v in zip(group, values, strict=True):
                        s.succeed(v)
                    self.groups += 1
                    return
            for s in group:
                try:
                    s.succeed(self._alone(s.item))
                except Exception as e:  # noqa: BLE001 - this write's own failure, raised in its own thread
                    s.fail(e)
        except BaseException as e:
            for s in group:
                if not s.done:
                    s.fail(e)
            raise
