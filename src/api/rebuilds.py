"""A rebuild's fill in several processes (ADR 0038).

A rebuild replays every stored event into new tables beside the view and swaps them in at the end
(ADR 0034). Its replay is Python's work on one core: decoding each event, then the view's own work
(tokenising, blinding, sealing). For a view whose events each change one memory's rows
(`ViewProjection.partitionable`), the memories can be replayed apart: each of N spawned processes
reads every stored event up to the head, decodes and applies only those of the memories in its part
(by memory id), and commits batch by batch into the same new tables. The process that asked for the
rebuild waits for them all, shows their least position as its progress, and then replays what arrived
meanwhile and swaps, as a rebuild in one process does.

A process that fails (or is killed) fails the rebuild: the new tables are left beside the serving
view, which is untouched, and the next rebuild drops them. A filling process whose asking process is
killed stops itself: it would write on into the tables the next rebuild makes anew.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import multiprocessing.connection
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Protocol

from engram.adapters import logs
from engram.adapters.database import Database
from engram.service.operations import FillsInProcesses
from engram.service.settings import Settings

from .lifecycle import end_with_the_main

log = logging.getLogger("engram.operations")

WORKER_POOL = 2  # database connections each filling process opens: it uses one at a time
SPAWN = multiprocessing.get_context("spawn")  # fresh interpreters: none of this process's threads or connections


class RebuildFailed(RuntimeError):
    """A process filling a rebuild ended without finishing its part."""


class Replays(Protocol):
    def replay_part(self, name: str, head: int, part: int, parts: int,
                    progress: Callable[[int, int], None]) -> tuple[int, set[int]]: ...


class Opened(Protocol):
    """What a filling process reads of the Engram it opens."""

    @property
    def operations(self) -> Replays: ...

    def close(self) -> None: ...


Opens = Callable[..., Opened]  # `Engram.open`, passed in (and pickled by name) so this module need not import it


def fill_in_processes(open_engram: Opens, settings: Settings, database: Database,
                      fenced: bool) -> FillsInProcesses:
    """For `Operations.fill_in_processes`: `(name, workers, progress, head)` fills the new tables of a
    rebuild of `name` up to `head` in `workers` processes, each opening Engram on `database` as this
    process did (by `open_engram`); returns how many events they applied and which they set aside."""
    return functools.partial(_fill, open_engram, settings, database, fenced)


def _fill(open_engram: Opens, settings: Settings, database: Database, fenced: bool, name: str, workers: int,
          progress: Callable[[int, int], None] | None, head: int) -> tuple[int, set[int]]:
    processes: list[BaseProcess] = []
    pipes: dict[Connection, int] = {}
    try:
        for part in range(workers):
            receiving, sending = SPAWN.Pipe(duplex=False)
            process: BaseProcess = SPAWN.Process(
                target=_fill_part, name=f"engram-rebuild-{part}",
                args=(open_engram, settings, database, fenced, name, part, workers, head, sending))
            process.start()
            sending.close()  # the child's end: once the child ends, reading ours ends too
            processes.append(process)
            pipes[receiving] = part
        log.info("rebuild of %s: %d processes fill the new tables up to position %d", name, workers, head)
        positions = [0] * workers
        applied = 0
        quarantined: set[int] = set()
        while pipes:
            for ready in multiprocessing.connection.wait(list(pipes)):
                assert isinstance(ready, Connection)
                part = pipes[ready]
                try:
                    message = ready.recv()
                except EOFError:
                    processes[part].join(5)
                    code = processes[part].exitcode
                    raise RebuildFailed(f"rebuild of {name}: the process filling part {part} of {workers} ended "
                                        f"(exit code {code}) before finishing; the serving view is untouched") from None
                if message[0] == "at":
                    positions[part] = message[1]
                    if progress is not None:
                        progress(min(positions), head)
                elif message[0] == "done":
                    applied += message[1]
                    quarantined.update(message[2])
                    del pipes[ready]
                    ready.close()
                else:
                    raise RebuildFailed(f"rebuild of {name}: the process filling part {part} of {workers} "
                                        f"failed ({message[1]}); see its log lines; the serving view is untouched")
        return applied, quarantined
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(30)
        for receiving in pipes:
            receiving.close()


def _fill_part(open_engram: Opens, settings: Settings, database: Database, fenced: bool, name: str, part: int,
               parts: int, head: int, report: Connection) -> None:
    """One filling process: Engram on the same database (no background loops), its part replayed."""
    logs.configure(settings.log_format, settings.log_level)
    end_with_the_main("rebuild's filling process")  # SIGTERM's default: gone at once, its batch rolled back
    try:
        engram = open_engram(settings.model_copy(update={"db_pool_size": WORKER_POOL}), database=database,
                             background=False, fenced=fenced, catch_up=False)
        try:
            applied, quarantined = engram.operations.replay_part(
                name, head, part, parts, lambda position, _head: report.send(("at", position)))
        finally:
            engram.close()
    except Exception as e:
        log.exception("rebuild of %s: the process filling part %d of %d failed", name, part, parts)
        report.send(("failed", type(e).__name__))
        raise SystemExit(1) from None
    report.send(("done", applied, sorted(quarantined)))
