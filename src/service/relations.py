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
from engram.domain.relation import DUPLICATE, UPDATE, relate, search_words
from engram.domain.scope import Scope

from .ports import Keys
from .recall import visible_filters
from .views import opened, row_scope, unsealed

DEPTH = 8  # the best words matches looked at; the rules decide among them
PENDING_DEPTH = 500  # the newest pending candidates a new one may fold into


class RelationReads(Protocol):
    def search(self, *, company: str, person: str, terms: list[int], as_of: Any, teams: list[str],
               sources: list[str], revoked: list[str], limit: int, weights: list[float] | None = None,
               tags: list[int] | None = None) -> list[dict[str, Any]]: ...

    def candidates(self, *, company: str, person: str, newest: int | None = None) -> list[dict[str, Any]]: ...


def same_place(a: Scope, b: Scope) -> bool:
    """One scope: the same visibility and team, and for a restricted memory the same source."""
    return a.visibility == b.visibility and a.team == b.team and (
        a.visibility == "general" or a.source_id == b.source_id)


class Relations:
    def __init__(self, keys: Keys, queries: RelationReads, index: BlindIndex, clock: Clock) -> None:
        self.keys = keys
        self.queries = queries
        self.index = index
        self.clock = clock

    def confirmed(self, access: Access, scope: Scope, text: str) -> dict[str, str] | None:
        """`{"kind", "memory_id"}` for the confirmed memory in `scope` this text repeats (first choice)
        or changes, or None."""
        caller = access.caller
        terms, weights = self.index.recall_terms(caller.company, search_words(text))
        if not terms:
            return None
        rows = self.queries.search(terms=terms, weights=weights, limit=DEPTH,
                                   **visible_filters(access, self.index, self.clock.now()))
        update: dict[str, str] | None = None
        for row in rows:
            kind = self._judge(access, scope, text, row)
            if kind == DUPLICATE:
                return {"kind": DUPLICATE, "memory_id": str(row["memory_id"])}
            if kind == UPDATE and update is None:
                update = {"kind": UPDATE, "memory_id": str(row["memory_id"])}
        return update

    def pending_twin(self, access: Access, scope: Scope, text: str) -> UUID | None:
        """A pending candidate of the same person and scope that says the same thing, newest first."""
        caller = access.caller
        rows = self.queries.candidates(company=caller.company, person=caller.person, newest=PENDING_DEPTH)
        for row in reversed(rows):
            if self._judge(access, scope, text, row) == DUPLICATE:
                return UUID(str(row["memory_id"]))
        return None

    def _judge(self, access: Access, scope: Scope, text: str, row: dict[str, Any]) -> str | None:
        row = opened(self.keys, row)
        if row["key"] is None:
            return None
        found = row_scope(row)
        if not same_place(found, scope) or not access.may_use(found):
            return None
        old, _evidence = unsealed(self.keys, row)
        return relate(text, old) if old else None
