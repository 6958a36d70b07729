"""Insights from Hindsight's observations: a judgment Hindsight consolidated from several facts
becomes a proposal when every fact it rests on comes from the current text of a memory of the group.

The group's bank is read, never another (`bank_for`). An observation's sources are facts, each
naming its document, which is a memory (document id = memory id). It is proposed only when every
source is a live fact of the bank, every document is a memory of the group, two or more memories
are cited, and each cited document holds the memory's current text now (Hindsight keeps a hash of
the text it was given; a document still holding an older revision, not yet replaced by the sync,
does not count). Hindsight's text is used in-process only: never logged, never in an error.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Container, Sequence

from engram.domain.insight import Group, Proposal
from engram.domain.text import is_acceptable_text

from .hindsight import HindsightClient, HindsightUnavailable, Unit, bank_for, memory_id_of
from .outage import Outage

log = logging.getLogger("engram.insights")

OBSERVATION = "observation"


def observed(units: Sequence[Unit], group: Group, current: Container[str] | None = None,
             max_text_bytes: int = 8192) -> list[tuple[str, tuple[str, ...]]]:
    """(text, memory ids in the group's order) of each observation resting on two or more of the
    group's memories and on nothing else; `current`: only these of them may be cited. One proposal
    per set of memories (the newest observation's, as Hindsight lists newest first)."""
    ids = {key: f.memory_id for f in group.facts if (key := memory_id_of(f.memory_id)) is not None}
    order = {key: i for i, key in enumerate(ids)}
    fact_memory = {u.id: memory_id_of(u.document_id) for u in units if u.kind != OBSERVATION}
    seen: set[frozenset[str]] = set()
    out = []
    for u in units:
        if u.kind != OBSERVATION or not u.source_fact_ids:
            continue
        memories = {fact_memory.get(f) for f in u.source_fact_ids}
        if None in memories or not memories <= ids.keys() or len(memories) < 2:
            continue  # a source outside the listing, outside the group, or a single memory
        cited = frozenset(m for m in memories if m is not None)
        if current is not None and not all(ids[m] in current for m in cited):
            continue
        text = u.text.strip()
        if cited in seen or not is_acceptable_text(text, max_text_bytes):
            continue
        seen.add(cited)
        out.append((text, tuple(ids[m] for m in sorted(cited, key=order.__getitem__))))
    return out


def text_hash(text: str) -> str:
    """How Hindsight 1.1.0 fingerprints a document's text (`content_hash`: SHA-256 of the UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class HindsightObservationProposer:
    """Reads one bank per group within `deadline` seconds; Hindsight down, slow or refusing: []."""

    name = "hindsight"

    def __init__(self, client: HindsightClient, *, deadline: float = 10.0, most_units: int = 5000,
                 max_text_bytes: int = 8192) -> None:
        self.client = client
        self.deadline = deadline
        self.most_units = most_units
        self.max_text_bytes = max_text_bytes
        # one line when Hindsight stops answering and one when it answers again, not one per group and try
        self._outage = Outage(log, "hindsight observations")

    def propose(self, group: Group) -> list[Proposal]:
        if len({f.memory_id for f in group.facts}) < 2:
            return []
        try:
            found = self._observed(group)
        except HindsightUnavailable as e:  # our own message: a status or an exception class, never text
            self._outage.failed(e, str(e))  # the group is tried again on a later round
            return []
        self._outage.ok()
        return [Proposal(text, memory_ids, self.name) for text, memory_ids in found]

    def _observed(self, group: Group) -> list[tuple[str, tuple[str, ...]]]:
        bank = bank_for(group.scope)
        started = time.monotonic()

        def left() -> float:
            remaining = self.deadline - (time.monotonic() - started)
            if remaining <= 0:
                raise HindsightUnavailable("deadline passed")
            return remaining

        candidates = observed(self.client.units(bank, deadline=left(), most=self.most_units), group,
                              max_text_bytes=self.max_text_bytes)
        if not candidates:
            return []
        texts = {f.memory_id: f.text for f in group.facts}
        current = set()
        for memory_id in sorted({m for _, cited in candidates for m in cited}):
            document = self.client.document(bank, memory_id_of(memory_id) or memory_id, deadline=left())
            if document is not None and document.get("content_hash") == text_hash(texts[memory_id]):
                current.add(memory_id)
        if not current:
            return []
        # Listed again after the documents were checked: a source fact of an older text, replaced in
        # between, is no longer listed, so an observation derived from it no longer maps.
        return observed(self.client.units(bank, deadline=left(), most=self.most_units), group, current,
                        self.max_text_bytes)
