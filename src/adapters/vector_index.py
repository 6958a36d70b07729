"""Recall by meaning (ADR 0040): a person's vectors, unsealed into this process's memory when a recall
first needs them, and the query's nearest among those the caller's filters let through.

What is held is bounded (`most` vectors in all, the people least recently asked about go first) and
never stale: each search reads the person's generation first, one indexed row, and a generation other
than the one held means the vectors changed (one embedded, one forgotten, an answer's valid time moved),
so they are read again. A forget therefore stops every process ranking with its vector at their next
recall. Every memory found here is still re-read and re-authorized by the recall service, as any hint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from engram.domain.hints import SemanticIndexUnavailable
from engram.domain.insight import Group

from .background import Background
from .embedders import Embedder, EmbedderUnavailable, QueryEmbeddings
from .vectors import VectorStore, unseal_int8

log = logging.getLogger("engram.embeddings")


@dataclass
class Nearness:
    """A search's answer: the nearest memories, best first, with their similarity to the question (the
    cosine as a z-score against the background of the memory's script, `Background`), and the similarity
    of any answering revision of the person's that has a vector (None: not embedded yet; recall then
    judges it by its words)."""

    best: list[tuple[str, float]]
    scores: Any = None
    where: dict[tuple[str, int], int] | None = None

    def similarity(self, memory_id: str, revision: int) -> float | None:
        i = self.where.get((memory_id, revision)) if self.where is not None else None
        return None if i is None else float(self.scores[i])


@dataclass
class _Held:
    generation: int
    ids: list[str]
    revisions: list[int]
    matrix: np.ndarray  # (n, dim) int8, as stored
    inverse_norm: np.ndarray  # float32: 1 / each row's length, so a row's cosine is (row @ query) * this
    script: np.ndarray  # int8: each text's script (vectors.LATIN, CJK)
    general: np.ndarray  # bool
    team: list[str | None]
    source: list[str | None]
    start: list[datetime | None]
    end: list[datetime | None]
    where: dict[tuple[str, int], int]


ROWS_AT_ONCE = 64  # 96 KiB of floats a step: small enough for the allocator to reuse, never to hold on to


def _cosines(held: _Held, query: np.ndarray) -> np.ndarray:
    """Each held row's cosine with the (unit) query. The int8 rows are multiplied a few at a time: the
    whole matrix at once would make a float copy of it each recall (13 MB for 8,700 vectors), which the
    allocator of each request thread then keeps."""
    query = np.asarray(query, dtype=np.float32)
    out = np.empty(len(held.ids), dtype=np.float32)
    for i in range(0, len(out), ROWS_AT_ONCE):
        np.dot(held.matrix[i:i + ROWS_AT_ONCE].astype(np.float32), query, out=out[i:i + ROWS_AT_ONCE])
    return out * held.inverse_norm


class VectorIndex:
    """Nearest vectors of one person's answering revisions, by cosine (the vectors are unit length)."""

    def __init__(self, store: VectorStore, keys: Any, *, most: int = 200_000) -> None:
        self.store = store
        self.keys = keys
        self.most = most
        self._held: OrderedDict[tuple[str, str, str], _Held] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()
        self._loading: dict[tuple[str, str, str], threading.Lock] = {}
        self._unfinished: OrderedDict[tuple[str, str, str, str], tuple[int, bool]] = OrderedDict()

    def held(self) -> int:
        """How many vectors this process holds (/metrics)."""
        return self._count

    def unfinished(self, company: str, person: str, previous: str, model: str) -> bool:
        """`VectorStore.unfinished`, asked again only when the person's generation has moved."""
        generation = self.store.generation(company, person)
        key = (company, person, previous, model)
        with self._lock:
            known = self._unfinished.get(key)
        if known is not None and known[0] == generation:
            return known[1]
        answer = self.store.unfinished(company, person, previous, model)
        with self._lock:
            self._unfinished[key] = (generation, answer)
            while len(self._unfinished) > 10_000:
                self._unfinished.popitem(last=False)
        return answer

    def _person(self, company: str, person: str, model: str) -> _Held:
        key = (company, person, model)
        generation = self.store.generation(company, person)  # first: a change after it is seen next time
        with self._lock:
            held = self._held.get(key)
            if held is not None and held.generation == generation:
                self._held.move_to_end(key)
                return held
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:  # one load a person at a time; the others wait for it and take its result
            with self._lock:
                held = self._held.get(key)
                if held is not None and held.generation >= generation:
                    return held
            with self._lock:
                previous = self._held.get(key)
            held = self._load(company, person, model, generation, previous)
            with self._lock:
                old = self._held.pop(key, None)
                self._count -= len(old.ids) if old else 0
                if len(held.ids) <= self.most:
                    self._held[key] = held
                    self._count += len(held.ids)
                    while self._count > self.most and len(self._held) > 1:
                        _, dropped = self._held.popitem(last=False)
                        self._count -= len(dropped.ids)
                self._loading.pop(key, None)
            return held

    def _load(self, company: str, person: str, model: str, generation: int, previous: _Held | None) -> _Held:
        """The person's vectors as they are now: those held already (a vector of a revision never
        changes) are kept, and only the others are read and unsealed."""
        rows = self.store.person(company, person, model)
        had: dict[tuple[str, int], tuple[np.ndarray, int]] = {}  # int8 rows
        if previous is not None:
            had = {(m, r): (previous.matrix[i], int(previous.script[i]))
                   for i, (m, r) in enumerate(zip(previous.ids, previous.revisions, strict=True))}
        missing = [(r["memory_id"], r["revision"]) for r in rows if (str(r["memory_id"]), r["revision"]) not in had]
        sealed = {(r["memory_id"], r["revision"]): r for r in self.store.sealed(missing, model)} if missing else {}
        ids: list[str] = []
        revisions: list[int] = []
        vectors: list[np.ndarray] = []
        scripts: list[int] = []
        general: list[bool] = []
        team: list[str | None] = []
        source: list[str | None] = []
        start: list[datetime | None] = []
        end: list[datetime | None] = []
        for r in rows:
            m, revision = r["memory_id"], r["revision"]
            kept = had.get((str(m), revision))
            if kept is None:
                found = sealed.get((m, revision))
                key = self.keys.unwrap_row(m, found["wrapped"]) if found else None
                if found is None or key is None:  # forgotten since the first read
                    continue
                kept = unseal_int8(key, m, revision, model, found["sealed_vector"])
            vectors.append(kept[0])
            scripts.append(kept[1])
            ids.append(str(m))
            revisions.append(revision)
            general.append(r["visibility"] == "general")
            team.append(r["team"])
            source.append(r["source_blind"])
            start.append(r["answer_from"])
            end.append(r["answer_to"])
        matrix = np.vstack(vectors) if vectors else np.zeros((0, 1), dtype=np.int8)
        norms = np.asarray([float(np.linalg.norm(v.astype(np.float32))) for v in vectors], dtype=np.float32)
        inverse = (1.0 / np.where(norms > 0, norms, 1.0)).astype(np.float32)  # row by row: no float copy of all
        interned: dict[Any, Any] = {}  # a team's or source's id once, however many vectors name it
        team = [interned.setdefault(t, t) for t in team]
        source = [interned.setdefault(b, b) for b in source]
        where = {(m, r): i for i, (m, r) in enumerate(zip(ids, revisions, strict=True))}
        return _Held(generation, ids, revisions, matrix, inverse, np.asarray(scripts, dtype=np.int8),
                     np.asarray(general, dtype=bool), team, source, start, end, where)

    def search(self, company: str, person: str, model: str, query: np.ndarray, calibration: np.ndarray, *,
               as_of: datetime, teams: list[str], sources: list[str], revoked: list[str], depth: int) -> Nearness:
        """At most `depth` (memory id, similarity), best first, of the answers valid at `as_of` that the
        caller's filters (the recall query's own: general, or a granted team's granted source; no revoked
        source) let through. A memory with several answering revisions counts once, by its best."""
        held = self._person(company, person, model)
        if not held.ids or held.matrix.shape[1] != query.shape[0]:
            return Nearness([])
        cosines = _cosines(held, query)
        scores = (cosines - calibration[held.script, 0]) / calibration[held.script, 1]
        teams_, sources_, revoked_ = set(teams), set(sources), set(revoked)
        out: list[tuple[str, float]] = []
        seen: set[str] = set()
        for i in np.argsort(-scores, kind="stable"):
            if len(out) >= depth:
                break
            memory_id = held.ids[i]
            if memory_id in seen:
                continue
            if not held.general[i] and not (held.team[i] in teams_ and held.source[i] in sources_):
                continue
            if (held.source[i] or "") in revoked_:
                continue
            if (held.start[i] is not None and held.start[i] > as_of) or (held.end[i] is not None and held.end[i] <= as_of):
                continue
            seen.add(memory_id)
            out.append((memory_id, float(scores[i])))
        return Nearness(out, scores, held.where)


class Meaning:
    """Recall's semantic leg: the query embedded within its deadline, then its nearest vectors among the
    person's. Raises `SemanticIndexUnavailable` when the model did not answer in time.

    `previous`: the model whose vectors are stored from before a change of model (the packaged one, when
    the operator moves to their own). While a person's memories are re-embedded by the new model, their
    recalls rank with the previous model's vectors and a question embedded by it; once all of them have a
    vector of the new model, with the new one. One ranking never mixes the two spaces; a memory with no
    vector of the model ranking it is judged by its words."""

    def __init__(self, embedder: Embedder, index: VectorIndex, deadline_ms: float,
                 previous: Embedder | None = None) -> None:
        self.embedder = embedder
        self.index = index
        self.queries = QueryEmbeddings(embedder, deadline_ms)
        self.background = Background()
        self.previous = previous
        self._previous_queries = QueryEmbeddings(previous, deadline_ms) if previous is not None else None
        self._previous_held = False  # some vector of the previous model is stored: checked at warm, then now and then
        self._previous_checked = time.monotonic()

    def warm(self) -> None:
        """The model loaded and its background in hand; a model that does not answer now is warmed later
        (the embedding worker asks again), and recall ranks by words meanwhile. The previous model is
        loaded only where its vectors are still stored."""
        try:
            self.embedder.warm()
            self.background.load(self.embedder)
        except EmbedderUnavailable as e:
            log.warning("embedding model not ready (%s); recall ranks by words until it is", e)
        previous = self.previous
        # warm again (the worker's turns while the operator's model does not answer): the previous model once
        if self._previous_held or previous is None or previous.model == self.embedder.model:
            return
        if self.index.store.holds(previous.model):
            try:
                previous.warm()
                self.background.load(previous)
                self._previous_held = True
                log.info("recall ranks with %s for the people not yet re-embedded by %s", previous.model,
                         self.embedder.model)
            except EmbedderUnavailable as e:
                log.warning("previous embedding model not ready (%s); its vectors do not serve", e)

    def start(self, query: str) -> Any:
        """The question's embedding begun, for `nearest(started=...)`: the recall reads its words meanwhile."""
        return self.queries.start(query)

    def _ranking_model(self, company: str, person: str) -> tuple[Embedder, QueryEmbeddings] | None:
        """The previous model and its question embedder, while this person's re-embedding is not done."""
        previous = self.previous
        if not self._previous_held or previous is None or self._previous_queries is None:
            return None
        if time.monotonic() - self._previous_checked > 300:  # once tidied away (all re-embedded): no more asking
            self._previous_checked = time.monotonic()
            self._previous_held = self.index.store.holds(previous.model)
            if not self._previous_held:
                return None
        if self.index.unfinished(company, person, previous.model, self.embedder.model):
            return previous, self._previous_queries
        return None

    def nearest(self, company: str, person: str, query: str, *, as_of: datetime, teams: list[str],
                sources: list[str], revoked: list[str], depth: int, started: Any = None) -> Nearness:
        embedder, queries = self.embedder, self.queries
        earlier = self._ranking_model(company, person)
        if earlier is not None:
            (embedder, queries), started = earlier, None
        try:
            vector = queries.wait(started if started is not None else queries.start(query))
        except EmbedderUnavailable as e:
            raise SemanticIndexUnavailable(str(e)) from None
        except Exception as e:  # noqa: BLE001 - a model failing on one query degrades that recall, no more
            raise SemanticIndexUnavailable(type(e).__name__) from None
        calibration = self.background.calibration(embedder.model, vector)
        if calibration is None:
            raise SemanticIndexUnavailable("the model's background is not embedded yet")
        return self.index.search(company, person, embedder.model, vector, calibration, as_of=as_of, teams=teams,
                                 sources=sources, revoked=revoked, depth=depth)

    def close(self) -> None:
        self.queries.close()
        if self._previous_queries is not None:
            self._previous_queries.close()

    def resemblance(self, group: Group) -> np.ndarray | None:
        """(n, n): how alike in meaning the facts of this group are, pair by pair (what the local insight
        proposer would join by, bench/insights.py; ADR 0040 says why it does not): the cosine of their
        vectors as a z-score against the background, each way, and the lower of the two. NaN where either
        has no vector yet; None when the model's background is not loaded."""
        held = self.index._person(group.scope.company, group.scope.person, self.embedder.model)
        where = [held.where.get((f.memory_id, f.revision)) for f in group.facts]
        n = len(where)
        out = np.full((n, n), np.nan, dtype=np.float32)
        present = [i for i, w in enumerate(where) if w is not None]
        if len(present) < 2:
            return out
        rows = np.asarray([w for w in where if w is not None], dtype=np.intp)
        unit = held.matrix[rows].astype(np.float32) * held.inverse_norm[rows, None]
        calibration = self.background.calibrations(self.embedder.model, unit)
        if calibration is None:
            return None
        scripts = held.script[rows].astype(np.intp)
        # z[i, j]: j's cosine with i, against i's background of j's script
        z = (unit @ unit.T - calibration[:, scripts, 0]) / calibration[:, scripts, 1]
        out[np.ix_(present, present)] = np.minimum(z, z.T)
        return out

    def alike(self, company: str, person: str, text: str, *, least: float, most: int = 4) -> list[tuple[str, float]]:
        """The person's memories (id and cosine, nearest first, at most `most`) whose vector's cosine with
        this text's, both embedded as passages, is at least `least`: what may say the same thing in other
        words (ADR 0042). Empty when the model does not answer, or its space is not the stored one yet."""
        if self._ranking_model(company, person) is not None:
            return []  # this person's vectors are still the previous model's: another space
        held = self.index._person(company, person, self.embedder.model)
        if not held.ids:
            return []  # nothing confirmed to compare with: no embedding paid
        try:
            vector = self.embedder.passages([text])[0]
        except Exception as e:  # noqa: BLE001 - a model failing here leaves the words to judge alone
            log.warning("no embedding for a relation (%s); words only", type(e).__name__)
            return []
        if held.matrix.shape[1] != vector.shape[0]:
            return []
        cosines = _cosines(held, vector / (np.linalg.norm(vector) or 1.0))
        out: dict[str, float] = {}
        for i in np.argsort(-cosines, kind="stable"):
            if cosines[i] < least or len(out) >= most:
                break
            out.setdefault(held.ids[i], float(cosines[i]))  # a memory's best revision
        return list(out.items())

    def similarities(self, company: str, person: str, query: str) -> tuple[list[str], np.ndarray]:
        """Every vector of the person's with its similarity to `query`, unfiltered (bench/fusion.py's dumps)."""
        vector = self.embedder.query(query)
        calibration = self.background.calibration(self.embedder.model, vector)
        assert calibration is not None
        held = self.index._person(company, person, self.embedder.model)
        if not held.ids:
            return [], np.zeros(0, dtype=np.float32)
        cosines = _cosines(held, vector)
        return held.ids, (cosines - calibration[held.script, 0]) / calibration[held.script, 1]
