"""The supervisor of `engram serve --processes N` (ADR 0037): it starts a process that ended again,
gives up on processes that cannot start, and leaves none running however it ends."""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import re
import signal
import sys
import time
from multiprocessing.process import BaseProcess

import pytest

from engram.api.processes import ServingFailed, supervise

SPAWN = multiprocessing.get_context("spawn")


def test_processes_that_end_at_once_make_it_give_up_and_none_is_left_running() -> None:
    made: list[BaseProcess] = []

    def start(slot: int) -> BaseProcess:
        process = SPAWN.Process(target=sys.exit, args=(3,))
        process.start()
        made.append(process)
        return process

    started = time.monotonic()
    with pytest.raises(ServingFailed, match="3 serving processes in a row ended within 10 s"):
        supervise(start, 2, "test", give_up=3)
    assert time.monotonic() - started < 30
    assert len(made) == 2 + 3 - 1  # the two first, then one more each time until the third quick end
    assert all(not p.is_alive() and p.exitcode == 3 for p in made)


class _Stop(Exception):
    """What the test's alarm raises to end `supervise`, as Ctrl-C ends it in `engram serve`."""


def _alarm(_signum: int, _frame: object) -> None:
    raise _Stop


def test_once_serving_a_process_that_cannot_start_is_tried_again_later_and_never_given_up(
        caplog: pytest.LogCaptureFixture) -> None:
    made: list[BaseProcess] = []
    starts: list[float] = []

    def start(slot: int) -> BaseProcess:
        # Slot 1 serves on. Slot 0 serves 3 s and ends; then three of its processes end at once (the
        # database is down, say), more than `give_up`; then one serves again (the database is back).
        zeros = len([p for p in made if p.name == "slot-0"])
        if slot == 1:
            process = SPAWN.Process(target=time.sleep, args=(60.0,), name="slot-1")
        elif zeros in (1, 2, 3):
            process = SPAWN.Process(target=sys.exit, args=(3,), name="slot-0")
        else:
            process = SPAWN.Process(target=time.sleep, args=(3.0 if zeros == 0 else 60.0,), name="slot-0")
        process.start()
        made.append(process)
        if slot == 0:
            starts.append(time.monotonic())
        return process

    before = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 15.0)
    try:
        with caplog.at_level(logging.WARNING, logger="engram"), pytest.raises(_Stop):
            supervise(start, 2, "test", quick=2.0, give_up=2, backoff=0.5, backoff_max=1.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    zeros = [p for p in made if p.name == "slot-0"]
    ones = [p for p in made if p.name == "slot-1"]
    assert [p.exitcode for p in zeros] == [0, 3, 3, 3, -15]  # the last served until stopped, by SIGTERM
    assert [p.exitcode for p in ones] == [-15]
    waits = [float(w) for w in re.findall(r"starting another in ([0-9.]+) s", caplog.text)]
    assert waits == [0.5, 1.0, 1.0]  # doubled, then held at backoff_max
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(gap >= wait for gap, wait in zip(gaps[1:], waits, strict=True))


def test_a_process_that_ends_after_serving_a_while_is_started_again_at_once() -> None:
    made: list[BaseProcess] = []

    def start(slot: int) -> BaseProcess:
        process = SPAWN.Process(target=time.sleep, args=(3.0,), name=f"slot-{slot}")
        process.start()
        made.append(process)
        return process

    before = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 12.0)
    try:
        with pytest.raises(_Stop):
            supervise(start, 1, "test", quick=2.0, backoff=30.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert len(made) >= 2  # started again after its life of 3 s, not after a backoff of 30 s
    assert all(not p.is_alive() for p in made)
