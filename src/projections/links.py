"""The links view: which of a person's memories were mentioned together in one message (ADR 0020).

Each memory's rows are written by its own events only: the stretches during which its current
evidence cited some messages (blinded, `BlindIndex.message`), and, once its key is gone, the links it
had then (in `engram_links_kept`, which a rebuild keeps: the events no longer say which message the
memory came from). Links between two live memories are found when read, by joining their citations, so the
order in which two memories' events are applied (one partition each, in distributed mode) cannot
change them. No text, quote or message id is kept; a forgotten memory's citations go, with their
blinded messages.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking
from psycopg import Cursor

from engram.adapters.blind_index import BlindIndex
from engram.domain.links import CORRECTED, EXPIRED, FORGOTTEN, REJECTED, Citation, Link, co_mention
from engram.domain.memory import Memory

from .base import ViewProjection
from .rows import difference, write_nested, write_rows
from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_link_memories (
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    version int NOT NULL               -- its last event applied here: a replayed one changes nothing
);
CREATE TABLE IF NOT EXISTS engram_link_citations (
    memory_id uuid NOT NULL,
    version int NOT NULL,              -- the event that gave the memory this evidence
    company text NOT NULL,
    person text NOT NULL,
    message_keys text[] NOT NULL,      -- BlindIndex.message of each message cited
    cited_from timestamptz NOT NULL,
    cited_to timestamptz,
    reason text,                       -- why it stopped: corrected, forgotten, rejected, expired
    PRIMARY KEY (memory_id, version)
);
CREATE INDEX IF NOT EXISTS engram_link_citations_messages
    ON engram_link_citations USING gin (message_keys);
-- engram_links_kept (a forgotten, rejected or expired memory's links as they were then) comes from
-- migration 0009: events cannot give it back, so a rebuild keeps it.
"""

# A memory's citations and every other citation of the same person sharing a message with one of them.
_CO_CITED = """
SELECT x.version, x.cited_from AS x_from, x.cited_to AS x_to, x.reason AS x_reason,
       o.memory_id AS other_id, o.version AS other_version, o.cited_from AS o_from, o.cited_to AS o_to,
       o.reason AS o_reason
FROM engram_link_citations x
JOIN engram_link_citations o ON o.company = x.company AND o.person = x.person AND o.memory_id <> x.memory_id
     AND o.message_keys && x.message_keys
WHERE x.memory_id = %s
"""

# The event that ends a memory's life, and the reason its links then give.
CLOSING: dict[type, str] = {Memory.Forgotten: FORGOTTEN, Memory.Rejected: REJECTED, Memory.Expired: EXPIRED}


def _co_cited(curs: Cursor[Any], memory_id: Any) -> list[tuple[dict[str, Any], Link]]:
    """Each pair of citations of `memory_id` and another memory that overlapped, with their link."""
    curs.execute(_CO_CITED, (memory_id,))
    found = []
    for row in curs.fetchall():
        link = co_mention(Citation(str(memory_id), row["x_from"], row["x_to"], row["x_reason"]),
                          Citation(str(row["other_id"]), row["o_from"], row["o_to"], row["o_reason"]))
        if link is not None:
            found.append((row, link))
    return found


class LinksView(View):
    ddl = DDL
    tables = ("engram_link_citations", "engram_link_memories")  # engram_links_kept outlives rebuilds


class LinksProjection(ViewProjection):
    """Set-based (ADR 0034): `apply` notes each memory event; `flush` reads the memories a batch touches
    in two statements, applies creations and corrections to those rows in Python, and writes what
    changed. A closing event needs the other memories' citations as the table holds them: what came
    before it is written first, and it is applied by its statements, as it always was."""

    name = "links"
    view_class = LinksView

    def __init__(self, view: View, index: BlindIndex) -> None:
        super().__init__(view)
        self.index = index
        self._batch = threading.local()

    def _messages(self, company: str, person: str, evidence: Iterable[dict[str, Any]]) -> list[str]:
        keys = {self.index.message(company, person, item.get("source") or {}) for item in evidence}
        return sorted(k for k in keys if k)

    def apply(self, curs: Cursor[Any], e: Any, tracking: Tracking) -> None:
        if isinstance(e, (Memory.Created, Memory.Corrected, Memory.Forgotten, Memory.Rejected, Memory.Expired)):
            self._pending().append(e)

    def _pending(self) -> list[Any]:
        pending: list[Any] | None = getattr(self._batch, "pending", None)
        if pending is None:
            pending = self._batch.pending = []
        return pending

    def begin(self) -> None:
        self._batch.pending = []

    def flush(self, curs: Cursor[Any]) -> None:
        pending = self._pending()
        self._batch.pending = []
        if not pending:
            return
        rows = _LinkRows.read(curs, list(dict.fromkeys(e.originator_id for e in pending)))
        for e in pending:
            if isinstance(e, Memory.Created):
                self._created(rows, e)
            elif isinstance(e, Memory.Corrected):
                owner = rows.advance(e)
                if owner is not None:
                    self._corrected(rows, e, owner["company"], owner["person"])
            else:
                rows.write(curs)  # the table as the events before this one left it
                owner = self._advance(curs, e)
                if owner is not None:
                    self._closed(curs, e.originator_id, e.timestamp, CLOSING[type(e)])
                rows.closed(e, owner is not None)
        rows.write(curs)

    def _created(self, rows: _LinkRows, e: Memory.Created) -> None:
        if e.originator_id in rows.memories:
            return
        rows.memories[e.originator_id] = {"memory_id": e.originator_id, "company": e.company, "person": e.person,
                                          "version": e.originator_version}
        if e.evidence is not None:  # None: its key was gone before this view saw it
            self._cite(rows, e.originator_id, e.originator_version, e.company, e.person, e.evidence, e.timestamp)

    def _cite(self, rows: _LinkRows, memory_id: UUID, version: int, company: str, person: str,
              evidence: Iterable[dict[str, Any]], at: Any) -> None:
        keys = self._messages(company, person, evidence)
        cited = rows.cites(memory_id)
        if keys and version not in cited:
            cited[version] = {"memory_id": memory_id, "version": version, "company": company, "person": person,
                              "message_keys": keys, "cited_from": at, "cited_to": None, "reason": None}

    def _corrected(self, rows: _LinkRows, e: Memory.Corrected, company: str, person: str) -> None:
        """A correction citing other messages (or none) ends the links of the messages it no longer cites."""
        if e.evidence is None:  # corrections made before they carried evidence: the evidence stays
            return
        keys = self._messages(company, person, e.evidence)
        cited = rows.cites(e.originator_id)
        current = [c for c in cited.values() if c["cited_to"] is None]
        if current and sorted(current[0]["message_keys"] or []) == keys:
            return  # the same message: its links go on
        for c in current:
            cited[c["version"]] = {**c, "cited_to": e.timestamp, "reason": CORRECTED}
        self._cite(rows, e.originator_id, e.originator_version, company, person, e.evidence, e.timestamp)

    def _advance(self, curs: Cursor[Any], e: Memory.Event) -> dict[str, Any] | None:
        """Note the memory's event as applied; None when it was already (or its creation never was)."""
        curs.execute(
            "UPDATE engram_link_memories SET version = %s WHERE memory_id = %s AND version < %s "
            "RETURNING company, person",
            (e.originator_version, e.originator_id, e.originator_version),
        )
        return curs.fetchone()

    def _closed(self, curs: Cursor[Any], memory_id: UUID, at: Any, reason: str) -> None:
        """Its key is gone: its links end now and are kept as they were, and its citations go with their
        blinded messages (a rebuild could not make them again: its evidence went with the key)."""
        curs.execute("UPDATE engram_link_citations SET cited_to = %s, reason = %s WHERE memory_id = %s "
                     "AND cited_to IS NULL", (at, reason, memory_id))
        for row, link in _co_cited(curs, memory_id):
            curs.execute(
                "INSERT INTO engram_links_kept (memory_id, version, other_id, other_version, since, invalidated_at, "
                "reason) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (memory_id, row["version"], row["other_id"], row["other_version"], link.since,
                 link.invalidated_at, link.reason),
            )
        curs.execute("DELETE FROM engram_link_citations WHERE memory_id = %s", (memory_id,))


MEMORY_COLUMNS = ("memory_id", "company", "person", "version")
CITATION_COLUMNS = ("memory_id", "version", "company", "person", "message_keys", "cited_from", "cited_to", "reason")


class _LinkRows:
    """A batch's memories as the links view holds them: read once, changed in Python, written back as
    the difference. Rows are replaced, never changed in place: what is not the row read gets written."""

    def __init__(self, memories: dict[Any, dict[str, Any]], citations: dict[Any, dict[int, dict[str, Any]]]) -> None:
        self.memories = memories
        self.citations = citations
        self._written()

    def _written(self) -> None:
        self.read_memories = dict(self.memories)
        self.read_citations = {m: dict(c) for m, c in self.citations.items()}

    @classmethod
    def read(cls, curs: Cursor[Any], ids: list[Any]) -> _LinkRows:
        curs.execute(f"SELECT {', '.join(MEMORY_COLUMNS)} FROM engram_link_memories WHERE memory_id = ANY(%s)",
                     (ids,))
        memories = {r["memory_id"]: r for r in curs.fetchall()}
        citations: dict[Any, dict[int, dict[str, Any]]] = {}
        if memories:
            curs.execute(f"SELECT {', '.join(CITATION_COLUMNS)} FROM engram_link_citations "
                         "WHERE memory_id = ANY(%s)", (list(memories),))
            for r in curs.fetchall():
                citations.setdefault(r["memory_id"], {})[r["version"]] = r
        return cls(memories, citations)

    def cites(self, memory_id: Any) -> dict[int, dict[str, Any]]:
        return self.citations.setdefault(memory_id, {})

    def advance(self, e: Memory.Event) -> dict[str, Any] | None:
        """The memory's row, its version moved to this event's; None when applied before (or never created)."""
        row = self.memories.get(e.originator_id)
        if row is None or row["version"] >= e.originator_version:
            return None
        row = self.memories[e.originator_id] = {**row, "version": e.originator_version}
        return row

    def closed(self, e: Memory.Event, advanced: bool) -> None:
        """A closing event was applied by its statements: the rows are what they left."""
        row = self.memories.get(e.originator_id)
        if advanced and row is not None:
            self.memories[e.originator_id] = self.read_memories[e.originator_id] = {
                **row, "version": e.originator_version}
            self.citations[e.originator_id] = {}
            self.read_citations[e.originator_id] = {}

    def write(self, curs: Cursor[Any]) -> None:
        """Rows that changed deleted by key, then every new and changed row in one COPY per table."""
        write_nested(curs, "engram_link_citations", CITATION_COLUMNS, self.citations, self.read_citations,
                     (("memory_id", "uuid"), ("version", "int")))
        went, new = difference(self.memories, self.read_memories)
        write_rows(curs, "engram_link_memories", MEMORY_COLUMNS, new, [(m,) for m in went], (("memory_id", "uuid"),))
        self._written()


class LinkQueries:
    """A memory's links as the view holds them; the service decides which linked memory a caller sees."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore

    def links_of(self, memory_id: UUID) -> list[dict[str, Any]]:
        """`{"memory_id", "since", "invalidated_at", "reason"}` for each link, oldest first."""
        with self.datastore.transaction(commit=False) as curs:
            links = [(str(row["other_id"]), link) for row, link in _co_cited(curs, memory_id)]
            curs.execute(
                "SELECT other_id AS linked, since, invalidated_at, reason FROM engram_links_kept WHERE memory_id = %s "
                "UNION ALL SELECT memory_id, since, invalidated_at, reason FROM engram_links_kept WHERE other_id = %s",
                (memory_id, memory_id),
            )
            links += [(str(r["linked"]), Link(r["since"], r["invalidated_at"], r["reason"])) for r in curs.fetchall()]
        links.sort(key=lambda pair: (pair[1].since, pair[0]))
        return [{"memory_id": other, "since": link.since, "invalidated_at": link.invalidated_at,
                 "reason": link.reason, "status": link.status} for other, link in links]
