"""The recall projection: applies Memory events to the recall view's rows (`recall_view`), a batch at a
time (`recall_rows`), keeps which revisions answer and their blind terms, and reports its purges to the
purge tracker. No plaintext: text is sealed under the memory's key, terms are keyed hashes.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor

from engram.adapters.blind_index import BlindIndex
from engram.adapters.kafka import EVENTS_TOPIC
from engram.adapters.kafka_worker import consumed_at
from engram.adapters.keystore import KeyStore
from engram.adapters.vectors import VectorStore
from engram.adapters.view_cipher import seal_for_view, unseal_from_view
from engram.domain.memory import Memory, purge_id_of
from engram.domain.memory_rules import CONFIRMED, EXPIRED, FORGOTTEN, PENDING, REJECTED, tags_of
from engram.domain.revisions import answer_periods

from .base import ViewProjection
from .purge import EVENT_STORE, KAFKA, RECALL_VIEW, PurgeTracker
from .recall_fields import Answer, asks, readable, said_at, session_zone
from .recall_rows import BatchRows
from .recall_view import TERM_COLUMNS, RecallView
from .rows import copy_in
from .view import View

CLOSING = (Memory.Forgotten, Memory.Rejected, Memory.Expired)


class RecallProjection(ViewProjection):
    """Set-based: `apply` notes each event, `flush` reads every memory the batch touches in two
    statements, applies the events to those rows in Python, in order, and writes what changed (deletes
    by key, then one COPY per table). The rows are those the statement-per-event version wrote."""

    name = "recall"
    view_class = RecallView
    TERM_COLUMNS = TERM_COLUMNS
    partitionable = True  # only Memory events, each its own memory's; per-person counts are sums
    applies_to = (Memory.Event,)

    def __init__(self, view: View, keys: KeyStore, index: BlindIndex, purge: PurgeTracker) -> None:
        super().__init__(view)
        self.keys = keys
        self.index = index
        self.purge = purge
        self._batch = threading.local()
        self._zone: Any = None

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        if not isinstance(event, Memory.Event):  # other aggregates' events share these names (Confirmed, ...)
            return
        handler = getattr(self, "on_" + type(event).__name__, None)
        if handler is not None:
            self._pending().append((event.originator_id, handler, event, tracking))

    def _pending(self) -> list[tuple[Any, Any, Any, Any]]:
        """(memory id, handler, event, tracking) of each event of the batch, in order."""
        pending: list[tuple[Any, Any, Any, Any]] | None = getattr(self._batch, "pending", None)
        if pending is None:
            pending = self._batch.pending = []
        return pending

    # -- events, applied to the batch's rows ----------------------------------------------------------

    def _created(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Created, status: str, review: str) -> None:
        key = self.keys.get(e.originator_id) if e.text is not None else None
        tags = tags_of(e)
        memory_id = e.originator_id
        said = said_at(e.evidence) if key else None
        readable(e.valid_from, e.valid_to, said)  # what reading the row back would refuse
        fresh = memory_id not in rows.memories  # else a re-delivery: the rows may have moved on since
        sealed_text = seal_for_view(key, memory_id, "text", e.text) if key else None
        sealed_evidence = seal_for_view(key, memory_id, "evidence", e.evidence) if key else None
        if fresh:
            # The source only sealed, and its id blinded for the queries that filter on it (ADR 0019).
            source = e.source if key else None
            rows.memories[memory_id] = {
                "memory_id": memory_id, "company": e.company, "person": e.person, "visibility": e.visibility,
                "team": e.team,
                "sealed_source": seal_for_view(key, memory_id, "source", source) if key and source else None,
                "source_blind": self.index.source(e.company, source["id"]) if source and source.get("id") else None,
                "status": status, "review": review, "revision": 1, "sealed_text": sealed_text,
                "sealed_evidence": sealed_evidence,
                "valid_from": e.valid_from, "valid_to": e.valid_to, "time_uncertain": e.valid_from is None,
                "created_at": e.timestamp, "updated_at": e.timestamp, "forget_id": None,
                "occurred_at": self._as_read(said), "asks": asks(e.text) if key else False,
                "sealed_tags": seal_for_view(key, memory_id, "tags", tags) if key and tags else None,
                "tag_terms": self.index.tags(e.company, tags) if key else [],
            }
        if status == CONFIRMED and fresh and key is not None and e.text is not None:
            # A new memory, remembered at once: its only revision answers for its whole valid time. Written
            # as such from the text in hand; nothing to read back, unseal or undo first.
            counts = self.index.term_counts(e.company, e.text, said.date() if said else None)
            answer = Answer(e.valid_from, e.valid_to, sum(counts.values()))
            row = self._insert_revision(rows, memory_id, 1, e.valid_from, e.valid_to, None, e.valid_from is None,
                                        e.timestamp, sealed_text, sealed_evidence if e.evidence else None, answer)
            if row is not None:
                self._insert_terms(row, answer, counts)
                self._add_answers(e.company, e.person, 1, answer.doc_len)
            return
        row = self._insert_revision(rows, memory_id, 1, e.valid_from, e.valid_to, None, e.valid_from is None,
                                    e.timestamp, sealed_text if fresh else self._seal(key, memory_id, e.text),
                                    sealed_evidence if e.evidence else None)
        if row is not None and fresh and e.text is not None and row["sealed_text"] is not None:
            rows.plain[(memory_id, 1)] = (row["sealed_text"], e.text)
        if status == CONFIRMED:
            self._refresh(rows, memory_id, key)

    def on_Remembered(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Remembered, t: Tracking) -> None:
        self._created(curs, rows, e, CONFIRMED, "normal")

    def on_Proposed(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Proposed, t: Tracking) -> None:
        self._created(curs, rows, e, PENDING, e.review)

    def on_Confirmed(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Confirmed, t: Tracking) -> None:
        memory_id = e.originator_id
        key = self.keys.get(memory_id)
        memory = rows.memories.get(memory_id)
        if memory is None:
            return
        changes: dict[str, Any] = {"status": CONFIRMED, "updated_at": e.timestamp}
        if e.edited and e.text is not None and key is not None:
            sealed = seal_for_view(key, memory_id, "text", e.text)
            changes.update(sealed_text=sealed, asks=asks(e.text))
            first = rows.revs(memory_id).get(1)
            if first is not None:
                rows.revs(memory_id)[1] = {**first, "sealed_text": sealed}
                rows.plain[(memory_id, 1)] = (sealed, e.text)
        rows.memories[memory_id] = {**memory, **changes}
        self._refresh(rows, memory_id, key)

    def on_Rejected(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Rejected, t: Tracking) -> None:
        """Rejected and expired candidates are purged like forgotten memories, with their own purge id."""
        self._purge(curs, rows, e, t, REJECTED, e.timestamp)

    def on_Expired(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Expired, t: Tracking) -> None:
        self._purge(curs, rows, e, t, EXPIRED, e.key_destroyed_at or e.timestamp)

    def on_Corrected(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Corrected, t: Tracking) -> None:
        memory_id = e.originator_id
        key = self.keys.get(memory_id) if e.text is not None else None
        memory = rows.memories.get(memory_id)
        if memory is not None:
            readable(e.valid_from, e.valid_to)
            sealed = seal_for_view(key, memory_id, "text", e.text) if key else None
            evidence = seal_for_view(key, memory_id, "evidence", e.evidence) if key and e.evidence else None
            uncertain = e.valid_from is None and memory["time_uncertain"]
            rows.memories[memory_id] = {
                **memory, "revision": e.revision, "sealed_text": sealed, "valid_from": e.valid_from,
                "valid_to": e.valid_to, "sealed_evidence": evidence or memory["sealed_evidence"],
                "asks": asks(e.text), "time_uncertain": uncertain, "updated_at": e.timestamp,
            }
            row = self._insert_revision(rows, memory_id, e.revision, e.valid_from, e.valid_to, e.mode, uncertain,
                                        e.timestamp, sealed, evidence)
            if row is not None and sealed is not None and e.text is not None:
                rows.plain[(memory_id, e.revision)] = (sealed, e.text)
        self._refresh(rows, memory_id, key)

    def on_EvidenceAdded(self, curs: Cursor[Any], rows: BatchRows, e: Memory.EvidenceAdded, t: Tracking) -> None:
        """The same thing said again: the memory's evidence, and its current revision's, gain the quote."""
        memory_id = e.originator_id
        key = self.keys.get(memory_id) if e.evidence is not None else None
        memory = rows.memories.get(memory_id)
        if memory is None or key is None:
            return
        sealed = seal_for_view(key, memory_id, "evidence", e.evidence)
        rows.memories[memory_id] = {**memory, "sealed_evidence": sealed, "updated_at": e.timestamp}
        revs = rows.revs(memory_id)
        if revs:
            latest = max(revs)
            revs[latest] = {**revs[latest], "sealed_evidence": sealed}

    def on_Forgotten(self, curs: Cursor[Any], rows: BatchRows, e: Memory.Forgotten, t: Tracking) -> None:
        answering = [r for r in rows.revs(e.originator_id).values() if r["is_answer"]]
        if answering and e.originator_id in rows.memories:
            self._add_answers(answering[0]["company"], answering[0]["person"], -len(answering),
                              -sum(r["doc_len"] for r in answering))
        self._purge(curs, rows, e, t, FORGOTTEN, e.key_destroyed_at)

    def _purge(self, curs: Cursor[Any], rows: BatchRows, e: Any, t: Tracking, status: str, key_destroyed_at: Any) -> None:
        """The memory's rows lose their content; the purge request opens and this view, the event
        store (its key went with the event) and, applied from Kafka, the topic report."""
        memory_id = e.originator_id
        purge_id = purge_id_of(e)
        terms = self._delete_terms(rows, memory_id)
        revisions = len(rows.revs(memory_id))
        rows.revisions[memory_id] = {}
        memory = rows.memories.get(memory_id)
        if memory is None:
            return
        vectors = VectorStore.delete_in(curs, memory_id)  # sealed under the key that went with the event
        self._moved().add((memory["company"], memory["person"]))
        rows.memories[memory_id] = {
            **memory, "status": status, "sealed_text": None, "sealed_evidence": None, "occurred_at": None,
            "asks": False, "sealed_tags": None, "tag_terms": [],
            # source_blind stays: forgetting its source again answers with this memory's forget id (ADR 0019)
            "sealed_source": None, "forget_id": e.forget_id if status == FORGOTTEN else None,
            "updated_at": e.timestamp,
        }
        self.purge.opened(curs, purge_id, memory_id, memory["company"], memory["person"], e.timestamp)
        self.purge.purged(
            curs, purge_id, EVENT_STORE,
            "data key destroyed; every stored event of this memory is ciphertext under it",
            key_destroyed_at,
        )
        self.purge.purged(
            curs, purge_id, RECALL_VIEW,
            f"deleted {revisions} revision rows, {terms} term rows and {vectors} vectors at position {t.notification_id}",
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

    @staticmethod
    def _seal(key: bytes | None, memory_id: Any, text: str | None) -> bytes | None:
        return seal_for_view(key, memory_id, "text", text) if key and text is not None else None

    def _as_read(self, value: datetime | None) -> datetime | None:
        """A time as the view's rows give it back (in the session's time zone): its day is a term."""
        return value.astimezone(self._zone) if value is not None and self._zone is not None else value

    def _insert_revision(self, rows: BatchRows, memory_id: Any, revision: int, valid_from: Any, valid_to: Any,
                         mode: str | None, uncertain: bool, at: Any, sealed_text: bytes | None,
                         sealed_evidence: bytes | None, answer: Answer | None = None) -> dict[str, Any] | None:
        """A revision, its owner and scope copied from the memory's row; none without that row, and
        none over one already there. Returns the row written."""
        memory = rows.memories.get(memory_id)
        revs = rows.revs(memory_id)
        if memory is None or revision in revs:
            return None
        row = revs[revision] = {
            "memory_id": memory_id, "revision": revision, "company": memory["company"], "person": memory["person"],
            "visibility": memory["visibility"], "team": memory["team"], "source_blind": memory["source_blind"],
            "valid_from": valid_from, "valid_to": valid_to, "mode": mode, "time_uncertain": uncertain, "at": at,
            "is_answer": answer is not None, "answer_from": answer.valid_from if answer else None,
            "answer_to": answer.valid_to if answer else None, "sealed_text": sealed_text,
            "sealed_evidence": sealed_evidence,
            "doc_len": answer.doc_len if answer else 0,
        }
        return row

    def _insert_terms(self, revision: dict[str, Any], answer: Answer, counts: dict[int, int]) -> None:
        """An answering revision's terms, each with what a search filters on: held for the batch and
        written at flush in one COPY (dropped again if a later event of the batch removes them)."""
        if counts:
            r = revision
            self._terms().setdefault(r["memory_id"], []).extend(
                (r["company"], r["person"], term, r["memory_id"], r["revision"], tf, answer.doc_len, r["visibility"],
                 r["team"], r["source_blind"], answer.valid_from, answer.valid_to) for term, tf in counts.items())

    def _delete_terms(self, rows: BatchRows, memory_id: Any) -> int:
        """Remove a memory's terms, in the table or still held; how many there were."""
        held = len(self._terms().pop(memory_id, ()))
        if memory_id in rows.cleared:
            return held
        rows.cleared.add(memory_id)
        return rows.term_rows.get(memory_id, 0) + held

    def _terms(self) -> dict[Any, list[tuple[Any, ...]]]:
        terms: dict[Any, list[tuple[Any, ...]]] | None = getattr(self._batch, "terms", None)
        if terms is None:
            terms = self._batch.terms = {}
        return terms

    def _add_answers(self, company: str, person: str, n: int, total: int) -> None:
        """Note answering revisions (n, their total length) for the per-person BM25 corpus figures.
        Several memories of one person can sit on different partitions, so the shared per-person rows
        are written once per batch, in a fixed order (see flush): concurrent workers cannot deadlock."""
        pending = getattr(self._batch, "stats", None)
        if pending is None:
            pending = self._batch.stats = {}
        had_n, had_total = pending.get((company, person), (0, 0))
        pending[(company, person)] = (had_n + n, had_total + total)

    def _moved(self) -> set[tuple[str, str]]:
        """People whose answering revisions changed in this batch: the vectors recall holds of them move."""
        moved: set[tuple[str, str]] | None = getattr(self._batch, "moved", None)
        if moved is None:
            moved = self._batch.moved = set()
        return moved

    def begin(self) -> None:
        self._batch.stats = {}
        self._batch.terms = {}
        self._batch.pending = []
        self._batch.moved = set()

    def _refresh_answers(self, curs: Cursor[Any], memory_id: Any, key: bytes | None) -> None:
        """Recompute, at flush, which revisions of a memory answer for which valid time, and their terms,
        from its stored rows (what each event that changes them does)."""
        self._pending().append((memory_id, lambda _curs, rows, *_: self._refresh(rows, memory_id, key), None, None))

    def _refresh(self, rows: BatchRows, memory_id: Any, key: bytes | None) -> None:
        """Recompute which revisions answer for which valid time, and their terms. Texts sealed by this
        batch's events are taken as they came, not unsealed again."""
        memory = rows.memories.get(memory_id)
        if memory is None:
            return
        revs = rows.revs(memory_id)
        ordered = [revs[r] for r in sorted(revs)]
        answering = [r for r in ordered if r["is_answer"]]
        if answering:  # what they counted in the per-person figures goes; the new answers are added below
            self._add_answers(ordered[0]["company"], ordered[0]["person"], -len(answering),
                              -sum(r["doc_len"] for r in answering))
            self._moved().add((ordered[0]["company"], ordered[0]["person"]))  # their vectors' valid times may move
            self._delete_terms(rows, memory_id)
            for r in answering:
                revs[r["revision"]] = {**r, "is_answer": False, "answer_from": None, "answer_to": None}
        if not ordered or memory["status"] != CONFIRMED or key is None:
            return
        total = 0
        periods = answer_periods([revs[r] for r in sorted(revs)])
        said = memory["occurred_at"]
        for period in periods:
            row = revs[period["revision"]]
            held = rows.plain.get((memory_id, row["revision"]))
            if held is not None and held[0] is row["sealed_text"]:
                text: str | None = held[1]
            else:
                text = unseal_from_view(key, memory_id, "text", row["sealed_text"])
            counts = self.index.term_counts(row["company"], text, said.date() if said else None) if text else {}
            answer = Answer(period["valid_from"], period["valid_to"], sum(counts.values()))
            total += answer.doc_len
            row = revs[row["revision"]] = {**row, "is_answer": True, "answer_from": answer.valid_from,
                                           "answer_to": answer.valid_to, "doc_len": answer.doc_len}
            self._insert_terms(row, answer, counts)
        self._add_answers(ordered[0]["company"], ordered[0]["person"], len(periods), total)

    # -- the batch: read, apply, write ----------------------------------------------------------------

    def _read(self, curs: Cursor[Any], pending: list[tuple[Any, Any, Any, Any]]) -> BatchRows:
        ids = list(dict.fromkeys(memory_id for memory_id, *_ in pending))
        if self._zone is None:
            self._zone = session_zone(curs)
        return BatchRows.read(curs, ids, [m for m, _, e, _ in pending if isinstance(e, CLOSING)])

    def flush(self, curs: Cursor[Any]) -> None:
        pending = self._pending()
        self._batch.pending = []
        if pending:
            rows = self._read(curs, pending)
            with self.index.remembering():
                for _, handler, event, tracking in pending:
                    handler(curs, rows, event, tracking)
            rows.write(curs)
        terms = self._terms()
        self._batch.terms = {}
        if terms:
            copy_in(curs, "engram_recall_terms", TERM_COLUMNS, (row for held in terms.values() for row in held))
            # each revision that answers now is embedded in the background (ADR 0040)
            VectorStore.queue_in(curs, sorted({(row[3], row[4]) for held in terms.values() for row in held}))
        moved = self._moved()
        self._batch.moved = set()
        VectorStore.bump_in(curs, moved)
        stats = getattr(self._batch, "stats", None) or {}
        self._batch.stats = {}
        figures = [(c, p, n, t) for (c, p), (n, t) in sorted(stats.items()) if n or t]
        if figures:
            curs.executemany(
                "INSERT INTO engram_recall_stats (company, person, answers, total_len) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (company, person) DO UPDATE SET answers = engram_recall_stats.answers + "
                "EXCLUDED.answers, total_len = engram_recall_stats.total_len + EXCLUDED.total_len",
                figures,
            )
