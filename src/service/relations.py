"""Which of the person's own memories a new statement repeats or changes (ADR 0041): the recall view's
words search finds the few memories it could be about (with the words of the slot it fills, so that
"I moved to Lisbon" finds "I live in Berlin"), and the domain's rules judge each pair in clear, in
memory. Only memories of the same person and scope are ever compared."""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from engram.adapters.blind_index import BlindIndex
from engram.domain.access import Access
from engram.domain.clock import Clock
from engram.domain.relation import DUPLICATE, UPDATE, Statement, relate, same_values, search_words
from engram.domain.scope import Scope

from .ports import Keys
from .recall import visible_filters
from .views import opened, row_scope, unsealed

DEPTH = 8  # the best words matches looked at; the rules decide among them
PENDING_DEPTH = 500  # the newest pending candidates a new one may fold into
# two statements whose passage vectors are at least this alike, and which name the same numbers, names
# and days, say the same thing (measured on labelled pairs, bench/relations.py --meaning; ADR 0041)
MEANING_DUPLICATE = 0.965
# with a model configured, the memories it is asked about: the words' and the vectors' nearest, at most
# ASKED of them, those of the vectors from this cosine (ADR 0042)
MEANING_ASK = 0.83  # 5% of the tune pairs labelled update sit under 0.84 (bench/relations.py)
ASKED = 3


class Alike(Protocol):
    def alike(self, company: str, person: str, text: str, *, least: float,
              most: int = 4) -> list[tuple[str, float]]: ...


class Judge(Protocol):
    def judge(self, company: str, person: str, new: str, olds: list[str]) -> list[str | None]: ...


class RelationReads(Protocol):
    def search(self, *, company: str, person: str, terms: list[int], as_of: Any, teams: list[str],
               sources: list[str], revoked: list[str], limit: int, weights: list[float] | None = None,
               tags: list[int] | None = None) -> list[dict[str, Any]]: ...

    def candidates(self, *, company: str, person: str, newest: int | None = None) -> list[dict[str, Any]]: ...

    def by_ids(self, *, ids: list[str], company: str, person: str, as_of: Any, teams: list[str],
               sources: list[str], revoked: list[str], tags: list[int] | None = None) -> list[dict[str, Any]]: ...


def same_place(a: Scope, b: Scope) -> bool:
    """One scope: the same visibility and team, and for a restricted memory the same source."""
    return a.visibility == b.visibility and a.team == b.team and (
        a.visibility == "general" or a.source_id == b.source_id)


class Relations:
    def __init__(self, keys: Keys, queries: RelationReads, index: BlindIndex, clock: Clock,
                 meaning: Alike | None = None, judge: Judge | None = None) -> None:
        self.keys = keys
        self.queries = queries
        self.index = index
        self.clock = clock
        self.meaning = meaning
        self.judge = judge

    def confirmed(self, access: Access, scope: Scope, text: str, *, by_meaning: bool = False) -> dict[str, str] | None:
        """`{"kind", "memory_id"}` for the confirmed memory in `scope` this text repeats (first choice)
        or changes, or None. `by_meaning` (learning's, in the background): the memories nearest in
        meaning are judged too, and where neither the rules nor the vectors say anything, the model when
        one is configured (an embedding and a metered call: a request to remember pays neither)."""
        caller = access.caller
        filters = visible_filters(access, self.index, self.clock.now())
        new = Statement(text)  # its forms worked out once, for every memory it is compared with
        terms, weights = self.index.recall_terms(caller.company, search_words(new))
        rows = self.queries.search(terms=terms, weights=weights, limit=DEPTH, **filters) if terms else []
        olds: dict[str, str | None] = {}  # unsealed as they are judged: a duplicate found first ends it
        update: dict[str, str] | None = None
        for row in rows:
            memory_id = str(row["memory_id"])
            old = olds[memory_id] = self._comparable(access, scope, row)
            kind = relate(new, old) if old else None
            if kind == DUPLICATE:
                return {"kind": DUPLICATE, "memory_id": memory_id}
            if kind == UPDATE and update is None:
                update = {"kind": UPDATE, "memory_id": memory_id}
        if not by_meaning or update is not None:
            return update
        least = MEANING_ASK if self.judge is not None else MEANING_DUPLICATE
        near = self.meaning.alike(caller.company, caller.person, text, least=least) if self.meaning else []
        missing = [i for i, _ in near if i not in olds]
        if missing:
            olds.update({str(r["memory_id"]): self._comparable(access, scope, r)
                         for r in self.queries.by_ids(ids=missing, **filters)})
        for memory_id, cosine in near:  # nearest first: alike, and naming the same values
            old = olds.get(memory_id)
            if old and cosine >= MEANING_DUPLICATE and same_values(text, old):
                return {"kind": DUPLICATE, "memory_id": memory_id}
        if self.judge is None:
            return None
        nearest_first = dict.fromkeys([*(i for i, _ in near), *olds])
        asked = [(i, old) for i in nearest_first if (old := olds.get(i))][:ASKED]
        kinds = self.judge.judge(caller.company, caller.person, text, [old for _, old in asked])
        for kind in (DUPLICATE, UPDATE):
            for (memory_id, _old), said in zip(asked, kinds, strict=False):
                if said == kind:
                    return {"kind": kind, "memory_id": memory_id}
        return None

    def pending_twin(self, access: Access, scope: Scope, text: str) -> UUID | None:
        """A pending candidate of the same person and scope that says the same thing, newest first."""
        caller = access.caller
        rows = self.queries.candidates(company=caller.company, person=caller.person, newest=PENDING_DEPTH)
        new = Statement(text)
        for row in reversed(rows):
            if self._judge(access, scope, new, row) == DUPLICATE:
                return UUID(str(row["memory_id"]))
        return None

    def _judge(self, access: Access, scope: Scope, new: Statement, row: dict[str, Any]) -> str | None:
        old = self._comparable(access, scope, row)
        return relate(new, old) if old else None

    def _comparable(self, access: Access, scope: Scope, row: dict[str, Any]) -> str | None:
        """The row's text, when it is the same person's in the same place and the caller may use it."""
        row = opened(self.keys, row)
        if row["key"] is None:
            return None
        found = row_scope(row)
        if not same_place(found, scope) or not access.may_use(found):
            return None
        old, _evidence = unsealed(self.keys, row)
        return old or None
