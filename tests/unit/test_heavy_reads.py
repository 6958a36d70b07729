"""Heavy reads: one at a time per person, a few slots in all, and a bound on how many of one person's
may hold a worker thread while they wait."""

from __future__ import annotations

import threading
import time

import pytest

from engram.domain.scope import Caller
from engram.service.heavy import WAITING, HeavyReadBusy, HeavyReads

ALICE, BOB = Caller("acme", "alice", "user"), Caller("acme", "bob", "user")


def test_a_persons_heavy_reads_take_turns_and_beyond_the_bound_are_refused_at_once() -> None:
    heavy = HeavyReads(slots=2, wait=5)
    release, running, peak = threading.Event(), [0], [0]
    lock = threading.Lock()

    def read(who: Caller) -> None:
        with heavy.slot(who):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            release.wait(5)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=read, args=(ALICE,)) for _ in range(WAITING)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    started = time.monotonic()
    with pytest.raises(HeavyReadBusy), heavy.slot(ALICE):
        pass
    assert time.monotonic() - started < 0.1  # refused at once, not after waiting
    bob = threading.Thread(target=read, args=(BOB,))
    bob.start()  # another person's heavy read takes the second slot meanwhile
    time.sleep(0.2)
    assert peak[0] == 2  # alice's one at a time, and bob's beside it
    release.set()
    for t in [*threads, bob]:
        t.join(10)
    assert running[0] == 0 and heavy._turns == {}  # nothing left behind


def test_a_slot_not_free_in_time_is_refused() -> None:
    heavy = HeavyReads(slots=1, wait=0.2)
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with heavy.slot(ALICE):
            inside.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(5)
    with pytest.raises(HeavyReadBusy) as refused, heavy.slot(BOB):
        pass
    assert refused.value.retry_after >= 1 and refused.value.status == 429
    release.set()
    holder.join(5)
    with heavy.slot(BOB):  # free again
        pass
