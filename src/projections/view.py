"""A view's tables and its tracking row, which commit together, and the shadow schema a rebuild fills
beside them and swaps in (ADR 0034).

Each view is a `PostgresTrackingRecorder` (its tracking table comes from eventsourcing) extended with
its own tables. A batch of events is applied in one transaction that first locks the tracking row, so
two runners, a rebuild or a re-delivery can never apply an event twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.postgres import PostgresDatastore, PostgresTrackingRecorder
from psycopg import Cursor
from psycopg.sql import SQL, Identifier, Literal

APPLICATION = "engram"


class View(PostgresTrackingRecorder):
    """A materialised view: its own tables plus one row of tracking."""

    ddl: str = ""
    tables: tuple[str, ...] = ()

    def __init__(self, datastore: PostgresDatastore, name: str) -> None:
        super().__init__(datastore, tracking_table_name=f"engram_{name}_tracking")

    def create_table(self) -> None:
        super().create_table()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self.ddl)  # engram_partition_tracking and engram_quarantine come from the migrations
            curs.execute(
                f"INSERT INTO {self.tracking_table_name} (application_name, notification_id) "
                "VALUES (%s, 0) ON CONFLICT DO NOTHING",
                (APPLICATION,),
            )

    def position(self) -> int:
        return self.max_tracking_id(APPLICATION) or 0

    def lock_position(self, curs: Cursor[Any]) -> int:
        curs.execute(
            f"SELECT notification_id FROM {self.tracking_table_name} "
            "WHERE application_name = %s FOR UPDATE",
            (APPLICATION,),
        )
        row = curs.fetchone()
        assert row is not None, "tracking row missing; create_table() was not run"
        return int(row["notification_id"])

    def set_position(self, curs: Cursor[Any], notification_id: int) -> None:
        curs.execute(
            f"UPDATE {self.tracking_table_name} SET notification_id = %s WHERE application_name = %s",
            (notification_id, APPLICATION),
        )

    def clear(self, curs: Cursor[Any]) -> None:
        for table in self.tables:
            curs.execute(f"DELETE FROM {table}")
        self.set_position(curs, 0)

    # -- rebuilding beside the view (ADR 0034) ----------------------------------------------------

    @property
    def shadow(self) -> str:
        """The schema a rebuild fills: the same DDL and table names, apart from the serving ones."""
        return f"{self.tracking_table_name.removesuffix('_tracking')}_rebuild"

    def create_shadow(self, curs: Cursor[Any]) -> None:
        """Empty shadow tables; whatever an earlier rebuild left (it crashed, or was stopped) goes first."""
        curs.execute(SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(self.shadow)))
        curs.execute(SQL("CREATE SCHEMA {}").format(Identifier(self.shadow)))
        self.use_shadow(curs)
        curs.execute(self.ddl)

    def use_shadow(self, curs: Cursor[Any]) -> None:
        """For the rest of this transaction the view's tables are the shadow's; every other table (the
        tracking rows, the quarantine, the purge reports, the keys) is still the serving one."""
        self._set_search_path(curs, [self.shadow, *self._serving_path(curs)])

    def _serving_path(self, curs: Cursor[Any]) -> list[str]:
        """This transaction's search path without the shadow schema."""
        curs.execute("SELECT current_schemas(false) AS path")
        row = curs.fetchone()
        assert row is not None
        return [s for s in row["path"] if s != self.shadow]

    @staticmethod
    def _set_search_path(curs: Cursor[Any], schemas: Sequence[str]) -> None:
        curs.execute(SQL("SELECT set_config('search_path', {}, true)").format(
            Literal(", ".join(f'"{s}"' for s in schemas))))

    def swap_in(self, curs: Cursor[Any]) -> None:
        """Within the caller's transaction, which holds the tracking row: the serving tables go and the
        shadow's take their names (their indexes and constraints keep theirs)."""
        path = self._serving_path(curs)
        serving = path[0]
        curs.execute(SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            SQL(", ").join(Identifier(serving, t) for t in self.tables)))
        for table in self.tables:
            curs.execute(SQL("DROP TABLE {}").format(Identifier(serving, table)))
            curs.execute(SQL("ALTER TABLE {} SET SCHEMA {}").format(Identifier(self.shadow, table),
                                                                    Identifier(serving)))
        curs.execute(SQL("DROP SCHEMA {} CASCADE").format(Identifier(self.shadow)))
        self._set_search_path(curs, path)
