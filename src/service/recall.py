"""Recall: the confirmed memories a caller may use right now, ranked, within a byte budget.

SQL ranks with BM25 over the blind term index; the meaning index (the default install's embedding
model, ADR 0040) finds the memories nearest the question's meaning, and Hindsight (when configured)
hints. With meaning, each memory's score fuses its words', its meaning's and Hindsight's, each scaled
to [0, 1] the same way in every request, and memories under the relevance floor are not returned; without
it, Hindsight's ranking is fused with SQL's by reciprocal rank. Every memory SQL did not find itself is
re-read from the recall view, re-unsealed and re-authorized here. Confirmed insights take their place by
score. The budget truncates the last item that fits and counts the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.adapters.blind_index import BlindIndex
from engram.contract.responses import RecallOut
from engram.domain.access import Access
from engram.domain.bundle import fit
from engram.domain.hints import SemanticHints, SemanticIndexUnavailable
from engram.domain.instant import check_instant
from engram.domain.memory_rules import CONFIRMED, check_tags
from engram.domain.rollout import OFF, SHADOW
from engram.domain.scope import Caller
from engram.domain.text import validate_text
from engram.domain.when import days_named
from engram.projections.recall_queries import RecallQueries

from .heavy import LARGE_RECALL, HeavyReads
from .insights import InsightService
from .ledger import Ledger
from .ports import MeaningIndex, Nearness, SemanticIndex
from .tally import Tally
from .views import opened, row_scope, unsealed


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def bm25_unit(raw: float) -> float:
    """A BM25 score mapped into [0, 1) the one way every recall answer shows it."""
    return raw / (raw + 1.0)


def _score(row: dict[str, Any]) -> float:
    raw = float(row.get("score") or 0.0)
    return raw if row.get("fused") or row.get("kind") == "insight" else bm25_unit(raw)


def _merged(rows: list[dict[str, Any]], insights: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insights take their place among the memory rows by score (each list is already best first)."""
    merged: list[dict[str, Any]] = []
    pending = list(insights)
    for row in rows:
        while pending and _score(pending[0]) > _score(row):
            merged.append(pending.pop(0))
        merged.append(row)
    return merged + pending


# Reciprocal rank fusion (Cormack et al.): k dampens the top ranks' lead; each list counts to this depth.
RRF_K = 60
FUSION_DEPTH = 50
FOLLOWER_SHARE = 0.8  # measured on bench/quality.py (ADR 0023)
# The index's ranking counts half as much as SQL's by default (`ENGRAM_HINDSIGHT_WEIGHT`): with an English
# embedding model its Chinese hints are noise, and an equal vote cost more in Chinese than it won in
# English (ADR 0023).
HINT_WEIGHT = 0.5


@dataclass(frozen=True)
class Fusion:
    """How words, meaning and Hindsight make one score in [0, 1] (ADR 0040; the constants measured on
    the tuning rounds of bench/meaning.py and bench/quality.py). Each leg gives a memory a value in
    [0, 1]: words BM25 as raw / (raw + 1), 0 when the words did not find it; meaning the similarity (the
    cosine as a z-score against unrelated text, `adapters.background`) scaled from `low` (0) to `high`
    (1); Hindsight its hint against the request's best. The score is the best leg's value, each leg
    weighted, plus `both` times the lesser of words and meaning; a memory not embedded yet is judged by
    its words alone, at their full weight (it is found at once by them). A memory with a vector scoring
    under `floor` is left out: the answer to a question about something never said is empty."""

    words: float = 0.5
    dated: float = 1.0  # words' weight when the question names a day: its day is a term, meaning cannot see it
    meaning: float = 1.0
    hindsight: float = 0.5
    low: float = 0.5
    high: float = 4.0
    both: float = 0.25
    floor: float = 0.3
    depth: int = FUSION_DEPTH

    def scaled(self, similarity: float) -> float:
        return min(1.0, max(0.0, (similarity - self.low) / (self.high - self.low)))

    def score(self, words: float, meaning: float | None, hint: float | None, dated: bool = False) -> float:
        # not embedded yet: judged by its words alone, at their full value, so a memory just written and
        # found by its words is not put behind older ones that only resemble the question
        weight = self.dated if dated or meaning is None else self.words
        best = max(weight * words, self.meaning * (meaning or 0.0), self.hindsight * (hint or 0.0))
        return min(1.0, best + (self.both * min(words, meaning) if meaning is not None else 0.0))


def visible_filters(access: Access, index: BlindIndex, as_of: datetime, tags: list[str] | None = None) -> dict[str, Any]:
    """What the recall view's searches filter on for this caller: their memories in their current
    scope, valid at `as_of`, holding all of `tags`."""
    caller, grants = access.caller, access.grants
    return {"company": caller.company, "person": caller.person, "as_of": as_of, "teams": sorted(grants.teams),
            # the views keep source ids blinded (ADR 0019): so are the ones they are compared with
            "sources": index.sources(caller.company, grants.sources),
            "revoked": index.sources(caller.company, grants.revoked_sources),
            "tags": index.tags(caller.company, tags or [])}


class RecallService:
    def __init__(self, ledger: Ledger, queries: RecallQueries, index: BlindIndex,
                 semantic: SemanticIndex | None = None, *, max_text_bytes: int = 8192,
                 insights: InsightService | None = None, hint_weight: float = HINT_WEIGHT,
                 meaning: MeaningIndex | None = None, floor: float = Fusion.floor,
                 heavy: HeavyReads | None = None) -> None:
        self.ledger = ledger
        self.heavy = heavy
        self.meaning = meaning
        self.fusion = Fusion(hindsight=hint_weight, floor=floor)
        self.queries = queries
        self.index = index
        self.semantic = semantic
        self.max_text_bytes = max_text_bytes
        self.insights = insights
        self.hint_weight = hint_weight
        self.degraded = Tally()  # recalls answered without the semantic index it has (/metrics)
        self.recalls = 0  # recalls asked of this service (background work gives way while it moves)

    def recall(self, caller: Caller, *, query: str, as_of: datetime | None, max_bytes: int, limit: int,
               tags: list[str] | None = None) -> RecallOut:
        """`tags`: only memories holding all of them (insights have none, so none is recalled then). More
        than `LARGE_RECALL` items is a heavy read: one at a time per person, in a few shared slots."""
        if limit > LARGE_RECALL and self.heavy is not None:
            with self.heavy.slot(caller):
                return self._recall(caller, query=query, as_of=as_of, max_bytes=max_bytes, limit=limit, tags=tags)
        return self._recall(caller, query=query, as_of=as_of, max_bytes=max_bytes, limit=limit, tags=tags)

    def _recall(self, caller: Caller, *, query: str, as_of: datetime | None, max_bytes: int, limit: int,
                tags: list[str] | None) -> RecallOut:
        self.recalls += 1
        validate_text(query, self.max_text_bytes, allow_empty=True)
        check_instant(as_of, "as_of")
        tags = check_tags(tags)
        empty: dict[str, Any] = {"items": [], "degraded": False, "bytes": 0, "omitted": 0}
        mode = self.ledger.modes.mode(caller.company)
        if mode == OFF or (mode == SHADOW and caller.role == "bot"):
            return RecallOut.model_validate({**empty, "mode": mode})
        if caller.is_administrative or limit <= 0:
            return RecallOut.model_validate(empty)
        access = self.ledger.access(caller)
        if access.use_paused:
            return RecallOut.model_validate({**empty, "paused": True})
        if not access.may_read:  # a removed bot finds nothing
            return RecallOut.model_validate(empty)
        filters = visible_filters(access, self.index, as_of or self.ledger.clock.now(), tags)
        # the question's embedding runs on the model's threads while Hindsight and the words are asked
        started = self.meaning.start(query) if self.meaning is not None and query.strip() else None
        hints, degraded = self._hints(access, query)
        days = days_named(query, filters["as_of"].date())
        terms, weights = self.index.recall_terms(caller.company, query, days)

        def search() -> list[dict[str, Any]]:
            return self.queries.search(terms=terms, weights=weights, limit=max(limit + 10, FUSION_DEPTH), **filters)

        searched = search() if started is None or terms else None
        near, unmeant = self._nearest(caller, query, filters, started)
        degraded = degraded or unmeant
        if degraded:  # a recall counts once, however many of its legs were late
            self.degraded.add()
        if near is not None and not terms:  # no word of the question is in the index: no word ranks
            found: list[dict[str, Any]] = []
        else:
            # searched is None: the model was down, and the question has no word in the index
            found = self._answered(searched if searched is not None else search(), filters, limit)
        if near is not None:
            rows = self._meant(access, near, hints, found, filters, limit, dated=bool(days))
        else:
            rows = self._fused(access, hints, found, filters) if hints else found
        if self.insights is not None and not tags:
            exact = self.index.query_terms(caller.company, query)
            rows = _merged(rows, self.insights.recallable(access, terms=exact, as_of=filters["as_of"]))
        items, total, omitted = self._bundle(access, rows, max_bytes, limit)
        return RecallOut.model_validate({"items": items, "degraded": degraded, "bytes": total, "omitted": omitted})

    def _hints(self, access: Access, query: str) -> tuple[SemanticHints, bool]:
        """Ranking hints from the semantic index, and whether recall is degraded (an index is
        configured but was down or slower than the deadline); without an index SQL ranks, undegraded."""
        if self.semantic is None or not query.strip():
            return SemanticHints(), False
        try:
            return self.semantic.hints(access.semantic_scopes(), query), False
        except SemanticIndexUnavailable:
            return SemanticHints(), True

    def _nearest(self, caller: Caller, query: str, filters: dict[str, Any],
                 started: Any) -> tuple[Nearness | None, bool]:
        """The memories nearest the question's meaning (None: no meaning index, or no question), and
        whether recall is degraded (the model did not answer within its deadline)."""
        if self.meaning is None or started is None:
            return None, False
        try:
            return self.meaning.nearest(caller.company, caller.person, query, as_of=filters["as_of"],
                                        teams=filters["teams"], sources=filters["sources"],
                                        revoked=filters["revoked"], depth=self.fusion.depth, started=started), False
        except SemanticIndexUnavailable:
            return None, True

    def _meant(self, access: Access, near: Nearness, hints: SemanticHints, found: list[dict[str, Any]],
               filters: dict[str, Any], limit: int, dated: bool = False) -> list[dict[str, Any]]:
        """Words, meaning and hints fused into one score (`Fusion`), best first, none under the floor.
        Memories SQL did not find are read here with the same filters, and authorized: only those whose
        meaning alone reaches the floor (their words found nothing, so meaning is all they score by), and
        of those the `limit` nearest, as no other could come into the answer."""
        fusion = self.fusion
        rows = {str(r["memory_id"]): r for r in found}
        words = {m: bm25_unit(float(r["score"] or 0.0)) for m, r in rows.items()}
        meant = [m for m, similarity in near.best
                 if m not in rows and fusion.meaning * fusion.scaled(similarity) >= fusion.floor][:limit]
        missing = sorted({*meant, *(m for m in hints.memory_ids() if m not in rows)})
        for r in (self.queries.by_ids(ids=missing, **filters) if missing else []):
            r = opened(self.ledger.keys, r)
            if r["status"] == CONFIRMED and access.may_use(row_scope(r)):
                rows[str(r["memory_id"])] = r
        hinted = hints.scores(set(rows)) if hints else {}
        scored, kept = {}, []
        for m, r in rows.items():
            similarity = near.similarity(m, r["revision"])
            scored[m] = fusion.score(words.get(m, 0.0), None if similarity is None else fusion.scaled(similarity),
                                     hinted.get(m), dated)  # Hindsight counts where it hinted
            # the floor is meaning's judgment: a memory not embedded yet that its words found is kept, as it
            # is found at once by them (read-your-writes)
            if scored[m] >= fusion.floor or similarity is None:
                kept.append(m)
        order = sorted(kept, key=lambda m: -scored[m])
        return [{**rows[m], "score": round(scored[m], 4), "fused": True} for m in order]

    def _answered(self, found: list[dict[str, Any]], filters: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """A question found by the query lends `FOLLOWER_SHARE` of its score to the memory said next in
        its conversation, which may be its answer ("Where do you live?" / "Austin, since 2019"). Only
        the questions among the first `limit` rows lend: further down, their answers would not rise into
        the answer (and each lending costs a lookup)."""
        asking = [str(r["memory_id"]) for r in found[:limit] if r.get("asks") and r["score"]]
        if not asking:
            return found
        score = {str(r["memory_id"]): float(r["score"]) for r in found}
        rows = {str(r["memory_id"]): r for r in found}
        lent: dict[str, float] = {}
        for follower in self.queries.followers(ids=asking, **filters):
            m = str(follower["memory_id"])
            lent[m] = lent.get(m, 0.0) + FOLLOWER_SHARE * score[str(follower["follows"])]
            rows.setdefault(m, follower)
        ranked = {m: score.get(m, 0.0) + lent.get(m, 0.0) for m in rows}
        order = sorted(rows, key=lambda m: -ranked[m])  # stable: SQL's order breaks ties
        return [{**rows[m], "score": ranked[m]} for m in order]

    def _fused(self, access: Access, hints: SemanticHints, found: list[dict[str, Any]],
               filters: dict[str, Any]) -> list[dict[str, Any]]:
        """Reciprocal rank fusion of the SQL ranking and the index's: each memory scores
        1/(k + rank) in each list it is in; the hinted memories SQL did not find are read (and
        authorized) here. Scores are scaled so a memory first in both lists scores 1."""
        keys = self.ledger.keys
        sql_rank = {str(r["memory_id"]): i for i, r in enumerate(found)}
        missing = sorted(m for m in hints.memory_ids() if m not in sql_rank)
        extra = [opened(keys, r) for r in self.queries.by_ids(ids=missing, **filters)] if missing else []
        rows = {str(r["memory_id"]): r for r in found}
        for r in extra:
            if r["status"] == CONFIRMED and access.may_use(row_scope(r)):
                rows[str(r["memory_id"])] = r
        scores = hints.scores(set(rows))  # SQL's rows are in scope by its filters; `_bundle` judges each again
        hint_rank = {m: i for i, m in enumerate(sorted(scores, key=lambda m: (-scores[m], m))[:FUSION_DEPTH])}
        fused: dict[str, float] = {}
        for m in rows:
            total = sum(weight / (RRF_K + rank + 1) for rank, weight in ((sql_rank.get(m), 1.0),
                                                                       (hint_rank.get(m), self.hint_weight))
                        if rank is not None)
            if total:
                fused[m] = total
        best = (1.0 + self.hint_weight) / (RRF_K + 1)
        # a tie (each list puts the other's first second) goes to the index's ranking: it reads meaning
        order = sorted(fused, key=lambda m: (-fused[m], hint_rank.get(m, len(hint_rank)), sql_rank.get(m, len(sql_rank))))
        return [{**rows[m], "score": round(fused[m] / best, 4), "fused": True} for m in order]

    def _bundle(self, access: Access, rows: list[dict[str, Any]], max_bytes: int,
                limit: int) -> tuple[list[dict[str, Any]], int, int]:
        """At most `limit` items within `max_bytes`: the last that fits is truncated, the rest counted."""
        items: list[dict[str, Any]] = []
        total = omitted = 0
        for row in rows:
            if len(items) + omitted >= limit:
                break
            if row.get("kind") == "insight":  # judged, unsealed and scored by the insight service
                if total >= max_bytes:
                    omitted += 1
                    continue
                text, evidence, size, truncated = fit(row["text"], row["evidence"], max_bytes - total)
                items.append({**row, "text": text, "evidence": evidence, **({"truncated": True} if truncated else {})})
                total += size
                continue
            if row["status"] != CONFIRMED:
                continue
            row = opened(self.ledger.keys, row)
            if not access.may_use(row_scope(row)):
                continue
            text, evidence = unsealed(self.ledger.keys, row)
            if text is None:
                continue
            if total >= max_bytes:
                omitted += 1  # the budget is spent: counted, never silently dropped
                continue
            text, evidence, size, truncated = fit(text, evidence, max_bytes - total)
            raw = float(row["score"] or 0.0)
            item = {
                "id": str(row["memory_id"]), "kind": "memory", "text": text, "revision": row["revision"],
                # the stretch this revision answers for: a later correction that superseded it ends it
                "valid_from": _iso(row["valid_from"]), "valid_to": _iso(row["answer_to"]),
                "time_uncertain": row["time_uncertain"], "evidence": evidence,
                "score": raw if row.get("fused") else round(bm25_unit(raw), 4),
            }
            if truncated:
                item["truncated"] = True
            items.append(item)
            total += size
        return items, total, omitted
