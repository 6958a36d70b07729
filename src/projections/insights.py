"""The insight view: each insight's state, the memory revisions it rests on, its blinded terms, and
which people's memories changed since their insights were last proposed.

Built from Insight events and from Memory events: a memory forgotten, corrected, rejected or expired
invalidates, in this view and at once, every insight resting on it (a forgotten memory's insight
loses its sealed text and terms here too). The durable `Insight.Invalidated` event follows from the
service's sweep. No plaintext: text is sealed under the insight's key, terms are keyed hashes. The
reads over this view are `insight_queries`.
"""

from __future__ import annotations

import threading
from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.adapters.blind_index import BlindIndex
from engram.adapters.keystore import KeyStore
from engram.adapters.view_cipher import seal_for_view
from engram.domain.insight import CORRECTED, FORGOTTEN, INVALIDATED, LIVE, Insight
from engram.domain.memory import Memory
from engram.domain.settings import PersonSettings

from .base import ViewProjection
from .rows import difference, write_rows
from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_insights (
    insight_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    source_blind text,
    status text NOT NULL,
    reason text,                     -- why it was invalidated
    settled boolean NOT NULL DEFAULT false,  -- its own Invalidated event is stored
    evidence_forgotten boolean NOT NULL DEFAULT false,  -- its key must go: its text came from forgotten words
    sealed_text bytea,
    terms bigint[],
    evidence jsonb NOT NULL,         -- [{"memory_id", "revision"}]
    proposer text NOT NULL,
    proposed_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS engram_insights_owner ON engram_insights (company, person, status, proposed_at);
CREATE INDEX IF NOT EXISTS engram_insights_unsettled ON engram_insights (updated_at)
    WHERE (status = 'invalidated' AND NOT settled) OR evidence_forgotten;
CREATE TABLE IF NOT EXISTS engram_insight_evidence (
    memory_id uuid NOT NULL,
    insight_id uuid NOT NULL,
    revision int NOT NULL,
    PRIMARY KEY (memory_id, insight_id)
);
CREATE TABLE IF NOT EXISTS engram_insight_memories (  -- what this view knows of each memory: ids only
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    status text NOT NULL,
    revision int NOT NULL
);
CREATE TABLE IF NOT EXISTS engram_insight_settings (  -- whose settings aggregate is whose
    settings_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL
);
CREATE TABLE IF NOT EXISTS engram_insight_work (
    company text NOT NULL,
    person text NOT NULL,
    changed_at timestamptz NOT NULL,  -- a confirmed memory of this person changed then
    PRIMARY KEY (company, person)
);
"""


class InsightView(View):
    ddl = DDL
    tables = ("engram_insight_work", "engram_insight_settings", "engram_insight_memories", "engram_insight_evidence",
              "engram_insights")


class InsightProjection(ViewProjection):
    name = "insights"
    view_class = InsightView

    def __init__(self, view: View, keys: KeyStore, index: BlindIndex) -> None:
        super().__init__(view)
        self.keys = keys
        self.index = index
        self._batch = threading.local()

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        """Noted for `flush`, which applies the batch: memories' events to rows read once and written
        back as the difference; every other event, and a memory event an insight rests on, by its own
        statements, after what came before it is written (ADR 0034)."""
        pending: list[Any] | None = getattr(self._batch, "pending", None)
        if pending is None:
            pending = self._batch.pending = []
        pending.append(event)

    def _apply_one(self, curs: Cursor[Any], event: Any) -> None:
        """One event, by its own statements."""
        if isinstance(event, Insight.Event):
            handler = getattr(self, "on_insight_" + type(event).__name__, None)
        elif isinstance(event, Memory.Event):
            handler = getattr(self, "on_memory_" + type(event).__name__, None)
        elif isinstance(event, PersonSettings.Opened):
            handler = self.on_settings_opened
        elif isinstance(event, PersonSettings.Changed):
            handler = self.on_settings_changed
        else:
            handler = None
        if handler is not None:
            handler(curs, event)

    # -- insights -------------------------------------------------------------

    def on_insight_Proposed(self, curs: Cursor[Any], e: Insight.Proposed) -> None:
        key = self.keys.get(e.originator_id) if e.text is not None else None
        source_id = (e.source or {}).get("id") if key else None
        terms = sorted(self.index.term_counts(e.company, e.text)) if key and e.text else None
        curs.execute(
            "INSERT INTO engram_insights (insight_id, company, person, visibility, team, source_blind, status, "
            "sealed_text, terms, evidence, proposer, proposed_at, updated_at) "
            "VALUES (%s,%s,%s,%s,%s,%s,'proposed',%s,%s,%s,%s,%s,%s) ON CONFLICT (insight_id) DO NOTHING",
            (e.originator_id, e.company, e.person, e.visibility, e.team,
             self.index.source(e.company, source_id) if source_id else None,
             seal_for_view(key, e.originator_id, "text", e.text) if key else None, terms,
             Jsonb(e.evidence), e.proposer, e.timestamp, e.timestamp),
        )
        curs.executemany(
            "INSERT INTO engram_insight_evidence (memory_id, insight_id, revision) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [(p["memory_id"], e.originator_id, p["revision"]) for p in e.evidence],
        )
        # evidence changed before this proposal was applied: it is broken from the start
        curs.execute(
            "SELECT m.status, m.revision, ev.revision AS cited FROM engram_insight_evidence ev "
            "LEFT JOIN engram_insight_memories m USING (memory_id) WHERE ev.insight_id = %s", (e.originator_id,))
        for row in curs.fetchall():
            if row["status"] is not None and row["status"] != "confirmed":
                self._invalidate(curs, "insight_id = %s", e.originator_id,
                                 FORGOTTEN if row["status"] == "forgotten" else CORRECTED, e.timestamp)
            elif row["revision"] is not None and row["revision"] != row["cited"]:
                self._invalidate(curs, "insight_id = %s", e.originator_id, CORRECTED, e.timestamp)

    def on_insight_Confirmed(self, curs: Cursor[Any], e: Insight.Confirmed) -> None:
        curs.execute("UPDATE engram_insights SET status = 'confirmed', updated_at = %s "
                     "WHERE insight_id = %s AND status = 'proposed'", (e.timestamp, e.originator_id))

    def on_insight_Rejected(self, curs: Cursor[Any], e: Insight.Rejected) -> None:
        curs.execute("UPDATE engram_insights SET status = 'rejected', sealed_text = NULL, terms = NULL, "
                     "updated_at = %s WHERE insight_id = %s AND status = 'proposed'", (e.timestamp, e.originator_id))

    def on_insight_Invalidated(self, curs: Cursor[Any], e: Insight.Invalidated) -> None:
        shredded = e.key_destroyed_at is not None
        curs.execute(
            "UPDATE engram_insights SET status = 'invalidated', settled = true, reason = coalesce(reason, %s), "
            "sealed_text = CASE WHEN %s THEN NULL ELSE sealed_text END, "
            "terms = CASE WHEN %s THEN NULL ELSE terms END, updated_at = %s WHERE insight_id = %s",
            (e.reason, shredded, shredded, e.timestamp, e.originator_id),
        )

    # -- a person's settings: resuming learning lets the proposers look again ----------

    def on_settings_opened(self, curs: Cursor[Any], e: PersonSettings.Opened) -> None:
        curs.execute("INSERT INTO engram_insight_settings (settings_id, company, person) VALUES (%s, %s, %s) "
                     "ON CONFLICT DO NOTHING", (e.originator_id, e.company, e.person))

    def on_settings_changed(self, curs: Cursor[Any], e: PersonSettings.Changed) -> None:
        if e.learning_paused:
            return
        curs.execute("SELECT company, person FROM engram_insight_settings WHERE settings_id = %s", (e.originator_id,))
        owner = curs.fetchone()
        if owner is not None:
            self._work(curs, owner["company"], owner["person"], e.timestamp)

    # -- memories -------------------------------------------------------------

    def _changed(self, curs: Cursor[Any], memory_id: Any, at: Any, status: str, revision: int | None = None) -> None:
        """Note the memory's state, and that its person has new confirmed content for the proposers."""
        curs.execute(
            "UPDATE engram_insight_memories SET status = %s, revision = coalesce(%s, revision) "
            "WHERE memory_id = %s RETURNING company, person", (status, revision, memory_id))
        owner = curs.fetchone()
        if owner is not None and status == "confirmed":
            self._work(curs, owner["company"], owner["person"], at)

    def _work(self, curs: Cursor[Any] | None, company: str, person: str, at: Any) -> None:
        """Noted per batch and written in `flush`: one person's memories sit on several partitions, so
        workers write these shared rows once per batch, in one order, and never wait on each other in a cycle."""
        pending = getattr(self._batch, "work", None)
        if pending is None:
            pending = self._batch.work = {}
        key = (company, person)
        pending[key] = max(pending.get(key, at), at)

    def begin(self) -> None:
        self._batch.work = {}
        self._batch.pending = []

    def flush(self, curs: Cursor[Any]) -> None:
        events: list[Any] = getattr(self._batch, "pending", None) or []
        self._batch.pending = []
        rows: _MemoryRows | None = None
        for e in events:
            if isinstance(e, Memory.Event) and type(e).__name__ in _STATUS:
                if rows is None:
                    ids = [m.originator_id for m in events if isinstance(m, Memory.Event)]
                    rows = _MemoryRows.read(curs, list(dict.fromkeys(ids)))
                if not rows.rests_on(e):
                    self._memory_event(rows, e)
                    continue
            if rows is not None:  # its statements read the table: it has what came before
                rows.write(curs)
                rows = None
            self._apply_one(curs, e)
        if rows is not None:
            rows.write(curs)
        pending = getattr(self._batch, "work", None) or {}
        self._batch.work = {}
        if pending:
            curs.executemany(
                "INSERT INTO engram_insight_work (company, person, changed_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (company, person) DO UPDATE SET changed_at = greatest(engram_insight_work.changed_at, "
                "EXCLUDED.changed_at)", [(c, p, at) for (c, p), at in sorted(pending.items())])

    def _memory_event(self, rows: _MemoryRows, e: Memory.Event) -> None:
        """A memory's event no insight rests on: its row's new state, and the proposers' work."""
        status = _STATUS[type(e).__name__]
        memory_id = e.originator_id
        row = rows.memories.get(memory_id)
        if isinstance(e, Memory.Created):
            if row is None:
                rows.memories[memory_id] = {"memory_id": memory_id, "company": e.company, "person": e.person,
                                            "status": status, "revision": 1}
            if status == "confirmed":
                self._work(None, e.company, e.person, e.timestamp)
            return
        if row is None:
            return
        revision = e.revision if isinstance(e, Memory.Corrected) else row["revision"]
        rows.memories[memory_id] = {**row, "status": status, "revision": revision}
        if status == "confirmed":
            self._work(None, row["company"], row["person"], e.timestamp)

    def _created(self, curs: Cursor[Any], e: Memory.Created, status: str) -> None:
        curs.execute("INSERT INTO engram_insight_memories (memory_id, company, person, status, revision) "
                     "VALUES (%s, %s, %s, %s, 1) ON CONFLICT DO NOTHING", (e.originator_id, e.company, e.person, status))
        if status == "confirmed":
            self._work(curs, e.company, e.person, e.timestamp)

    def on_memory_Remembered(self, curs: Cursor[Any], e: Memory.Remembered) -> None:
        self._created(curs, e, "confirmed")

    def on_memory_Proposed(self, curs: Cursor[Any], e: Memory.Proposed) -> None:
        self._created(curs, e, "pending_review")

    def on_memory_Confirmed(self, curs: Cursor[Any], e: Memory.Confirmed) -> None:
        self._changed(curs, e.originator_id, e.timestamp, "confirmed")

    def on_memory_Corrected(self, curs: Cursor[Any], e: Memory.Corrected) -> None:
        curs.execute("SELECT insight_id FROM engram_insight_evidence WHERE memory_id = %s AND revision < %s",
                     (e.originator_id, e.revision))
        for row in curs.fetchall():
            self._invalidate(curs, "insight_id = %s", row["insight_id"], CORRECTED, e.timestamp)
        self._changed(curs, e.originator_id, e.timestamp, "confirmed", e.revision)

    def on_memory_Forgotten(self, curs: Cursor[Any], e: Memory.Forgotten) -> None:
        self._changed(curs, e.originator_id, e.timestamp, "forgotten")
        self._broken(curs, e.originator_id, FORGOTTEN, e.timestamp)

    def on_memory_Rejected(self, curs: Cursor[Any], e: Memory.Rejected) -> None:
        self._changed(curs, e.originator_id, e.timestamp, "rejected")

    def on_memory_Expired(self, curs: Cursor[Any], e: Memory.Expired) -> None:
        self._changed(curs, e.originator_id, e.timestamp, "expired")

    def _broken(self, curs: Cursor[Any], memory_id: Any, reason: str, at: Any) -> None:
        """Every insight resting on a memory that is gone stops at once, and its derived text goes
        (whatever its status: a rejected or corrected-away one held it too)."""
        curs.execute("SELECT insight_id FROM engram_insight_evidence WHERE memory_id = %s", (memory_id,))
        for row in curs.fetchall():
            self._invalidate(curs, "insight_id = %s", row["insight_id"], reason, at)
            curs.execute("UPDATE engram_insights SET sealed_text = NULL, terms = NULL, evidence_forgotten = true "
                         "WHERE insight_id = %s", (row["insight_id"],))

    def _invalidate(self, curs: Cursor[Any], where: str, value: Any, reason: str, at: Any) -> None:
        curs.execute(
            f"UPDATE engram_insights SET status = '{INVALIDATED}', reason = %s, updated_at = %s "
            f"WHERE {where} AND status = ANY(%s)",
            (reason, at, value, list(LIVE)),
        )


# Each memory event's status for this view, and which of them this view applies set-based.
_STATUS = {"Remembered": "confirmed", "Proposed": "pending_review", "Confirmed": "confirmed",
           "Corrected": "confirmed", "Forgotten": "forgotten", "Rejected": "rejected", "Expired": "expired"}
MEMORY_COLUMNS = ("memory_id", "company", "person", "status", "revision")


class _MemoryRows:
    """A batch's memories as this view knows them (ids, owner, status, revision) and the insights
    resting on each: read once, changed in Python, written back as the difference."""

    def __init__(self, memories: dict[Any, dict[str, Any]], evidence: dict[Any, list[int]]) -> None:
        self.memories = memories
        self.read_memories = dict(memories)
        self.evidence = evidence  # memory id -> the revisions insights cite

    @classmethod
    def read(cls, curs: Cursor[Any], ids: list[Any]) -> _MemoryRows:
        curs.execute(f"SELECT {', '.join(MEMORY_COLUMNS)} FROM engram_insight_memories WHERE memory_id = ANY(%s)",
                     (ids,))
        memories = {r["memory_id"]: r for r in curs.fetchall()}
        curs.execute("SELECT memory_id, revision FROM engram_insight_evidence WHERE memory_id = ANY(%s)", (ids,))
        evidence: dict[Any, list[int]] = {}
        for r in curs.fetchall():
            evidence.setdefault(r["memory_id"], []).append(r["revision"])
        return cls(memories, evidence)

    def rests_on(self, e: Memory.Event) -> bool:
        """Does an insight this event changes rest on its memory (its statements then invalidate it)?"""
        cited = self.evidence.get(e.originator_id, [])
        if isinstance(e, Memory.Corrected):
            return any(revision < e.revision for revision in cited)
        return bool(cited) and isinstance(e, Memory.Forgotten)

    def write(self, curs: Cursor[Any]) -> None:
        went, new = difference(self.memories, self.read_memories)
        write_rows(curs, "engram_insight_memories", MEMORY_COLUMNS, new, [(m,) for m in went],
                   (("memory_id", "uuid"),))
        self.read_memories = dict(self.memories)
