"""Where a memory came from: the exact words, and the message that held them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import InvalidScope, InvalidText
from .instant import check_instant
from .text import validate_id


@dataclass(frozen=True)
class Source:
    kind: str
    id: str
    message_id: str | None = None

    def __post_init__(self) -> None:
        if not self.kind or not self.id:
            raise InvalidScope("a source needs a kind and an id")
        for value in (self.kind, self.id, self.message_id):
            if value is not None:
                validate_id(value, "a source field")

    @classmethod
    def of(cls, data: dict[str, Any]) -> Source:
        return cls(kind=data.get("kind") or "", id=data.get("id") or "", message_id=data.get("message_id"))

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "message_id": self.message_id}


@dataclass(frozen=True)
class Evidence:
    quote: str
    source: Source
    occurred_at: datetime | None

    def __post_init__(self) -> None:
        check_instant(self.occurred_at, "occurred_at")

    @classmethod
    def quoted(cls, quote: str, message: str, source: Source, occurred_at: datetime | None) -> Evidence:
        """Evidence must be an exact substring of the person's message."""
        if not quote or quote not in message:
            raise InvalidText("the quote is not an exact part of the message")
        return cls(quote, source, occurred_at)

    def as_dict(self) -> dict[str, Any]:
        return {"quote": self.quote, "source": self.source.as_dict(), "occurred_at": self.occurred_at}
