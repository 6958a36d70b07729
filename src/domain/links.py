"""Links between a person's memories: two memories are co-mentioned while both cite one message.

A memory cites the messages its current evidence names, from the event that gave it that evidence
until a correction gives it other evidence or its life ends. Two such stretches of one message make a
link for as long as both last; whichever ends first invalidates it, and says why (ADR 0020).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

CO_MENTION = "co_mention"

# Why a memory stopped citing a message, and so why its links were invalidated.
CORRECTED = "corrected"
FORGOTTEN = "forgotten"
REJECTED = "rejected"
EXPIRED = "expired"


@dataclass(frozen=True)
class Citation:
    """A stretch of one memory's life during which its evidence cited some messages."""

    memory_id: str
    cited_from: datetime
    cited_to: datetime | None = None
    reason: str | None = None  # why it ended; None while it lasts


@dataclass(frozen=True)
class Link:
    since: datetime
    invalidated_at: datetime | None
    reason: str | None

    @property
    def status(self) -> str:
        return "active" if self.invalidated_at is None else "invalidated"


def co_mention(a: Citation, b: Citation) -> Link | None:
    """The link two citations of one message make: from the later start to the earlier end, with that
    end's reason; None when they never overlapped. The same whichever is given first, so the order in
    which the two memories' events were applied does not change it."""
    since = max(a.cited_from, b.cited_from)
    ends = sorted((c.cited_to, c.memory_id, c.reason or "") for c in (a, b) if c.cited_to is not None)
    if not ends:
        return Link(since, None, None)
    end, _, reason = ends[0]
    if end <= since:
        return None
    return Link(since, end, reason or None)
