"""One recall batch's memories and revisions: read once, changed in Python event by event by the
projection, written back as the difference (ADR 0034)."""

from __future__ import annotations

from typing import Any

from psycopg import Cursor

from .recall_view import MEMORY_COLUMNS, REVISION_COLUMNS
from .rows import difference, write_nested, write_rows


class BatchRows:
    """One batch's memories as the view holds them: read once, changed in Python event by event, then
    written back as the difference (ADR 0034). Rows are replaced, never changed in place, so the rows
    read stay as they were and what differs from them is what gets written."""

    def __init__(self, memories: dict[Any, dict[str, Any]], revisions: dict[Any, dict[int, dict[str, Any]]],
                 term_rows: dict[Any, int]) -> None:
        self.memories = memories
        self.revisions = revisions
        self.read_memories = dict(memories)
        self.read_revisions = {m: dict(revs) for m, revs in revisions.items()}
        self.term_rows = term_rows  # term rows in the table, of the memories a batch closes
        self.cleared: set[Any] = set()  # memories whose term rows in the table go
        self.plain: dict[tuple[Any, int], tuple[bytes, str]] = {}  # texts in hand: (memory, revision) -> (sealed, text)

    @classmethod
    def read(cls, curs: Cursor[Any], ids: list[Any], closing: list[Any]) -> BatchRows:
        """The rows of these memories, in three statements at most; `closing`: those a batch forgets,
        rejects or expires, whose term rows are counted (for the purge report)."""
        memories: dict[Any, dict[str, Any]] = {}
        revisions: dict[Any, dict[int, dict[str, Any]]] = {}
        term_rows: dict[Any, int] = {}
        if ids:
            curs.execute(f"SELECT {', '.join(MEMORY_COLUMNS)} FROM engram_memories WHERE memory_id = ANY(%s)", (ids,))
            memories = {r["memory_id"]: r for r in curs.fetchall()}
            present = [m for m in ids if m in memories]
            if present:
                curs.execute(f"SELECT {', '.join(REVISION_COLUMNS)} FROM engram_recall_revisions "
                             "WHERE memory_id = ANY(%s)", (present,))
                for r in curs.fetchall():
                    revisions.setdefault(r["memory_id"], {})[r["revision"]] = r
            closing = [m for m in closing if m in memories]
            if closing:
                curs.execute("SELECT memory_id, count(*) AS n FROM engram_recall_terms WHERE memory_id = ANY(%s) "
                             "GROUP BY memory_id", (closing,))
                term_rows = {r["memory_id"]: int(r["n"]) for r in curs.fetchall()}
        return cls(memories, revisions, term_rows)

    def revs(self, memory_id: Any) -> dict[int, dict[str, Any]]:
        return self.revisions.setdefault(memory_id, {})

    def write(self, curs: Cursor[Any]) -> None:
        """What the batch changed: rows that went or changed deleted by key, then every new and changed
        row in one COPY per table; the term rows of memories whose answers were recomputed deleted."""
        if self.cleared:
            curs.execute("DELETE FROM engram_recall_terms WHERE memory_id = ANY(%s)", (list(self.cleared),))
        write_nested(curs, "engram_recall_revisions", REVISION_COLUMNS, self.revisions, self.read_revisions,
                     (("memory_id", "uuid"), ("revision", "int")))
        went, new = difference(self.memories, self.read_memories)
        write_rows(curs, "engram_memories", MEMORY_COLUMNS, new, [(m,) for m in went], (("memory_id", "uuid"),))
