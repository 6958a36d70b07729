"""Reads over the recall and review views: BM25 search over the blind term index, lists, candidates
and the sweeper's due work. Rows come back sealed; the service unseals and authorizes each one.
Source ids in filters are blinded by the caller (`BlindIndex.source`, ADR 0019), as the views keep them."""

from __future__ import annotations

from typing import Any

# Measured on bench/quality.py (ADR 0023): chat turns are short, so length counts for less than the
# textbook 0.75.
BM25_K1 = 1.2
BM25_B = 0.4

def _tagged(column: str) -> str:
    """No tags asked, or the memory holds them all (blinded, `BlindIndex.tags`)."""
    return (f"(cardinality(%(tags)s::bigint[]) = 0 OR {column} IN (SELECT memory_id FROM engram_memories "
            "WHERE company = %(company)s AND person = %(person)s AND tag_terms @> %(tags)s::bigint[]))")


_SEARCH = """
WITH stats AS MATERIALIZED (
    SELECT greatest(answers, 1)::float8 AS n, greatest(total_len::float8 / greatest(answers, 1), 1) AS avgdl
    FROM engram_recall_stats WHERE company = %(company)s AND person = %(person)s
),
asked AS MATERIALIZED (
    SELECT * FROM unnest(%(terms)s::bigint[], %(weights)s::float8[]) AS q(term, weight)
),
hits AS MATERIALIZED (
    SELECT term, memory_id, revision, tf, doc_len
    FROM engram_recall_terms
    WHERE company = %(company)s AND person = %(person)s AND term = ANY(%(terms)s::bigint[])
      AND (visibility = 'general' OR (team = ANY(%(teams)s) AND source_blind = ANY(%(sources)s)))
      AND coalesce(source_blind, '') <> ALL(%(revoked)s)
      AND (answer_from IS NULL OR answer_from <= %(as_of)s)
      AND (answer_to IS NULL OR answer_to > %(as_of)s)
      AND """ + _tagged("memory_id") + """
),
df AS MATERIALIZED (SELECT term, count(*)::float8 AS df FROM hits GROUP BY term),
scored AS MATERIALIZED (
    SELECT h.memory_id, h.revision,
           sum(a.weight * ln(1 + greatest(s.n - df.df + 0.5, 0.5) / (df.df + 0.5))
               * h.tf * (%(k1)s + 1)
               / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.doc_len / s.avgdl))) AS score
    FROM hits h JOIN df USING (term) JOIN asked a USING (term) CROSS JOIN stats s
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
      AND (r.visibility = 'general' OR (r.team = ANY(%(teams)s) AND r.source_blind = ANY(%(sources)s)))
      AND coalesce(r.source_blind, '') <> ALL(%(revoked)s)
      AND (r.answer_from IS NULL OR r.answer_from <= %(as_of)s)
      AND (r.answer_to IS NULL OR r.answer_to > %(as_of)s)
      AND """ + _tagged("r.memory_id") + """
    ORDER BY r.at DESC
    LIMIT %(limit)s
)
"""

_BY_IDS = """
WITH scored AS (
    SELECT r.memory_id, r.revision, 0.0::float8 AS score
    FROM engram_recall_revisions r
    WHERE r.memory_id = ANY(%(ids)s::uuid[]) AND r.company = %(company)s AND r.person = %(person)s AND r.is_answer
      AND (r.visibility = 'general' OR (r.team = ANY(%(teams)s) AND r.source_blind = ANY(%(sources)s)))
      AND coalesce(r.source_blind, '') <> ALL(%(revoked)s)
      AND (r.answer_from IS NULL OR r.answer_from <= %(as_of)s)
      AND (r.answer_to IS NULL OR r.answer_to > %(as_of)s)
      AND """ + _tagged("r.memory_id") + """
)
"""

_FOLLOWERS = """
WITH scored AS (
    SELECT q.memory_id AS follows, r.memory_id, r.revision, 0.0::float8 AS score
    FROM engram_memories q
    CROSS JOIN LATERAL (
        SELECT n.memory_id FROM engram_memories n
        WHERE n.company = q.company AND n.person = q.person AND n.source_blind = q.source_blind
          AND n.occurred_at > q.occurred_at AND n.memory_id <> q.memory_id
        ORDER BY n.occurred_at, n.memory_id LIMIT 1
    ) nx
    JOIN engram_recall_revisions r ON r.memory_id = nx.memory_id AND r.is_answer
    WHERE q.memory_id = ANY(%(ids)s::uuid[]) AND q.asks AND q.company = %(company)s AND q.person = %(person)s
      AND (r.visibility = 'general' OR (r.team = ANY(%(teams)s) AND r.source_blind = ANY(%(sources)s)))
      AND coalesce(r.source_blind, '') <> ALL(%(revoked)s)
      AND (r.answer_from IS NULL OR r.answer_from <= %(as_of)s)
      AND (r.answer_to IS NULL OR r.answer_to > %(as_of)s)
      AND """ + _tagged("r.memory_id") + """
)
"""

_ROWS = """
SELECT s.memory_id, s.revision, s.score, r.sealed_text, r.answer_from, r.answer_to, r.time_uncertain,
       r.valid_from, r.valid_to, m.company, m.person, m.visibility, m.team, m.sealed_source, m.status, m.asks,
       coalesce(r.sealed_evidence, m.sealed_evidence) AS sealed_evidence, k.wrapped
FROM scored s
JOIN engram_recall_revisions r ON r.memory_id = s.memory_id AND r.revision = s.revision
JOIN engram_memories m ON m.memory_id = s.memory_id AND m.status = 'confirmed'
JOIN engram_data_keys k ON k.key_id = s.memory_id
ORDER BY s.score DESC, r.valid_from DESC NULLS LAST, r.at DESC
"""


_FOLLOWERS_ROWS = _FOLLOWERS + _ROWS.replace("SELECT s.memory_id,", "SELECT s.follows, s.memory_id,", 1)


class RecallQueries:
    """Reads for recall and lists. Rows come back sealed; the caller unseals."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore

    def search(self, *, company: str, person: str, terms: list[int], as_of: Any,
               teams: list[str], sources: list[str], revoked: list[str], limit: int,
               weights: list[float] | None = None, tags: list[int] | None = None) -> list[dict[str, Any]]:
        """BM25 over the blind terms, each weighted (1 when `weights` is None); no terms: the newest.
        `tags` (blinded): only memories holding all of them."""
        params = {
            "tags": tags or [],
            "company": company, "person": person, "terms": terms, "as_of": as_of,
            "weights": weights if weights is not None else [1.0] * len(terms),
            "teams": teams, "sources": sources, "revoked": revoked, "limit": limit, "k1": float(BM25_K1), "b": float(BM25_B),
        }
        sql = (_SEARCH if terms else _RECENT) + _ROWS
        with self.datastore.get_connection() as conn:  # autocommit: one round trip
            return list(conn.execute(sql, params, prepare=True).fetchall())

    def by_ids(self, *, ids: list[str], company: str, person: str, as_of: Any, teams: list[str],
               sources: list[str], revoked: list[str], tags: list[int] | None = None) -> list[dict[str, Any]]:
        """The same rows and filters as search, for memories the semantic index suggested."""
        params = {"ids": ids, "company": company, "person": person, "as_of": as_of, "teams": teams,
                  "sources": sources, "revoked": revoked, "tags": tags or []}
        with self.datastore.get_connection() as conn:
            return list(conn.execute(_BY_IDS + _ROWS, params).fetchall())

    def followers(self, *, ids: list[str], company: str, person: str, as_of: Any, teams: list[str],
                  sources: list[str], revoked: list[str], tags: list[int] | None = None) -> list[dict[str, Any]]:
        """For each of these memories that asks a question, the memory said next in its conversation
        (same source, the earliest said after it), with the same rows and filters as search, and
        `follows`: the question's id. The answer to a question rarely repeats its words."""
        params = {"ids": ids, "company": company, "person": person, "as_of": as_of, "teams": teams,
                  "sources": sources, "revoked": revoked, "tags": tags or []}
        with self.datastore.get_connection() as conn:
            return list(conn.execute(_FOLLOWERS_ROWS, params, prepare=True).fetchall())

    def list_memories(self, *, company: str, person: str, statuses: list[str], terms: list[int] | None,
                      after: tuple[Any, str] | None, limit: int, tags: list[int] | None = None) -> list[dict[str, Any]]:
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
        if tags:
            sql += "AND m.tag_terms @> %(tags)s::bigint[] "
            params["tags"] = tags
        if after is not None:
            sql += "AND (m.created_at, m.memory_id) < (%(after_at)s, %(after_id)s::uuid) "
            params["after_at"], params["after_id"] = after
        sql += "ORDER BY m.created_at DESC, m.memory_id DESC LIMIT %(limit)s"
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(sql, params)
            return list(curs.fetchall())

    def candidates(self, *, company: str, person: str, newest: int | None = None) -> list[dict[str, Any]]:
        """A person's pending candidates, oldest first; with `newest`, only that many of the latest."""
        with self.datastore.transaction(commit=False) as curs:
            if newest is None:
                curs.execute(
                    "SELECT c.*, k.wrapped FROM engram_candidates c "
                    "JOIN engram_data_keys k ON k.key_id = c.memory_id "
                    "WHERE c.company = %s AND c.person = %s ORDER BY c.proposed_at, c.memory_id",
                    (company, person),
                )
            else:
                curs.execute(
                    "SELECT * FROM (SELECT c.*, k.wrapped FROM engram_candidates c "
                    "JOIN engram_data_keys k ON k.key_id = c.memory_id "
                    "WHERE c.company = %s AND c.person = %s ORDER BY c.proposed_at DESC, c.memory_id DESC LIMIT %s) n "
                    "ORDER BY proposed_at, memory_id",
                    (company, person, newest),
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

    def of_source(self, *, company: str, person: str, source_blind: str, limit: int) -> list[dict[str, Any]]:
        """A person's memories (every status) from one source (`BlindIndex.source` of its id), for
        forgetting by source: those not yet forgotten first (so asking again always gets further), oldest first."""
        with self.datastore.get_connection() as conn:
            return list(conn.execute(
                "SELECT m.memory_id, m.company, m.person, m.visibility, m.team, m.sealed_source, m.status, k.wrapped "
                "FROM engram_memories m LEFT JOIN engram_data_keys k ON k.key_id = m.memory_id "
                "WHERE m.company = %s AND m.person = %s AND m.source_blind = %s "
                "ORDER BY m.status = 'forgotten', m.created_at, m.memory_id LIMIT %s",
                (company, person, source_blind, limit),
            ).fetchall())
