"""A memory's links as its caller may see them (ADR 0020): the view says which memories were
co-mentioned with it; the access policy, asked of each linked memory as a memory read asks it, says
which of them this caller may know of. One the caller may not use is left out, never hinted at."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from engram.domain.access import Access
from engram.domain.links import CO_MENTION
from engram.domain.memory import Memory

from .ledger import Ledger
from .ports import LinkReads


class MemoryLinks:
    def __init__(self, ledger: Ledger, reads: LinkReads) -> None:
        self.ledger = ledger
        self.reads = reads

    def visible(self, access: Access, memory_id: UUID) -> list[dict[str, Any]]:
        usable: dict[str, bool] = {}
        items = []
        for link in self.reads.links_of(memory_id):
            other = link["memory_id"]
            if other not in usable:
                linked = self.ledger.get(UUID(other), Memory)
                usable[other] = linked is not None and access.may_use(linked.scope)
            if usable[other]:
                items.append({"memory_id": other, "kind": CO_MENTION, "status": link["status"],
                              "since": link["since"], "invalidated_at": link["invalidated_at"],
                              "reason": link["reason"]})
        return items
