"""The recall view: each memory's current state, the revisions that answer for some
valid time, and a blind term index over them. No plaintext: text is sealed under the
memory's key, terms are keyed hashes. Reports its purges to the purge tracker.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor

from engram.adapters.blind_index import BlindIndex
from engram.adapters.kafka import EVENTS_TOPIC, consumed_at
from engram.adapters.keystore import KeyStore
from engram.adapters.view_cipher import seal_for_view, unseal_from_view
from engram.domain.memory import (
    CONFIRMED,
    EXPIRED,
    FORGOTTEN,
    PENDING,
    REJECTED,
    Memory,
    answer_periods,
    purge_id_of,
    tags_of,
)

from .base import View, ViewProjection
from .purge import EVENT_STORE, KAFKA, RECALL_VIEW, PurgeTracker

DDL = """
CREATE TABLE IF NOT EXISTS engram_memories (
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    sealed_source bytea,             -- {kind, id, message_id} under the memory's key (ADR 0019)
    source_blind text,               -- BlindIndex.source of its id: for revocation, restriction, forget by source
    status text NOT NULL,
    review text NOT NULL,
    revision int NOT NULL,
    sealed_text bytea,
    sealed_evidence bytea,
    valid_from timestamptz,
    valid_to timestamptz,
    time_uncertain boolean NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    forget_id text,
    occurred_at timestamptz,         -- when it was said (its first evidence): its day is a term, its turn an order
    asks boolean NOT NULL DEFAULT false,  -- its text is a question: the memory said next may answer it
    sealed_tags bytea,               -- its tags, sealed under its key
    tag_terms bigint[] NOT NULL DEFAULT '{}'  -- BlindIndex.tag of each: what `tags` filters match
);
CREATE INDEX IF NOT EXISTS engram_memories_tags ON engram_memories USING gin (tag_terms)
    WHERE cardinality(tag_terms) > 0;
CREATE INDEX IF NOT EXISTS engram_memories_conversation
    ON engram_memories (company, person, source_blind, occurred_at) WHERE source_blind IS NOT NULL;
CREATE INDEX IF NOT EXISTS engram_memories_owner
    ON engram_memories (company, person, status, created_at DESC, memory_id DESC);
CREATE INDEX IF NOT EXISTS engram_memories_source
    ON engram_memories (company, person, source_blind) WHERE source_blind IS NOT NULL;
CREATE TABLE IF NOT EXISTS engram_recall_revisions (
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    source_blind text,
    valid_from timestamptz,
    valid_to timestamptz,
    mode text,
    time_uncertain boolean NOT NULL,
    at timestamptz NOT NULL,
    is_answer boolean NOT NULL DEFAULT false,
    answer_from timestamptz,
    answer_to timestamptz,
    sealed_text bytea,
    sealed_evidence bytea,           -- this revision's own evidence (a correction's is the correction)
    doc_len int NOT NULL DEFAULT 0,
    PRIMARY KEY (memory_id, revision)
);
CREATE INDEX IF NOT EXISTS engram_recall_revisions_owner
    ON engram_recall_revisions (company, person) WHERE is_answer;
CREATE TABLE IF NOT EXISTS engram_recall_terms (
    company text NOT NULL,
    person text NOT NULL,
    term bigint NOT NULL,
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    tf int NOT NULL,
    -- copied from the revision so a search reads nothing but this index range
    doc_len int NOT NULL,
    visibility text NOT NULL,
    team text,
    source_blind text,
    answer_from timestamptz,
    answer_to timestamptz,
    PRIMARY KEY (company, person, term, memory_id, revision)
);
CREATE TABLE IF NOT EXISTS engram_recall_stats (
    company text NOT NULL,
    person text NOT NULL,
    answers int NOT NULL,
    total_len bigint NOT NULL,
    PRIMARY KEY (company, person)
);
CREATE INDEX IF NOT EXISTS engram_recall_terms_memory ON engram_recall_terms (memory_id);
"""


@dataclass(frozen=True)
class Answer:
    """The stretch of valid time one revision answers for, and its length in terms."""

    valid_from: datetime | None
    valid_to: datetime | None
    doc_len: int


def readable(*times: datetime | None) -> None:
    """Raise, as reading the rows back would, for a time PostgreSQL stores but Python cannot load (an event
    from before the boundary refused such times): the event is then set aside, not left unreadable."""
    for value in times:
        if value is not None:
            value.astimezone(UTC)


def said_at(evidence: list[dict[str, Any]] | None) -> datetime | None:
    """When the memory was said: its first evidence's time, if it has one."""
    value = (evidence or [{}])[0].get("occurred_at")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


def asks(text: str | None) -> bool:
    """A question: the memory said after it in the same conversation may be its answer."""
    return bool(text) and text.rstrip().endswith(("?", "？"))  # type: ignore[union-attr]


class RecallView(View):
    ddl = DDL
    tables = (
        "engram_recall_stats",
        "engram_recall_terms",
        "engram_recall_revisions",
        "engram_memories",
    )


class RecallProjection(ViewProjection):
    name = "recall"
    view_class = RecallView

    def __init__(self, view: View, keys: KeyStore, index: BlindIndex, purge: PurgeTracker) -> None:
        super().__init__(view)
        self.keys = keys
        self.index = index
        self.purge = purge
        self._batch = threading.local()

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        if not isinstance(event, Memory.Event):  # other aggregates' events share these names (Confirmed, ...)
            return
        handler = getattr(self, "on_" + type(event).__name__, None)
        if handler is not None:
            handler(curs, event, tracking)

    # -- events ---------------------------------------------------------------

    def _created(self, curs: Cursor[Any], e: Memory.Created, status: str, review: str) -> None:
        key = self.keys.get(e.originator_id) if e.text is not None else None
        tags = tags_of(e)
        sealed_text = seal_for_view(key, e.originator_id, "text", e.text) if key else None
        sealed_evidence = seal_for_view(key, e.originator_id, "evidence", e.evidence) if key else None
        # The source only sealed, and its id blinded for the queries that filter on it (ADR 0019).
        source = e.source if key else None
        sealed_source = seal_for_view(key, e.originator_id, "source", source) if key and source else None
        blind = self.index.source(e.company, source["id"]) if source and source.get("id") else None
        said = said_at(e.evidence) if key else None
        curs.execute(
            "INSERT INTO engram_memories (memory_id, company, person, visibility, team, sealed_source, "
            "source_blind, status, review, revision, sealed_text, sealed_evidence, valid_from, valid_to, "
            "time_uncertain, created_at, updated_at, occurred_at, asks, sealed_tags, tag_terms) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,1,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (memory_id) DO NOTHING",
            (
                e.originator_id, e.company, e.person, e.visibility, e.team, sealed_source, blind, status,
                review, sealed_text, sealed_evidence, e.valid_from, e.valid_to, e.valid_from is None,
                e.timestamp, e.timestamp, said, asks(e.text) if key else False,
                seal_for_view(key, e.originator_id, "tags", tags) if key and tags else None,
                self.index.tags(e.company, tags) if key else [],
            ),
        )
        fresh = curs.rowcount == 1  # else a re-delivery: the rows may have moved on since
        if status == CONFIRMED and fresh and key is not None and e.text is not None:
            # A new memory, remembered at once: its only revision answers for its whole valid time. Written
            # as such from the text in hand; nothing to read back, unseal or undo first.
            readable(e.valid_from, e.valid_to, said)
            counts = self.index.term_counts(e.company, e.text, said.date() if said else None)
            answer = Answer(e.valid_from, e.valid_to, sum(counts.values()))
            self._insert_revision(curs, e.originator_id, 1, e.valid_from, e.valid_to, None, e.valid_from is None,
                                  e.timestamp, e.text, key, e.evidence, answer)
            self._insert_terms(curs, e.company, e.person, e.visibility, e.team, blind, e.originator_id, 1, answer,
                               counts)
            self._add_answers(e.company, e.person, 1, answer.doc_len)
            return
        self._insert_revision(curs, e.originator_id, 1, e.valid_from, e.valid_to, None, e.valid_from is None,
                              e.timestamp, e.text, key, e.evidence)
        if status == CONFIRMED:
            self._refresh_answers(curs, e.originator_id, key, {1: e.text} if fresh else None)

    def on_Remembered(self, curs: Cursor[Any], e: Memory.Remembered, t: Tracking) -> None:
        self._created(curs, e, CONFIRMED, "normal")

    def on_Proposed(self, curs: Cursor[Any], e: Memory.Proposed, t: Tracking) -> None:
        self._created(curs, e, PENDING, e.review)

    def on_Confirmed(self, curs: Cursor[Any], e: Memory.Confirmed, t: Tracking) -> None:
        key = self.keys.get(e.originator_id)
        if e.edited and e.text is not None and key is not None:
            sealed = seal_for_view(key, e.originator_id, "text", e.text)
            curs.execute("UPDATE engram_memories SET sealed_text = %s, asks = %s WHERE memory_id = %s",
                         (sealed, asks(e.text), e.originator_id))
            curs.execute(
                "UPDATE engram_recall_revisions SET sealed_text = %s WHERE memory_id = %s AND revision = 1",
                (sealed, e.originator_id),
            )
        self._set_status(curs, e, CONFIRMED)
        self._refresh_answers(curs, e.originator_id, key, {1: e.text} if e.edited and e.text is not None else None)

    def on_Rejected(self, curs: Cursor[Any], e: Memory.Rejected, t: Tracking) -> None:
        """Rejected and expired candidates are purged like forgotten memories, with their own purge id."""
        self._purge(curs, e, t, REJECTED, e.timestamp)

    def on_Expired(self, curs: Cursor[Any], e: Memory.Expired, t: Tracking) -> None:
        self._purge(curs, e, t, EXPIRED, e.key_destroyed_at or e.timestamp)

    def on_Corrected(self, curs: Cursor[Any], e: Memory.Corrected, t: Tracking) -> None:
        key = self.keys.get(e.originator_id) if e.text is not None else None
        evidence = seal_for_view(key, e.originator_id, "evidence", e.evidence) if key and e.evidence else None
        curs.execute(
            "UPDATE engram_memories SET revision = %s, sealed_text = %s, valid_from = %s, valid_to = %s, "
            "sealed_evidence = coalesce(%s, sealed_evidence), asks = %s, "
            "time_uncertain = (%s::timestamptz IS NULL AND time_uncertain), updated_at = %s WHERE memory_id = %s "
            "RETURNING time_uncertain",
            (
                e.revision,
                seal_for_view(key, e.originator_id, "text", e.text) if key else None,
                e.valid_from, e.valid_to, evidence, asks(e.text), e.valid_from, e.timestamp, e.originator_id,
            ),
        )
        row = curs.fetchone()
        self._insert_revision(curs, e.originator_id, e.revision, e.valid_from, e.valid_to, e.mode,
                              bool(row and row["time_uncertain"]), e.timestamp, e.text, key, e.evidence)
        self._refresh_answers(curs, e.originator_id, key, {e.revision: e.text})

    def on_Forgotten(self, curs: Cursor[Any], e: Memory.Forgotten, t: Tracking) -> None:
        self._count_answers(curs, e.originator_id, sign=-1)
        self._purge(curs, e, t, FORGOTTEN, e.key_destroyed_at)

    def _purge(self, curs: Cursor[Any], e: Any, t: Tracking, status: str, key_destroyed_at: Any) -> None:
        """The memory's rows lose their content; the purge request opens and this view, the event
        store (its key went with the event) and, applied from Kafka, the topic report."""
        purge_id = purge_id_of(e)
        terms = self._delete_terms(curs, e.originator_id)
        curs.execute("DELETE FROM engram_recall_revisions WHERE memory_id = %s", (e.originator_id,))
        revisions = curs.rowcount
        curs.execute(
            "UPDATE engram_memories SET status = %s, sealed_text = NULL, sealed_evidence = NULL, "
            "occurred_at = NULL, asks = false, sealed_tags = NULL, tag_terms = '{}', "
            # source_blind stays: forgetting its source again answers with this memory's forget id (ADR 0019)
            "sealed_source = NULL, forget_id = %s, updated_at = %s WHERE memory_id = %s RETURNING company, person",
            (status, e.forget_id if status == FORGOTTEN else None, e.timestamp, e.originator_id),
        )
        owner = curs.fetchone()
        if owner is None:
            return
        self.purge.opened(curs, purge_id, e.originator_id, owner["company"], owner["person"], e.timestamp)
        self.purge.purged(
            curs, purge_id, EVENT_STORE,
            "data key destroyed; every stored event of this memory is ciphertext under it",
            key_destroyed_at,
        )
        self.purge.purged(
            curs, purge_id, RECALL_VIEW,
            f"deleted {revisions} revision rows and {terms} term rows at position {t.notification_id}",
            e.timestamp,
        )
        consumed = consumed_at(t.notification_id)
        if consumed is not None:  # applied from the events topic: its records of this memory are sealed
            partition, offset = consumed
            self.purge.purged(
                curs, purge_id, KAFKA,
                f"{EVENTS_TOPIC} partition {partition}: every record of this memory, up to its content-free "
                f"closing record at offset {offset}, is ciphertext under the data key destroyed with it",
                key_destroyed_at,
            )

    # -- helpers --------------------------------------------------------------

    def _set_status(self, curs: Cursor[Any], e: Any, status: str) -> None:
        curs.execute(
            "UPDATE engram_memories SET status = %s, updated_at = %s WHERE memory_id = %s",
            (status, e.timestamp, e.originator_id),
        )

    def _insert_revision(self, curs, memory_id, revision, valid_from, valid_to, mode, uncertain, at, text, key,  # noqa: ANN001
                         evidence, answer: Answer | None = None) -> None:  # noqa: ANN001
        curs.execute(
            "INSERT INTO engram_recall_revisions (memory_id, revision, company, person, visibility, team, "
            "source_blind, valid_from, valid_to, mode, time_uncertain, at, sealed_text, sealed_evidence, doc_len, "
            "is_answer, answer_from, answer_to) "
            "SELECT memory_id, %s, company, person, visibility, team, source_blind, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, %s, %s FROM engram_memories WHERE memory_id = %s ON CONFLICT DO NOTHING",
            (
                revision, valid_from, valid_to, mode, uncertain, at,
                seal_for_view(key, memory_id, "text", text) if key and text is not None else None,
                seal_for_view(key, memory_id, "evidence", evidence) if key and evidence else None,
                answer.doc_len if answer else 0, answer is not None,
                answer.valid_from if answer else None, answer.valid_to if answer else None, memory_id,
            ),
        )

    TERM_COLUMNS = ("company", "person", "term", "memory_id", "revision", "tf", "doc_len", "visibility", "team",
                    "source_blind", "answer_from", "answer_to")

    def _insert_terms(self, curs: Cursor[Any], company: str, person: str, visibility: str, team: str | None,
                      source_blind: str | None, memory_id: Any, revision: int, answer: Answer,
                      counts: dict[int, int]) -> None:
        """An answering revision's terms, each with what a search filters on: held for the batch and
        written at flush in one COPY (dropped again if a later event of the batch removes them)."""
        if counts:
            self._terms().setdefault(memory_id, []).extend(
                (company, person, term, memory_id, revision, tf, answer.doc_len, visibility, team, source_blind,
                 answer.valid_from, answer.valid_to) for term, tf in counts.items())

    def _delete_terms(self, curs: Cursor[Any], memory_id: Any) -> int:
        """Remove a memory's terms, written or still held; how many there were."""
        curs.execute("DELETE FROM engram_recall_terms WHERE memory_id = %s", (memory_id,))
        return curs.rowcount + len(self._terms().pop(memory_id, ()))

    def _terms(self) -> dict[Any, list[tuple[Any, ...]]]:
        terms: dict[Any, list[tuple[Any, ...]]] | None = getattr(self._batch, "terms", None)
        if terms is None:
            terms = self._batch.terms = {}
        return terms

    def _add_answers(self, company: str, person: str, n: int, total: int) -> None:
        """Note answering revisions (n, their total length) for the per-person figures written at flush."""
        pending = getattr(self._batch, "stats", None)
        if pending is None:
            pending = self._batch.stats = {}
        had_n, had_total = pending.get((company, person), (0, 0))
        pending[(company, person)] = (had_n + n, had_total + total)

    def _count_answers(self, curs: Cursor[Any], memory_id: Any, sign: int) -> None:
        """Note a memory's answering revisions for its person's BM25 corpus figures. Several
        memories of one person can sit on different partitions, so the shared per-person rows are
        written once per batch, in a fixed order (see flush): concurrent workers cannot deadlock."""
        curs.execute(
            "SELECT company, person, count(*) AS n, coalesce(sum(doc_len), 0) AS total "
            "FROM engram_recall_revisions WHERE memory_id = %s AND is_answer GROUP BY company, person",
            (memory_id,),
        )
        for row in curs.fetchall():
            self._add_answers(row["company"], row["person"], sign * row["n"], sign * row["total"])

    def begin(self) -> None:
        self._batch.stats = {}
        self._batch.terms = {}

    def flush(self, curs: Cursor[Any]) -> None:
        terms = self._terms()
        self._batch.terms = {}
        if terms:
            with curs.copy(f"COPY engram_recall_terms ({', '.join(self.TERM_COLUMNS)}) FROM STDIN") as copy:
                for rows in terms.values():
                    for row in rows:
                        copy.write_row(row)
        pending = getattr(self._batch, "stats", None) or {}
        self._batch.stats = {}
        rows = [(c, p, n, t) for (c, p), (n, t) in sorted(pending.items()) if n or t]
        if rows:
            curs.executemany(
                "INSERT INTO engram_recall_stats (company, person, answers, total_len) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (company, person) DO UPDATE SET answers = engram_recall_stats.answers + "
                "EXCLUDED.answers, total_len = engram_recall_stats.total_len + EXCLUDED.total_len",
                rows,
            )

    def _refresh_answers(self, curs: Cursor[Any], memory_id: Any, key: bytes | None,
                         plain: dict[int, str | None] | None = None) -> None:
        """Recompute which revisions answer for which valid time, and their terms. `plain` holds texts
        the event being applied carries (by revision): those are not unsealed again."""
        curs.execute(
            "SELECT m.status, m.occurred_at, r.revision, r.valid_from, r.valid_to, r.mode, r.sealed_text, r.company, "
            "r.person, r.visibility, r.team, r.source_blind, r.is_answer, r.doc_len "
            "FROM engram_recall_revisions r JOIN engram_memories m USING (memory_id) "
            "WHERE r.memory_id = %s ORDER BY r.revision",
            (memory_id,),
        )
        rows = curs.fetchall()
        answering = [r for r in rows if r["is_answer"]]
        if answering:  # what they counted in the per-person figures goes; the new answers are added below
            self._add_answers(rows[0]["company"], rows[0]["person"], -len(answering),
                              -sum(r["doc_len"] for r in answering))
            self._delete_terms(curs, memory_id)
            curs.execute(
                "UPDATE engram_recall_revisions SET is_answer = false, answer_from = NULL, answer_to = NULL "
                "WHERE memory_id = %s AND is_answer",
                (memory_id,),
            )
        if not rows or rows[0]["status"] != CONFIRMED or key is None:
            return
        by_rev = {r["revision"]: r for r in rows}
        total = 0
        periods = answer_periods([dict(r) for r in rows])
        for period in periods:
            row = by_rev[period["revision"]]
            if plain is not None and row["revision"] in plain:
                text = plain[row["revision"]]
            else:
                text = unseal_from_view(key, memory_id, "text", row["sealed_text"])
            said = row["occurred_at"]
            counts = self.index.term_counts(row["company"], text, said.date() if said else None) if text else {}
            answer = Answer(period["valid_from"], period["valid_to"], sum(counts.values()))
            total += answer.doc_len
            curs.execute(
                "UPDATE engram_recall_revisions SET is_answer = true, answer_from = %s, answer_to = %s, "
                "doc_len = %s WHERE memory_id = %s AND revision = %s",
                (answer.valid_from, answer.valid_to, answer.doc_len, memory_id, period["revision"]),
            )
            self._insert_terms(curs, row["company"], row["person"], row["visibility"], row["team"],
                               row["source_blind"], memory_id, period["revision"], answer, counts)
        self._add_answers(rows[0]["company"], rows[0]["person"], len(periods), total)
