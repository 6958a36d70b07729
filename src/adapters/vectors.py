"""Vectors at rest (ADR 0040): each answering revision's embedding, int8 with its scale, sealed under the
memory's data key and bound to its memory, revision and model, so no row can be read once the key is gone
or passed off as another's. The backlog of revisions to embed, and each person's generation (a number that
changes whenever the vectors a recall may rank with change) live beside them."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from .crypto import seal, unseal

_HEAD = struct.Struct("<Bf")  # the text's script, the components' scale

LATIN, CJK = 0, 1  # a memory's script: recall calibrates its similarity against unrelated text in it
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")


def script_of(text: str) -> int:
    """CJK when at least a fifth of the text's letters are CJK characters (Chinese that names an English
    place is still Chinese), else LATIN: one model's cosines run higher between CJK texts than between
    Latin ones, so each is judged against its own background."""
    letters = len(_LETTER.findall(text))
    return CJK if letters and len(_CJK.findall(text)) * 5 >= letters else LATIN


def pack(vector: Any, script: int = LATIN) -> bytes:
    """A unit vector as int8 components, one float32 scale and its text's script: 389 bytes for 384
    dimensions, and a cosine within about 0.002 of the float one."""
    v = np.asarray(vector, dtype=np.float32)
    top = float(np.max(np.abs(v))) if v.size else 0.0
    scale = top / 127.0 if top > 0 else 1.0
    q = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
    return _HEAD.pack(script, scale) + q.tobytes()


def unpack(blob: bytes) -> tuple[np.ndarray, int]:
    """The unit vector and its text's script."""
    q, script = unpack_int8(blob)
    v = q.astype(np.float32)
    norm = float(np.linalg.norm(v))
    return (v / norm if norm > 0 else v), script


def unpack_int8(blob: bytes) -> tuple[np.ndarray, int]:
    """The int8 components as stored (the scale drops out of a cosine) and the text's script: what a
    process holds in memory, a quarter of the floats' size."""
    script, _scale = _HEAD.unpack_from(blob)
    return np.frombuffer(blob, dtype=np.int8, offset=_HEAD.size).copy(), script


def _aad(memory_id: Any, revision: int, model: str) -> bytes:
    return f"vector:{model}:{memory_id}:{revision}".encode()


def seal_vector(key: bytes, memory_id: Any, revision: int, model: str, vector: Any, script: int = LATIN) -> bytes:
    return seal(key, pack(vector, script), _aad(memory_id, revision, model))


def unseal_vector(key: bytes, memory_id: Any, revision: int, model: str, blob: bytes) -> tuple[np.ndarray, int]:
    return unpack(unseal(key, bytes(blob), _aad(memory_id, revision, model)))


def unseal_int8(key: bytes, memory_id: Any, revision: int, model: str, blob: bytes) -> tuple[np.ndarray, int]:
    return unpack_int8(unseal(key, bytes(blob), _aad(memory_id, revision, model)))


class VectorStore:
    """The SQL of the vector tables. Rows come back sealed; keys come wrapped, joined from the key store,
    so a row whose key is gone comes back without one (and is never unsealed)."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore

    def lease(self, model: str, limit: int, seconds: float, now: datetime) -> list[dict[str, Any]]:
        """Up to `limit` revisions of the backlog nobody else holds, leased for `seconds`, oldest first,
        with what embedding them needs: the sealed text (None once the revision no longer answers or
        its memory is gone) and the wrapped key (None once destroyed)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "WITH due AS (SELECT memory_id, revision FROM engram_vector_backlog "
                "  WHERE lease_until IS NULL OR lease_until < %(now)s ORDER BY queued_at LIMIT %(limit)s "
                "  FOR UPDATE SKIP LOCKED) "
                "UPDATE engram_vector_backlog b SET lease_until = %(now)s + make_interval(secs => %(seconds)s), "
                "  attempts = b.attempts + 1 FROM due WHERE b.memory_id = due.memory_id AND b.revision = due.revision "
                "RETURNING b.memory_id, b.revision, b.attempts",
                {"now": now, "limit": limit, "seconds": seconds})
            leased = curs.fetchall()
            if not leased:
                return []
            curs.execute(
                "SELECT l.memory_id, l.revision, l.attempts, r.company, r.person, "
                "  CASE WHEN r.is_answer THEN r.sealed_text END AS sealed_text, k.wrapped, "
                "  EXISTS (SELECT 1 FROM engram_vectors v WHERE v.memory_id = l.memory_id "
                "          AND v.revision = l.revision AND v.model = %s) AS embedded "
                "FROM unnest(%s::uuid[], %s::int[], %s::int[]) AS l(memory_id, revision, attempts) "
                "LEFT JOIN engram_recall_revisions r ON r.memory_id = l.memory_id AND r.revision = l.revision "
                "LEFT JOIN engram_data_keys k ON k.key_id = l.memory_id",
                (model, [r["memory_id"] for r in leased], [r["revision"] for r in leased],
                 [r["attempts"] for r in leased]))
            return list(curs.fetchall())

    def store(self, model: str, vectors: Sequence[tuple[Any, int, str, str, bytes, bool]],
              done: Iterable[tuple[Any, int]], now: datetime) -> int:
        """Write the vectors made (memory, revision, company, person, sealed, cut) whose revision still
        answers and whose key still exists (a forget while the batch was embedded leaves nothing behind),
        take `done` off the backlog, and move the generation of each person whose vectors changed.
        Returns how many vectors were written."""
        done = list(done)
        with self.datastore.transaction(commit=True) as curs:
            written = 0
            if vectors:
                curs.execute(
                    "INSERT INTO engram_vectors (memory_id, revision, model, company, person, sealed_vector, cut, "
                    "  embedded_at) "
                    "SELECT u.memory_id, u.revision, %s, u.company, u.person, u.sealed, u.cut, %s "
                    "FROM unnest(%s::uuid[], %s::int[], %s::text[], %s::text[], %s::bytea[], %s::bool[]) "
                    "  AS u(memory_id, revision, company, person, sealed, cut) "
                    "JOIN engram_recall_revisions r ON r.memory_id = u.memory_id AND r.revision = u.revision "
                    "  AND r.is_answer "
                    "JOIN engram_data_keys k ON k.key_id = u.memory_id "
                    "ON CONFLICT DO NOTHING RETURNING company, person",
                    (model, now, *[[v[i] for v in vectors] for i in range(6)]))
                written = int(curs.rowcount or 0)
                owners = {(r["company"], r["person"]) for r in curs.fetchall()}
                self.bump_in(curs, owners)
            if done:
                curs.execute(
                    "DELETE FROM engram_vector_backlog b USING unnest(%s::uuid[], %s::int[]) AS d(memory_id, revision) "
                    "WHERE b.memory_id = d.memory_id AND b.revision = d.revision",
                    ([d[0] for d in done], [d[1] for d in done]))
        return written

    @staticmethod
    def bump_in(curs: Any, owners: Iterable[tuple[str, str]]) -> None:
        """A new generation for each of these people, in a fixed order (concurrent writers never deadlock)."""
        ordered = sorted(set(owners))
        if ordered:
            curs.execute(
                "INSERT INTO engram_vector_generations (company, person, generation) "
                "SELECT c, p, nextval('engram_vector_generation_seq') FROM unnest(%s::text[], %s::text[]) AS o(c, p) "
                "ON CONFLICT (company, person) DO UPDATE SET generation = EXCLUDED.generation",
                ([o[0] for o in ordered], [o[1] for o in ordered]))

    @staticmethod
    def queue_in(curs: Any, revisions: Sequence[tuple[Any, int]]) -> None:
        """Revisions that now answer, to be embedded (already queued or embedded: the worker sees so)."""
        if revisions:
            curs.execute(
                "INSERT INTO engram_vector_backlog (memory_id, revision) "
                "SELECT * FROM unnest(%s::uuid[], %s::int[]) ON CONFLICT DO NOTHING",
                ([r[0] for r in revisions], [r[1] for r in revisions]))

    @staticmethod
    def delete_in(curs: Any, memory_id: Any) -> int:
        """A memory's vectors and backlog rows go (its forget, rejection or expiry); how many vectors."""
        curs.execute("DELETE FROM engram_vector_backlog WHERE memory_id = %s", (memory_id,))
        curs.execute("DELETE FROM engram_vectors WHERE memory_id = %s", (memory_id,))
        return int(curs.rowcount or 0)

    def backfill(self, model: str) -> int:
        """Queue every answering revision without a vector of `model` (a new install of this version,
        a new model, a rebuilt view): the worker embeds them in the background. Returns how many."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "INSERT INTO engram_vector_backlog (memory_id, revision) "
                "SELECT r.memory_id, r.revision FROM engram_recall_revisions r WHERE r.is_answer "
                "AND NOT EXISTS (SELECT 1 FROM engram_vectors v WHERE v.memory_id = r.memory_id "
                "                AND v.revision = r.revision AND v.model = %s) "
                "ON CONFLICT DO NOTHING", (model,))
            return int(curs.rowcount or 0)

    def tidy(self, model: str) -> int:
        """Vectors no recall can use any more: those whose key is gone (a restored backup's, say) and, once
        nothing is left to embed, those of other models. Returns how many went."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("DELETE FROM engram_vectors v WHERE NOT EXISTS "
                         "(SELECT 1 FROM engram_data_keys k WHERE k.key_id = v.memory_id)")
            gone = int(curs.rowcount or 0)
            curs.execute("DELETE FROM engram_vectors WHERE model <> %s "
                         "AND NOT EXISTS (SELECT 1 FROM engram_vector_backlog)", (model,))
            return gone + int(curs.rowcount or 0)

    def holds(self, model: str) -> bool:
        """Whether any vector of `model` is stored (a previous model's, while a new one re-embeds)."""
        with self.datastore.get_connection() as conn:
            return conn.execute("SELECT 1 FROM engram_vectors WHERE model = %s LIMIT 1", (model,)).fetchone() is not None

    def unfinished(self, company: str, person: str, previous: str, model: str) -> bool:
        """Whether one of this person's answering revisions has a vector of `previous` and none of `model`
        yet: their re-embedding is not done, so their recalls rank with `previous` still."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM engram_vectors o "
                "  JOIN engram_recall_revisions r ON r.memory_id = o.memory_id AND r.revision = o.revision "
                "    AND r.is_answer "
                "  WHERE o.company = %s AND o.person = %s AND o.model = %s AND NOT EXISTS ("
                "    SELECT 1 FROM engram_vectors n WHERE n.memory_id = o.memory_id AND n.revision = o.revision "
                "      AND n.model = %s)) AS unfinished", (company, person, previous, model)).fetchone()
        return bool(row and row["unfinished"])

    def backlog(self) -> int:
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT count(*) AS n FROM engram_vector_backlog").fetchone()
        return int(row["n"]) if row else 0

    def generation(self, company: str, person: str) -> int:
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT generation FROM engram_vector_generations WHERE company = %s AND person = %s",
                               (company, person), prepare=True).fetchone()
        return int(row["generation"]) if row else 0

    def person(self, company: str, person: str, model: str) -> list[dict[str, Any]]:
        """Which of this person's answering revisions have a vector of `model` whose key still exists,
        with what a recall filters on (no vector: `sealed` reads those)."""
        with self.datastore.get_connection() as conn:
            return list(conn.execute(
                "SELECT v.memory_id, v.revision, r.visibility, r.team, r.source_blind, r.answer_from, r.answer_to "
                "FROM engram_vectors v "
                "JOIN engram_recall_revisions r ON r.memory_id = v.memory_id AND r.revision = v.revision AND r.is_answer "
                "JOIN engram_data_keys k ON k.key_id = v.memory_id "
                "WHERE v.company = %s AND v.person = %s AND v.model = %s",
                (company, person, model), prepare=True).fetchall())

    def sealed(self, revisions: Sequence[tuple[Any, int]], model: str) -> list[dict[str, Any]]:
        """The sealed vectors of these revisions, with their keys wrapped (none whose key is gone)."""
        with self.datastore.get_connection() as conn:
            return list(conn.execute(
                "SELECT v.memory_id, v.revision, v.sealed_vector, k.wrapped "
                "FROM unnest(%s::uuid[], %s::int[]) AS w(memory_id, revision) "
                "JOIN engram_vectors v ON v.memory_id = w.memory_id AND v.revision = w.revision AND v.model = %s "
                "JOIN engram_data_keys k ON k.key_id = v.memory_id",
                ([r[0] for r in revisions], [r[1] for r in revisions], model)).fetchall())
