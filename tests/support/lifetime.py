"""Server children that end with the run that started them: a pytest or bench program killed with
SIGKILL runs no cleanup, and its hindsight-api, tansu or engram processes would otherwise stay."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` by which the kernel sends the child SIGTERM when its parent dies; None off Linux.

    The kernel ties the child to the thread that forks it, not to the process: only the main thread,
    which lasts as long as the process, ties its children; one started from another thread is left
    untied rather than stopped when that thread ends."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork: the child only calls it
    parent = os.getpid()

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:  # the parent died before the tie held: nobody would stop this child
            os._exit(1)

    return tie
