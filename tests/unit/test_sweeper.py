"""A housekeeping sweep that gives way to writes: a lower duty cycle while others write, never starved."""

from __future__ import annotations

import threading
import time

from engram.adapters.sweeper import Sweeper


def test_a_sweep_gives_way_while_writes_arrive_and_is_never_starved() -> None:
    writes = [0]
    runs: list[float] = []
    sweeper = Sweeper(lambda: runs.append(time.monotonic()), 0.01, yield_to=lambda: writes[0], busy_interval=0.1)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            writes[0] += 1
            time.sleep(0.002)

    sweeper.start()
    try:
        deadline = time.monotonic() + 5
        while not runs and time.monotonic() < deadline:  # quiet: it runs on its interval
            time.sleep(0.01)
        assert runs
        busy = threading.Thread(target=writer)
        busy.start()
        before, started = len(runs), time.monotonic()
        time.sleep(0.5)
        stop.set()
        busy.join()
        during = len(runs) - before
        # every 10 ms if it did not give way (about 50 runs); at most every 100 ms while writes arrive
        assert 1 <= during <= (time.monotonic() - started) / 0.1 + 2
        assert sweeper.deferred >= 10
        after = len(runs)
        deadline = time.monotonic() + 5
        while len(runs) < after + 3 and time.monotonic() < deadline:  # quiet again: its own interval
            time.sleep(0.01)
        assert len(runs) >= after + 3
    finally:
        sweeper.stop()


def test_a_sweep_without_yield_to_runs_on_its_interval() -> None:
    runs: list[int] = []
    sweeper = Sweeper(lambda: runs.append(1), 0.01)
    sweeper.start()
    try:
        deadline = time.monotonic() + 5
        while len(runs) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(runs) >= 5 and sweeper.deferred == 0
    finally:
        sweeper.stop()
