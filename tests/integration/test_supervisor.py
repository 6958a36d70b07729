"""The supervisor of `engram serve --processes N` (ADR 0037): it starts a process that ended again,
gives up on processes that cannot start, and leaves none running however it ends."""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import re
import signal
import sys
import time
from collections.abc import Iterator
from multiprocessing.process import BaseProcess

import pytest

from engram.api.processes import ServingFailed, supervise

# The processes are forked from a server of their own (one thread, started once): fast to start, so the
# tests' lifetimes can be short, and safe in a test process that runs other threads.
PROCESSES = multiprocessing.get_context("forkserver")


def test_processes_that_end_at_once_make_it_give_up_and_none_is_left_running() -> None:
    made: list[BaseProcess] = []

    def start(slot: int) -> BaseProcess:
        process = PROCESSES.Process(target=sys.exit, args=(3,))
        process.start()
        made.append(process)
        return process

    started = time.monotonic()
    with pytest.raises(ServingFailed, match="3 serving processes in a row ended within 10 s"):
        supervise(start, 2, "test", give_up=3, poll=0.05)
    assert time.monotonic() - started < 30
    assert len(made) == 2 + 3 - 1  # the two first, then one more each time until the third quick end
    assert all(not p.is_alive() and p.exitcode == 3 for p in made)


class _Stop(Exception):
    """What the test's alarm raises to end `supervise`, as Ctrl-C ends it in `engram serve`."""


def _alarm(_signum: int, _frame: object) -> None:
    raise _Stop


@contextlib.contextmanager
def _alarm_after(seconds: float) -> Iterator[None]:
    """Raise `_Stop` after `seconds` (a test may bring it forward with `setitimer`), and clear it after."""
    before = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_once_serving_a_process_that_cannot_start_is_tried_again_later_and_never_given_up(
        caplog: pytest.LogCaptureFixture) -> None:
    made: list[BaseProcess] = []
    starts: list[float] = []

    def start(slot: int) -> BaseProcess:
        # Slot 1 serves on. Slot 0 serves 1 s and ends; then three of its processes end at once (the
        # database is down, say), more than `give_up`; then one serves again (the database is back), and
        # the test ends once that one has served past `quick`.
        zeros = len([p for p in made if p.name == "slot-0"])
        if slot == 1:
            process = PROCESSES.Process(target=time.sleep, args=(60.0,), name="slot-1")
        elif zeros in (1, 2, 3):
            process = PROCESSES.Process(target=sys.exit, args=(3,), name="slot-0")
        else:
            process = PROCESSES.Process(target=time.sleep, args=(1.0 if zeros == 0 else 60.0,), name="slot-0")
        process.start()
        made.append(process)
        if slot == 0:
            starts.append(time.monotonic())
        if zeros == 4:
            signal.setitimer(signal.ITIMER_REAL, 1.0)  # twice `quick`
        return process

    with _alarm_after(30.0), caplog.at_level(logging.WARNING, logger="engram"), pytest.raises(_Stop):
        supervise(start, 2, "test", quick=0.5, give_up=2, backoff=0.2, backoff_max=0.4, poll=0.05)
    zeros = [p for p in made if p.name == "slot-0"]
    ones = [p for p in made if p.name == "slot-1"]
    assert [p.exitcode for p in zeros] == [0, 3, 3, 3, -15]  # the last served until stopped, by SIGTERM
    assert [p.exitcode for p in ones] == [-15]
    waits = [float(w) for w in re.findall(r"starting another in ([0-9.]+) s", caplog.text)]
    assert waits == [0.2, 0.4, 0.4]  # doubled, then held at backoff_max
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(gap >= wait for gap, wait in zip(gaps[1:], waits, strict=True))


def test_a_process_that_ends_after_serving_a_while_is_started_again_at_once() -> None:
    made: list[BaseProcess] = []
    starts: list[float] = []

    def start(slot: int) -> BaseProcess:
        process = PROCESSES.Process(target=time.sleep, args=(1.0,), name=f"slot-{slot}")
        process.start()
        made.append(process)
        starts.append(time.monotonic())
        if len(made) == 2:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
        return process

    with _alarm_after(30.0), pytest.raises(_Stop):
        supervise(start, 1, "test", quick=0.5, backoff=30.0, poll=0.05)
    assert len(made) == 2
    assert starts[1] - starts[0] < 10.0  # started again after its life of 1 s, not after a backoff of 30 s
    assert all(not p.is_alive() for p in made)
