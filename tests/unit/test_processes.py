"""The supervisor of `engram serve --processes N` (ADR 0037): it starts a process that ended again,
gives up on processes that cannot start, and leaves none running however it ends."""

from __future__ import annotations

import multiprocessing
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


def test_a_process_that_ends_after_serving_a_while_is_started_again() -> None:
    made: list[BaseProcess] = []

    def start(slot: int) -> BaseProcess:
        # slot 0 serves for a while and ends, twice; then its processes cannot start. Slot 1 serves on.
        # (A process's start takes well under QUICK = 4 s even on a loaded machine, its life 5 s more.)
        lives = 60.0 if slot == 1 else (5.0 if len([p for p in made if p.name == "slot-0"]) < 2 else 0.0)
        process = SPAWN.Process(target=time.sleep, args=(lives,), name=f"slot-{slot}")
        process.start()
        made.append(process)
        return process

    with pytest.raises(ServingFailed):
        supervise(start, 2, "test", quick=4.0, give_up=2)
    zeros = [p for p in made if p.name == "slot-0"]
    ones = [p for p in made if p.name == "slot-1"]
    assert len(zeros) == 2 + 2 and len(ones) == 1  # started again after each life of 5 s, then two quick ends
    assert all(not p.is_alive() for p in made)  # the one still serving was stopped as well
    assert ones[0].exitcode == -15  # by SIGTERM, the way uvicorn stops gracefully
