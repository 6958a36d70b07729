"""`engram serve`, `mcp`, `relay` and `worker`: the commands that run until they are stopped."""

from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path

from engram.adapters.backups import serving
from engram.service.settings import MAX_SERVE_PROCESSES

from .bootstrap import Engram, token_secret
from .cli_support import load_settings
from .lifecycle import exit_on_signal

log = logging.getLogger("engram")


def cmd_serve(args: argparse.Namespace) -> int:
    settings = load_settings()
    if not settings.token_secret:
        log.warning("ENGRAM_TOKEN_SECRET is not set: using a development secret derived from the data "
                    "directory's master key; `engram token` uses the same one.")
    if settings.kafka_bootstrap:
        _quiet_kafka_client()
    processes = args.processes if args.processes is not None else settings.serve_processes
    if processes < 1 or processes > MAX_SERVE_PROCESSES:
        raise ValueError(f"--processes must be between 1 and {MAX_SERVE_PROCESSES}")
    if processes > 1 and settings.kafka_bootstrap:
        raise ValueError("--processes is for the in-process projectors; in distributed mode (ENGRAM_KAFKA_BOOTSTRAP) "
                         "run more API replicas instead")
    engram = Engram.open(settings, notified=processes == 1)  # several: each write settles its own events
    mode = "external PostgreSQL" if engram.embedded is None else f"embedded PostgreSQL in {engram.embedded.pgdata}"
    log.info("%s; serving on http://%s:%d", mode, args.host, args.port)
    # uvicorn shuts down gracefully on SIGTERM and then re-raises it; make that re-raise an
    # ordinary exit so the projectors and the embedded PostgreSQL are stopped below.
    signal.signal(signal.SIGTERM, exit_on_signal)
    try:
        # `engram restore DIR` refuses while this is held; `engram keys rotate` reads which key it wraps with
        with serving(engram.database.conninfo, engram.store.keys.serving_locks()):
            if processes > 1:  # this process keeps the background loops; the others answer (ADR 0037)
                from .processes import ServingFailed, serve_many

                try:
                    serve_many(engram, args.host, args.port, processes)
                except ServingFailed as e:
                    log.error("%s", e)
                    return 1
                except KeyboardInterrupt:  # Ctrl-C: the serving processes have stopped; the rest stops below
                    log.info("interrupted; stopping")
            else:
                import uvicorn

                from .http import create_app

                # uvicorn logs through ours (ENGRAM_LOG_*); its access log is off: Observed logs each request
                uvicorn.run(create_app(engram, token_secret(settings)), host=args.host, port=args.port,
                            log_config=None, log_level=None, access_log=False,
                            timeout_graceful_shutdown=10)  # SIGTERM ends the process even if a request hangs
    finally:
        engram.close()
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_remote import run_stdio

    return run_stdio()


def _quiet_kafka_client() -> None:
    # aiokafka logs an error per reconnect attempt; relay, workers and journal log one line per outage
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


def _alive_file(path: str | None):
    """Touches `path` (at most once a second) each time the loop turns; a health check reads its age."""
    if not path:
        return None
    import contextlib
    import time

    target, last = Path(path), [time.monotonic()]
    target.touch()  # an unwritable path fails here, at start, not inside the loop

    def beat() -> None:
        if time.monotonic() - last[0] >= 1.0:
            last[0] = time.monotonic()
            with contextlib.suppress(OSError):
                target.touch()

    return beat


def cmd_relay(args: argparse.Namespace) -> int:
    from engram.adapters.kafka_relay import Relay

    _quiet_kafka_client()
    engram = _distributed_engram()
    relay = Relay(engram.store.recorder, engram.store.datastore, engram.settings.kafka_bootstrap or "",
                  engram.settings.kafka_partitions, list(engram.projections), poll_interval=engram.settings.poll_interval,
                  alive=_alive_file(args.alive_file))
    log.info("relay: publishing to %s", engram.settings.kafka_bootstrap)
    try:
        with serving(engram.database.conninfo, engram.store.keys.serving_locks()):
            return _run_until_signalled(relay.run)
    finally:
        engram.close()


def cmd_worker(args: argparse.Namespace) -> int:
    from engram.adapters.kafka_worker import ProjectorWorker

    _quiet_kafka_client()
    engram = _distributed_engram()
    names = ([n.strip() for n in args.projections.split(",") if n.strip()] if args.projections
             else list(engram.projections))  # with Hindsight configured, its sync wishes too
    unknown = [n for n in names if n not in engram.projections]
    if unknown:
        engram.close()
        raise ValueError(f"unknown projections: {', '.join(unknown)}")
    worker = ProjectorWorker([engram.projections[n] for n in names], engram.store.datastore,
                             engram.operations.decode, engram.settings.kafka_bootstrap or "",
                             engram.settings.kafka_partitions, keys=engram.store.keys,
                             alive=_alive_file(args.alive_file))
    log.info("worker: projecting %s", ", ".join(names))
    try:
        with serving(engram.database.conninfo, engram.store.keys.serving_locks()):
            return _run_until_signalled(worker.run)
    finally:
        engram.close()


def _run_until_signalled(make_coroutine) -> int:
    """Run an asyncio service until SIGTERM or Ctrl-C, then let it finish its current batch."""
    import asyncio
    import threading

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    asyncio.run(make_coroutine(stop))
    return 0


def _distributed_engram() -> Engram:
    settings = load_settings()
    if not settings.kafka_bootstrap:
        raise ValueError("set ENGRAM_KAFKA_BOOTSTRAP to run the relay or workers")
    return Engram.open(settings, background=False)
