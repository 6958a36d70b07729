"""`engram serve --processes N`: N serving processes on one listening socket (ADR 0037).

One Python process answers about 140 remembers a second on its one core (docs/benchmarks.md); a
machine with more cores serves more with more processes. The main process opens Engram as a
single-process `engram serve` does (the embedded PostgreSQL and its migrations, the projectors'
background loop, every sweeper, the tombstone publisher) and binds the socket, but answers no
request itself: it starts N serving processes and keeps them running. Each is spawned (a fresh
interpreter: none of the main's threads or connections), opens Engram on the main's database
without background loops, holds the serving locks as the main does, and serves the app on the
shared socket. A write settles the views in the process that made it (ADR 0033: across processes
the database decides), so a caller reads its own writes whichever process answers next.

A serving process that ends is started again. Until one has served for `QUICK` seconds, five in a
row that end sooner than that end the service: a process that cannot start at all (a wrong setting,
a database that is not there) will not start the sixth time either, and the operator hears of it at
once. Once the service has served, a process that ends is replaced however often that takes: a
replacement that cannot start (its database is down) is tried again after a delay that doubles with
each quick end, up to `BACKOFF_MAX`, while the others answer, and the service comes back whole
without an operator when the database does.

/metrics: the request counters live in files (prometheus-client's multiprocess mode, in a fresh
directory for each `engram serve`), so any process's /metrics answers the sum over all of them.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from engram.adapters.availability import UNAVAILABLE_ERRORS
from engram.adapters.backups import serving
from engram.adapters.database import Database

from .lifecycle import MULTIPROCESS_DIR, end_with_the_main, exit_on_signal

if TYPE_CHECKING:
    from .bootstrap import Engram

log = logging.getLogger("engram")

QUICK = 10.0  # seconds: a serving process that ends sooner after its start counts as one that cannot start
GIVE_UP = 5  # quick ends in a row, before any process has served, that end the service
BACKOFF_FIRST = 1.0  # seconds before the first retry of a slot whose process ended quickly, once serving
BACKOFF_MAX = 30.0  # and never longer than this between retries
STOP_WAIT = 15.0  # seconds a stopping serving process gets (uvicorn's graceful shutdown takes at most 10)


class ServingFailed(RuntimeError):
    """Serving processes kept ending right after they started."""


def listening_socket(host: str, port: int) -> socket.socket:
    """The port every serving process accepts on, bound here once: a port in use fails the start at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=2048)  # SO_REUSEADDR, as uvicorn binds
    sock.set_inheritable(True)
    return sock


def connections_needed(count: int, pool_size: int) -> int:
    """Database connections `engram serve` may hold with `count` serving processes, a bound with room to
    spare: each process's pool (`pool_size` and as many overflow) and its own sessions (the serving
    locks, the availability probe, the tombstone publisher), and the main process's background loops
    and listener besides. Two serving processes under 40 clients were seen to hold 62 (bound: 70)."""
    return count * (2 * pool_size + 6) + 2 * pool_size + 10


def check_connections(conninfo: str, count: int, pool_size: int) -> None:
    """Refuse (ValueError) to start more processes than the server has connections for: they would
    fail one request in N at the worst moment instead of at start."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                            (["max_connections", "superuser_reserved_connections", "reserved_connections"],))
        server: dict[str, int] = {name: int(value) for name, value in rows.fetchall()}  # reserved_connections: 16+
    allowed = server["max_connections"] - server.get("superuser_reserved_connections", 0) - server.get(
        "reserved_connections", 0)
    needed = connections_needed(count, pool_size)
    if needed > allowed:
        raise ValueError(f"{count} serving processes may hold {needed} database connections and the server allows "
                         f"{allowed}: lower ENGRAM_SERVE_PROCESSES or ENGRAM_DB_POOL_SIZE, or raise PostgreSQL's "
                         "max_connections (ADR 0037)")


def serve_many(engram: Engram, host: str, port: int, count: int) -> None:
    """Run `count` serving processes on `host:port` until this process is told to stop (SystemExit or
    KeyboardInterrupt, which stop them too); raises `ServingFailed` when they cannot start, ValueError
    when the database has too few connections for them."""
    check_connections(engram.database.conninfo, count, engram.settings.db_pool_size)
    sock = listening_socket(host, port)
    metrics_dir = tempfile.mkdtemp(prefix="engram-metrics-")
    os.environ[MULTIPROCESS_DIR] = metrics_dir  # the spawned processes inherit it
    from .metrics import count_in_files  # prometheus-client reads the variable when first imported: now

    count_in_files(engram.operations.tallies())  # this process's learning failures, beside the others' counts
    database = engram.database
    spawn = multiprocessing.get_context("spawn")

    def start(slot: int) -> BaseProcess:
        process = spawn.Process(target=_serve_one, args=(sock, database), name=f"engram-serve-{slot}", daemon=False)
        process.start()
        return process

    try:
        supervise(start, count, f"http://{host}:{port}")
    finally:
        sock.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def supervise(start: Callable[[int], BaseProcess], count: int, where: str, *, quick: float = QUICK,
              give_up: int = GIVE_UP, backoff: float = BACKOFF_FIRST, backoff_max: float = BACKOFF_MAX,
              poll: float = 0.5) -> None:
    """Keep `count` processes made by `start(slot)` running, each slot started again when its process ends
    (looked for every `poll` seconds).
    Before any process has lived `quick` seconds, `give_up` quick ends in a row raise `ServingFailed`;
    after that, a slot whose process ended quickly waits `backoff` seconds, doubling to `backoff_max`,
    before its next start, and this never gives up. The processes are stopped however this ends."""
    processes: list[BaseProcess | None] = [None] * count
    started = [0.0] * count

    def launch(slot: int) -> None:
        processes[slot] = start(slot)
        started[slot] = time.monotonic()

    try:
        for slot in range(count):
            launch(slot)
        log.info("%d serving processes on %s (pids %s)", count, where,
                 ", ".join(str(p.pid) for p in processes if p is not None))
        served = False  # has any process lived `quick` seconds?
        quick_ends = 0  # in a row, over every slot: what gives up before the service has served
        failures = [0] * count  # quick ends in a row, by slot: what its backoff doubles with
        retry_at = [0.0] * count  # when an empty slot starts again
        while True:
            time.sleep(poll)
            now = time.monotonic()
            for slot, process in enumerate(processes):
                if process is None:
                    if now >= retry_at[slot]:
                        launch(slot)
                    continue
                lived = now - started[slot]
                if process.is_alive():
                    if lived >= quick:
                        served, failures[slot] = True, 0
                    continue
                quick_end = lived < quick
                served = served or not quick_end
                quick_ends = quick_ends + 1 if quick_end else 0
                failures[slot] = failures[slot] + 1 if quick_end else 0
                if not served and quick_ends >= give_up:
                    raise ServingFailed(f"{give_up} serving processes in a row ended within {quick:g} s of their "
                                        "start; see their log lines above")
                if not failures[slot] or not served:  # not yet serving: give up soon rather than wait
                    log.warning("serving process %s ended (exit code %s) after %.0f s; starting another",
                                process.pid, process.exitcode, lived)
                    launch(slot)
                    continue
                wait = min(backoff_max, backoff * 2 ** (failures[slot] - 1))
                log.warning("serving process %s ended (exit code %s) %.0f s after its start, %d in a row in its "
                            "slot; starting another in %.1f s", process.pid, process.exitcode, lived,
                            failures[slot], wait)
                processes[slot] = None
                retry_at[slot] = now + wait
    finally:
        _stop([p for p in processes if p is not None])


def _stop(processes: list[BaseProcess]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()  # SIGTERM: uvicorn finishes the requests under way
    end = time.monotonic() + STOP_WAIT
    for process in processes:
        process.join(max(0.0, end - time.monotonic()))
        if process.is_alive():
            log.warning("serving process %s did not stop in %.0f s; killing it", process.pid, STOP_WAIT)
            process.kill()
            process.join(5)


def _serve_one(sock: socket.socket, database: Database) -> None:
    """One serving process: Engram on the main's database, no background loops, the app on `sock`."""
    import uvicorn

    from engram.adapters import logs
    from engram.service.settings import Settings

    from .bootstrap import Engram, token_secret
    from .http import create_app

    settings = Settings()
    logs.configure(settings.log_format, settings.log_level)
    end_with_the_main()
    signal.signal(signal.SIGTERM, exit_on_signal)  # uvicorn re-raises the signal after its graceful shutdown
    # Ctrl-C reaches the whole process group, and the main process stops us: no traceback while starting
    # (uvicorn takes both signals over while it serves)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        engram = Engram.open(settings, database=database, background=False)
    except UNAVAILABLE_ERRORS as e:  # one line for the operator, not a traceback at every retry
        log.error("serving process %d cannot start: the database is not answering (%s); the main process "
                  "tries again later", os.getpid(), type(e).__name__)
        raise SystemExit(1) from None
    try:
        with serving(database.conninfo, engram.store.keys.serving_locks()):
            config: Any = uvicorn.Config(create_app(engram, token_secret(settings)), log_config=None, log_level=None,
                                         access_log=False, timeout_graceful_shutdown=10)
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        engram.close()
