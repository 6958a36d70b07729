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

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Tracking
from psycopg import Cursor

from engram.adapters.blind_index import BlindIndex
from engram.domain.links import CORRECTED, EXPIRED, FORGOTTEN, REJECTED, Citation, Link, co_mention
from engram.domain.memory import Memory

from .base import View, ViewProjection

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
    name = "links"
    view_class = LinksView

    def __init__(self, view: View, index: BlindIndex) -> None:
        super().__init__(view)
        self.index = index

    def _messages(self, company: str, person: str, evidence: Iterable[dict[str, Any]]) -> list[str]:
        keys = {self.index.message(company, person, item.get("source") or {}) for item in evidence}
        return sorted(k for k in keys if k)

    def apply(self, curs: Cursor[Any], e: Any, tracking: Tracking) -> None:
        if isinstance(e, Memory.Created):
            curs.execute(
                "INSERT INTO engram_link_memories (memory_id, company, person, version) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                (e.originator_id, e.company, e.person, e.originator_version),
            )
            if curs.rowcount and e.evidence is not None:  # None: its key was gone before this view saw it
                self._cite(curs, e.originator_id, e.originator_version, e.company, e.person, e.evidence,
                           e.timestamp)
            return
        if isinstance(e, (Memory.Corrected, Memory.Forgotten, Memory.Rejected, Memory.Expired)):
            owner = self._advance(curs, e)
            if owner is None:
                return  # applied before
            if isinstance(e, Memory.Corrected):
                self._corrected(curs, e, owner["company"], owner["person"])
            else:
                self._closed(curs, e.originator_id, e.timestamp, CLOSING[type(e)])

    def _advance(self, curs: Cursor[Any], e: Memory.Event) -> dict[str, Any] | None:
        """Note the memory's event as applied; None when it was already (or its creation never was)."""
        curs.execute(
            "UPDATE engram_link_memories SET version = %s WHERE memory_id = %s AND version < %s "
            "RETURNING company, person",
            (e.originator_version, e.originator_id, e.originator_version),
        )
        return curs.fetchone()

    def _cite(self, curs: Cursor[Any], memory_id: UUID, version: int, company: str, person: str,
              evidence: Iterable[dict[str, Any]], at: Any) -> None:
        keys = self._messages(company, person, evidence)
        if keys:
            curs.execute(
                "INSERT INTO engram_link_citations (memory_id, version, company, person, message_keys, cited_from) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (memory_id, version, company, person, keys, at),
            )

    def _corrected(self, curs: Cursor[Any], e: Memory.Corrected, company: str, person: str) -> None:
        """A correction citing other messages (or none) ends the links of the messages it no longer cites."""
        if e.evidence is None:  # corrections made before they carried evidence: the evidence stays
            return
        keys = self._messages(company, person, e.evidence)
        curs.execute("SELECT version, message_keys FROM engram_link_citations "
                     "WHERE memory_id = %s AND cited_to IS NULL", (e.originator_id,))
        current = curs.fetchone()
        if current is not None and sorted(current["message_keys"] or []) == keys:
            return  # the same message: its links go on
        curs.execute("UPDATE engram_link_citations SET cited_to = %s, reason = %s WHERE memory_id = %s "
                     "AND cited_to IS NULL", (e.timestamp, CORRECTED, e.originator_id))
        self._cite(curs, e.originator_id, e.originator_version, company, person, e.evidence, e.timestamp)

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
