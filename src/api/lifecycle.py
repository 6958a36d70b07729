"""How a spawned process of `engram serve --processes` or of a rebuild lives and ends (ADR 0037, 0038).

A leaf of the entry layer: the serving processes (`processes`), the rebuild's filling processes
(`rebuilds`) and the command line (`cli`) all use it, and it imports none of them.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading

log = logging.getLogger("engram")

# prometheus-client reads it when it is first imported: several serving processes then count in files
# there, and any one's /metrics answers the sum (ADR 0037)
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"


def exit_on_signal(signum: int, _frame: object) -> None:
    """uvicorn re-raises SIGTERM after its graceful shutdown: make that an ordinary exit, so what was
    started is stopped by the `finally` blocks around it."""
    raise SystemExit(128 + signum)


def end_with_the_main(what: str = "serving process") -> None:
    """A spawned process whose main process died (killed, not stopped) stops too, by SIGTERM: a serving
    process would serve on without the background loops and keep the port from the next `engram serve`;
    a rebuild's filling process would write on into tables the next rebuild makes anew (ADR 0038)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        log.warning("the main process %s ended; stopping %s %d", parent.pid, what, os.getpid())
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="engram-main-watch", daemon=True).start()
