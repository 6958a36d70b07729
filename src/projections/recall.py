"""The recall view: each memory's current state, the revisions that answer for some
valid time, and a blind term index over them. No plaintext: text is sealed under the
memory's key, terms are keyed hashes. Also records the forget requests it has purged.
"""

from __future__ import annotations

import threading
from typing import Any

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.adapters.blind_index import BlindIndex
from engram.adapters.keystore import KeyStore
from engram.domain.memory import CONFIRMED, EXPIRED, FORGOTTEN, PENDING, REJECTED, Memory, answer_periods

from .base import EngramProjection, View
from .sealing import seal_for_view, unseal_from_view

DDL = """
CREATE TABLE IF NOT EXISTS engram_memories (
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    source jsonb NOT NULL,
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
    forget_id text
);
CREATE INDEX IF NOT EXISTS engram_memories_owner
    ON engram_memories (company, person, status, created_at DESC, memory_id DESC);
CREATE TABLE IF NOT EXISTS engram_recall_revisions (
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    source_id text,
    valid_from timestamptz,
    valid_to timestamptz,
    mode text,
    time_uncertain boolean NOT NULL,
    at timestamptz NOT NULL,
    is_answer boolean NOT NULL DEFAULT false,
    answer_from timestamptz,
    answer_to timestamptz,
    sealed_text bytea,
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
    source_id text,
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
CREATE TABLE IF NOT EXISTS engram_forgets (
    forget_id text PRIMARY KEY,
    memory_id uuid NOT NULL,
    company text NOT NULL,
    person text NOT NULL,
    requested_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS engram_purge_copies (
    forget_id text NOT NULL,
    copy text NOT NULL,
    state text NOT NULL,
    evidence text,
    purged_at timestamptz,
    PRIMARY KEY (forget_id, copy)
);
"""


def record_purged_copy(curs: Cursor[Any], forget_id: str, copy: str, evidence: str, at: Any) -> None:
    curs.execute(
        "INSERT INTO engram_purge_copies (forget_id, copy, state, evidence, purged_at) "
        "VALUES (%s, %s, 'purged', %s, %s) ON CONFLICT (forget_id, copy) DO UPDATE "
        "SET state = 'purged', evidence = EXCLUDED.evidence, purged_at = EXCLUDED.purged_at",
        (forget_id, copy, evidence, at),
    )


class RecallView(View):
    ddl = DDL
    tables = (
        "engram_recall_stats",
        "engram_recall_terms",
        "engram_recall_revisions",
        "engram_memories",
        "engram_forgets",
    )

    def clear(self, curs: Cursor[Any]) -> None:
        super().clear(curs)
        curs.execute("DELETE FROM engram_purge_copies WHERE copy IN ('event_store', 'recall_view')")


class RecallProjection(EngramProjection):
    name = "recall"
    view_class = RecallView

    def __init__(self, view: View, keys: KeyStore, index: BlindIndex) -> None:
        super().__init__(view)
        self.keys = keys
        self.index = index
        self._batch = threading.local()

    def apply(self, curs: Cursor[Any], event: Any, tracking: Tracking) -> None:
        handler = getattr(self, "on_" + type(event).__name__, None)
        if handler is not None:
            handler(curs, event, tracking)

    # -- events ---------------------------------------------------------------

    def _created(self, curs: Cursor[Any], e: Memory.Created, status: str, review: str) -> None:
        key = self.keys.get(e.originator_id) if e.text is not None else None
        sealed_text = seal_for_view(key, e.originator_id, "text", e.text) if key else None
        sealed_evidence = seal_for_view(key, e.originator_id, "evidence", e.evidence) if key else None
        curs.execute(
            "INSERT INTO engram_memories (memory_id, company, person, visibility, team, source, status, "
            "review, revision, sealed_text, sealed_evidence, valid_from, valid_to, time_uncertain, "
            "created_at, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,1,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (memory_id) DO NOTHING",
            (
                e.originator_id, e.company, e.person, e.visibility, e.team, Jsonb(e.source), status,
                review, sealed_text, sealed_evidence, e.valid_from, e.valid_to, e.valid_from is None,
                e.timestamp, e.timestamp,
            ),
        )
        self._insert_revision(curs, e.originator_id, 1, e.valid_from, e.valid_to, None, e.valid_from is None,
                              e.timestamp, e.text, key)
        if status == CONFIRMED:
            self._refresh_answers(curs, e.originator_id, key)

    def on_Remembered(self, curs: Cursor[Any], e: Memory.Remembered, t: Tracking) -> None:
        self._created(curs, e, CONFIRMED, "normal")

    def on_Proposed(self, curs: Cursor[Any], e: Memory.Proposed, t: Tracking) -> None:
        self._created(curs, e, PENDING, e.review)

    def on_Confirmed(self, curs: Cursor[Any], e: Memory.Confirmed, t: Tracking) -> None:
        key = self.keys.get(e.originator_id)
        if e.edited and e.text is not None and key is not None:
            sealed = seal_for_view(key, e.originator_id, "text", e.text)
            curs.execute("UPDATE engram_memories SET sealed_text = %s WHERE memory_id = %s", (sealed, e.originator_id))
            curs.execute(
                "UPDATE engram_recall_revisions SET sealed_text = %s WHERE memory_id = %s AND revision = 1",
                (sealed, e.originator_id),
            )
        self._set_status(curs, e, CONFIRMED)
        self._refresh_answers(curs, e.originator_id, key)

    def on_Rejected(self, curs: Cursor[Any], e: Memory.Rejected, t: Tracking) -> None:
        self._set_status(curs, e, REJECTED)

    def on_Expired(self, curs: Cursor[Any], e: Memory.Expired, t: Tracking) -> None:
        """Expired candidates are purged like forgotten memories."""
        curs.execute("DELETE FROM engram_recall_revisions WHERE memory_id = %s", (e.originator_id,))
        curs.execute(
            "UPDATE engram_memories SET status = %s, sealed_text = NULL, sealed_evidence = NULL, updated_at = %s "
            "WHERE memory_id = %s",
            (EXPIRED, e.timestamp, e.originator_id),
        )

    def on_Corrected(self, curs: Cursor[Any], e: Memory.Corrected, t: Tracking) -> None:
        key = self.keys.get(e.originator_id) if e.text is not None else None
        curs.execute(
            "UPDATE engram_memories SET revision = %s, sealed_text = %s, valid_from = %s, valid_to = %s, "
            "time_uncertain = (%s::timestamptz IS NULL AND time_uncertain), updated_at = %s WHERE memory_id = %s",
            (
                e.revision,
                seal_for_view(key, e.originator_id, "text", e.text) if key else None,
                e.valid_from, e.valid_to, e.valid_from, e.timestamp, e.originator_id,
            ),
        )
        curs.execute(
            "SELECT time_uncertain FROM engram_memories WHERE memory_id = %s", (e.originator_id,)
        )
        row = curs.fetchone()
        self._insert_revision(curs, e.originator_id, e.revision, e.valid_from, e.valid_to, e.mode,
                              bool(row and row["time_uncertain"]), e.timestamp, e.text, key)
        self._refresh_answers(curs, e.originator_id, key)

    def on_Forgotten(self, curs: Cursor[Any], e: Memory.Forgotten, t: Tracking) -> None:
        self._count_answers(curs, e.originator_id, sign=-1)
        curs.execute("DELETE FROM engram_recall_terms WHERE memory_id = %s", (e.originator_id,))
        terms = curs.rowcount
        curs.execute("DELETE FROM engram_recall_revisions WHERE memory_id = %s", (e.originator_id,))
        revisions = curs.rowcount
        curs.execute(
            "UPDATE engram_memories SET status = %s, sealed_text = NULL, sealed_evidence = NULL, "
            "forget_id = %s, updated_at = %s WHERE memory_id = %s RETURNING company, person",
            (FORGOTTEN, e.forget_id, e.timestamp, e.originator_id),
        )
        owner = curs.fetchone()
        if owner is None:
            return
        curs.execute(
            "INSERT INTO engram_forgets (forget_id, memory_id, company, person, requested_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (e.forget_id, e.originator_id, owner["company"], owner["person"], e.timestamp),
        )
        record_purged_copy(
            curs, e.forget_id, "event_store",
            "data key destroyed; every stored event of this memory is ciphertext under it",
            e.key_destroyed_at,
        )
        record_purged_copy(
            curs, e.forget_id, "recall_view",
            f"deleted {revisions} revision rows and {terms} term rows at position {t.notification_id}",
            e.timestamp,
        )

    # -- helpers --------------------------------------------------------------

    def _set_status(self, curs: Cursor[Any], e: Any, status: str) -> None:
        curs.execute(
            "UPDATE engram_memories SET status = %s, updated_at = %s WHERE memory_id = %s",
            (status, e.timestamp, e.originator_id),
        )

    def _insert_revision(self, curs, memory_id, revision, valid_from, valid_to, mode, uncertain, at, text, key) -> None:  # noqa: ANN001
        curs.execute(
            "INSERT INTO engram_recall_revisions (memory_id, revision, company, person, visibility, team, "
            "source_id, valid_from, valid_to, mode, time_uncertain, at, sealed_text, doc_len) "
            "SELECT memory_id, %s, company, person, visibility, team, source->>'id', %s, %s, %s, %s, %s, %s, %s "
            "FROM engram_memories WHERE memory_id = %s ON CONFLICT DO NOTHING",
            (
                revision, valid_from, valid_to, mode, uncertain, at,
                seal_for_view(key, memory_id, "text", text) if key and text is not None else None,
                0, memory_id,
            ),
        )

    def _count_answers(self, curs: Cursor[Any], memory_id: Any, sign: int) -> None:
        """Note a memory's answering revisions for its person's BM25 corpus figures. Several
        memories of one person can sit on different partitions, so the shared per-person rows are
        written once per batch, in a fixed order (see flush): concurrent workers cannot deadlock."""
        curs.execute(
            "SELECT company, person, count(*) AS n, coalesce(sum(doc_len), 0) AS total "
            "FROM engram_recall_revisions WHERE memory_id = %s AND is_answer GROUP BY company, person",
            (memory_id,),
        )
        pending = getattr(self._batch, "stats", None)
        if pending is None:
            pending = self._batch.stats = {}
        for row in curs.fetchall():
            n, total = pending.get((row["company"], row["person"]), (0, 0))
            pending[(row["company"], row["person"])] = (n + sign * row["n"], total + sign * row["total"])

    def begin(self) -> None:
        self._batch.stats = {}

    def flush(self, curs: Cursor[Any]) -> None:
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

    def _refresh_answers(self, curs: Cursor[Any], memory_id: Any, key: bytes | None) -> None:
        """Recompute which revisions answer for which valid time, and their terms."""
        self._count_answers(curs, memory_id, sign=-1)
        curs.execute(
            "SELECT m.status, r.revision, r.valid_from, r.valid_to, r.mode, r.sealed_text, r.company, r.person, "
            "r.visibility, r.team, r.source_id "
            "FROM engram_recall_revisions r JOIN engram_memories m USING (memory_id) "
            "WHERE r.memory_id = %s ORDER BY r.revision",
            (memory_id,),
        )
        rows = curs.fetchall()
        curs.execute("DELETE FROM engram_recall_terms WHERE memory_id = %s", (memory_id,))
        curs.execute(
            "UPDATE engram_recall_revisions SET is_answer = false, answer_from = NULL, answer_to = NULL "
            "WHERE memory_id = %s",
            (memory_id,),
        )
        if not rows or rows[0]["status"] != CONFIRMED or key is None:
            return
        by_rev = {r["revision"]: r for r in rows}
        for period in answer_periods([dict(r) for r in rows]):
            row = by_rev[period["revision"]]
            text = unseal_from_view(key, memory_id, "text", row["sealed_text"])
            counts = self.index.term_counts(row["company"], text) if text else {}
            doc_len = sum(counts.values())
            curs.execute(
                "UPDATE engram_recall_revisions SET is_answer = true, answer_from = %s, answer_to = %s, "
                "doc_len = %s WHERE memory_id = %s AND revision = %s",
                (period["valid_from"], period["valid_to"], doc_len, memory_id, period["revision"]),
            )
            if counts:
                curs.executemany(
                    "INSERT INTO engram_recall_terms (company, person, term, memory_id, revision, tf, doc_len, "
                    "visibility, team, source_id, answer_from, answer_to) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(row["company"], row["person"], term, memory_id, period["revision"], tf, doc_len,
                      row["visibility"], row["team"], row["source_id"], period["valid_from"], period["valid_to"])
                     for term, tf in counts.items()],
                )
        self._count_answers(curs, memory_id, sign=+1)


# -- queries (the read-model port used by the service) ---------------------------

BM25_K1 = 1.2
BM25_B = 0.75

_SEARCH = """
WITH stats AS MATERIALIZED (
    SELECT greatest(answers, 1)::float8 AS n, greatest(total_len::float8 / greatest(answers, 1), 1) AS avgdl
    FROM engram_recall_stats WHERE company = %(company)s AND person = %(person)s
),
hits AS MATERIALIZED (
    SELECT term, memory_id, revision, tf, doc_len
    FROM engram_recall_terms
    WHERE company = %(company)s AND person = %(person)s AND term = ANY(%(terms)s::bigint[])
      AND (visibility = 'general' OR (team = ANY(%(teams)s) AND source_id = ANY(%(sources)s)))
      AND coalesce(source_id, '') <> ALL(%(revoked)s)
      AND (answer_from IS NULL OR answer_from <= %(as_of)s)
      AND (answer_to IS NULL OR answer_to > %(as_of)s)
),
df AS MATERIALIZED (SELECT term, count(*)::float8 AS df FROM hits GROUP BY term),
scored AS MATERIALIZED (
    SELECT h.memory_id, h.revision,
           sum(ln(1 + greatest(s.n - df.df + 0.5, 0.5) / (df.df + 0.5))
               * h.tf * (%(k1)s + 1)
               / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.doc_len / s.avgdl))) AS score
    FROM hits h JOIN df USING (term) CROSS JOIN stats s
    GROUP BY h.memory_id, h.revision
    ORDER BY score DESC
    LIMIT %(limit)s
)
"""

_RECENT = """
WITH scored AS (
    SELECT r.memory_id, r.revision, 0.0::float8 AS score
    FROM engram_recall_revisions r
    WHERE r.company = %(company)s AND r.person = %(person)s AND r.is_answer
      AND (r.visibility = 'general' OR (r.team = ANY(%(teams)s) AND r.source_id = ANY(%(sources)s)))
      AND coalesce(r.source_id, '') <> ALL(%(revoked)s)
      AND (r.answer_from IS NULL OR r.answer_from <= %(as_of)s)
      AND (r.answer_to IS NULL OR r.answer_to > %(as_of)s)
    ORDER BY r.at DESC
    LIMIT %(limit)s
)
"""

_BY_IDS = """
WITH scored AS (
    SELECT r.memory_id, r.revision, 0.0::float8 AS score
    FROM engram_recall_revisions r
    WHERE r.memory_id = ANY(%(ids)s::uuid[]) AND r.company = %(company)s AND r.person = %(person)s AND r.is_answer
      AND (r.visibility = 'general' OR (r.team = ANY(%(teams)s) AND r.source_id = ANY(%(sources)s)))
      AND coalesce(r.source_id, '') <> ALL(%(revoked)s)
      AND (r.answer_from IS NULL OR r.answer_from <= %(as_of)s)
      AND (r.answer_to IS NULL OR r.answer_to > %(as_of)s)
)
"""

_ROWS = """
SELECT s.memory_id, s.revision, s.score, r.sealed_text, r.answer_from, r.answer_to, r.time_uncertain,
       r.valid_from, r.valid_to, m.company, m.person, m.visibility, m.team, m.source, m.status,
       m.sealed_evidence, k.wrapped
FROM scored s
JOIN engram_recall_revisions r ON r.memory_id = s.memory_id AND r.revision = s.revision
JOIN engram_memories m ON m.memory_id = s.memory_id AND m.status = 'confirmed'
JOIN engram_data_keys k ON k.key_id = s.memory_id
ORDER BY s.score DESC, r.at DESC
"""


class RecallQueries:
    """Reads for recall, lists and the purge tracker. Rows come back sealed; the caller unseals."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore

    def search(self, *, company: str, person: str, terms: list[int], as_of: Any,
               teams: list[str], sources: list[str], revoked: list[str], limit: int) -> list[dict[str, Any]]:
        params = {
            "company": company, "person": person, "terms": terms, "as_of": as_of,
            "teams": teams, "sources": sources, "revoked": revoked, "limit": limit, "k1": float(BM25_K1), "b": float(BM25_B),
        }
        sql = (_SEARCH if terms else _RECENT) + _ROWS
        with self.datastore.get_connection() as conn:  # autocommit: one round trip
            return list(conn.execute(sql, params, prepare=True).fetchall())

    def by_ids(self, *, ids: list[str], company: str, person: str, as_of: Any, teams: list[str],
               sources: list[str], revoked: list[str]) -> list[dict[str, Any]]:
        """The same rows and filters as search, for memories the semantic index suggested."""
        params = {"ids": ids, "company": company, "person": person, "as_of": as_of, "teams": teams,
                  "sources": sources, "revoked": revoked}
        with self.datastore.get_connection() as conn:
            return list(conn.execute(_BY_IDS + _ROWS, params).fetchall())

    def list_memories(self, *, company: str, person: str, statuses: list[str], terms: list[int] | None,
                      after: tuple[Any, str] | None, limit: int) -> list[dict[str, Any]]:
        sql = (
            "SELECT m.*, k.wrapped FROM engram_memories m "
            "LEFT JOIN engram_data_keys k ON k.key_id = m.memory_id "
            "WHERE m.company = %(company)s AND m.person = %(person)s AND m.status = ANY(%(statuses)s) "
        )
        params: dict[str, Any] = {"company": company, "person": person, "statuses": statuses, "limit": limit}
        if terms is not None:
            sql += (
                "AND m.memory_id IN (SELECT memory_id FROM engram_recall_terms WHERE company = %(company)s "
                "AND person = %(person)s AND term = ANY(%(terms)s)) "
            )
            params["terms"] = terms
        if after is not None:
            sql += "AND (m.created_at, m.memory_id) < (%(after_at)s, %(after_id)s::uuid) "
            params["after_at"], params["after_id"] = after
        sql += "ORDER BY m.created_at DESC, m.memory_id DESC LIMIT %(limit)s"
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(sql, params)
            return list(curs.fetchall())

    def candidates(self, *, company: str, person: str) -> list[dict[str, Any]]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                "SELECT c.*, k.wrapped FROM engram_candidates c "
                "JOIN engram_data_keys k ON k.key_id = c.memory_id "
                "WHERE c.company = %s AND c.person = %s ORDER BY c.proposed_at, c.memory_id",
                (company, person),
            )
            return list(curs.fetchall())

    def due_candidates(self, now: Any, limit: int) -> list[Any]:
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT memory_id FROM engram_candidates WHERE expires_at <= %s ORDER BY expires_at LIMIT %s",
                (now, limit),
            ).fetchall()
        return [r["memory_id"] for r in rows]

    def closed_candidates_with_keys(self, limit: int) -> list[dict[str, Any]]:
        with self.datastore.get_connection() as conn:
            return list(conn.execute(
                "SELECT m.memory_id FROM engram_memories m JOIN engram_data_keys k ON k.key_id = m.memory_id "
                "WHERE m.status IN ('expired', 'rejected') LIMIT %s", (limit,),
            ).fetchall())

    def forget(self, forget_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT * FROM engram_forgets WHERE forget_id = %s", (forget_id,))
            head = curs.fetchone()
            curs.execute("SELECT * FROM engram_purge_copies WHERE forget_id = %s ORDER BY copy", (forget_id,))
            return head, list(curs.fetchall())
