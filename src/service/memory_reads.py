"""A person's memories as they read them: one memory, its links and history, the list, the candidates,
a memory forget's status and the export. Every read is authorized for the caller, row by row."""

from __future__ import annotations

from typing import Any, cast
from uuid import UUID

from engram.adapters.blind_index import BlindIndex
from engram.contract.responses import CandidateList, ExportOut, History, InsightList, LinkList, MemoryList, MemoryOut
from engram.domain.access import Access
from engram.domain.clock import Clock
from engram.domain.errors import NotFound
from engram.domain.memory import Memory
from engram.domain.memory_rules import CONFIRMED, FORGOTTEN, check_tags
from engram.domain.scope import Caller
from engram.domain.text import validate_text

from .cursors import decode_cursor, encode_cursor
from .heavy import HeavyReads
from .ledger import Ledger
from .links import MemoryLinks
from .ports import Keys, MemoryQueries, PurgeReports
from .views import candidate_of_row, context_of_row, memory_of, memory_of_row, opened, row_scope, tags_of_row, unsealed


def parse_uuid(memory_id: str) -> UUID:
    try:
        return UUID(memory_id)
    except (ValueError, TypeError, AttributeError):
        raise NotFound("no such memory") from None


class MemoryReads:
    """The reads of `MemoryService`, over the attributes its constructor sets."""

    ledger: Ledger
    keys: Keys
    clock: Clock
    queries: MemoryQueries
    index: BlindIndex
    purge: PurgeReports
    links: MemoryLinks | None
    max_text_bytes: int
    heavy: HeavyReads | None

    def _load(self, access: Access, memory_id: str) -> Memory:
        """A memory the caller may use; anything else is indistinguishable from absent."""
        memory = self.ledger.get(parse_uuid(memory_id), Memory)
        if memory is None or not access.may_use(memory.scope):
            raise NotFound("no such memory")
        return memory

    # -- reads ---------------------------------------------------------------

    def get(self, caller: Caller, memory_id: str) -> MemoryOut:
        access = self.ledger.access(caller)
        memory = self._load(access, memory_id)
        more: dict[str, Any] = {"links": self.links.visible(access, memory.id) if self.links else []}
        if memory.purge_id is not None:  # the person follows it to each copy's purge
            more["purge_id"] = memory.purge_id
        return memory_of(memory, **more)

    def linked(self, caller: Caller, memory_id: str) -> LinkList:
        """The memories linked to this one that the caller may use (ADR 0020)."""
        access = self.ledger.access(caller)
        memory = self._load(access, memory_id)
        return LinkList.model_validate({"items": self.links.visible(access, memory.id) if self.links else []})

    def history(self, caller: Caller, memory_id: str) -> History:
        """Every event of the memory, oldest first, each with the text it set (null once forgotten)."""
        return History.model_validate({"events": self._events(caller, memory_id)})

    def _events(self, caller: Caller, memory_id: str) -> list[dict[str, Any]]:
        memory = self._load(self.ledger.access(caller), memory_id)
        events = []
        revision = 1
        for e in cast(list[Memory.Event], list(self.ledger.store.events.get(memory.id))):
            text = None
            if isinstance(e, Memory.Created):
                text = e.text
            elif isinstance(e, Memory.Corrected):
                revision, text = e.revision, e.text
            elif isinstance(e, Memory.Confirmed) and e.edited:
                text = e.text
            entry = {"type": type(e).__name__, "at": e.timestamp, "actor": e.actor, "revision": revision, "text": text}
            if isinstance(e, Memory.Corrected):
                entry.update(reason=e.reason, mode=e.mode, valid_from=e.valid_from, valid_to=e.valid_to)
            if isinstance(e, (Memory.Created, Memory.Corrected)) and e.evidence is not None:
                entry["evidence"] = e.evidence  # older quotes stay here, in history only
            events.append(entry)
        return events

    def list_memories(self, caller: Caller, *, q: str | None, limit: int, cursor: str | None,
                      status: str | None = None, tags: list[str] | None = None) -> MemoryList:
        tags = check_tags(tags)
        access = self.ledger.access(caller)
        if not access.sees_memories:
            return MemoryList(items=[], next_cursor=None)
        statuses = [CONFIRMED] if status is None else ([status] if status != "all" else [CONFIRMED, FORGOTTEN])
        if q:
            validate_text(q, self.max_text_bytes)
        terms = self.index.query_terms(caller.company, q) if q else None
        after = decode_cursor(cursor, UUID) if cursor else None
        rows = self.queries.list_memories(company=caller.company, person=caller.person, statuses=statuses,
                                          terms=terms, after=after, limit=limit + 1,
                                          tags=self.index.tags(caller.company, tags) if tags else None)
        items = []
        for row in rows[:limit]:
            row = opened(self.keys, row)
            if not access.may_use(row_scope(row)):
                continue
            text, evidence = (None, []) if row["status"] == FORGOTTEN else unsealed(self.keys, row)
            items.append(memory_of_row(row, text, evidence, tags_of_row(self.keys, row)))
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last["created_at"], str(last["memory_id"]))
        return MemoryList(items=items, next_cursor=next_cursor)

    def candidates(self, caller: Caller) -> CandidateList:
        access = self.ledger.access(caller)
        if not access.sees_memories:
            return CandidateList(items=[])
        items = []
        for row in self.queries.candidates(company=caller.company, person=caller.person):
            row = opened(self.keys, row)
            if access.may_use(row_scope(row)):
                items.append(candidate_of_row(row, *unsealed(self.keys, row), context_of_row(self.keys, row)))
        return CandidateList.model_validate({"items": items})

    def forget_status(self, caller: Caller, forget_id: str) -> dict[str, Any]:
        head, copies = self.purge.report(forget_id)
        if head is None or head["company"] != caller.company or head["person"] != caller.person \
                or caller.is_administrative or not self.ledger.access(caller).may_read:
            raise NotFound("no such forget request")
        return {"forget_id": forget_id, "memory_id": str(head["memory_id"]),
                "status": self.purge.status_of(copies), "copies": copies}

    def export(self, caller: Caller, insights: InsightList) -> ExportOut:
        """Every memory the person holds with its history and the revision that answers now, and
        `insights` (the insights service's list for them). A heavy read (`service.heavy`)."""
        if self.heavy is None:
            return self._export(caller, insights)
        with self.heavy.slot(caller):
            return self._export(caller, insights)

    def _export(self, caller: Caller, insights: InsightList) -> ExportOut:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.list_memories(caller, q=None, limit=200, cursor=cursor)
            now = self.clock.now()
            for listed in page.items:
                item = listed.model_dump(exclude_unset=True)
                item["history"] = self._events(caller, listed.id)
                memory = self.ledger.get(UUID(listed.id), Memory)
                item["answer"] = memory.answer_at(now) if memory is not None else None  # what recall answers now
                items.append(item)
            cursor = page.next_cursor
            if not cursor:
                break
        return ExportOut.model_validate({"exported_at": self.clock.now(), "company": caller.company,
                                         "person": caller.person, "memories": items, "insights": insights.items})
