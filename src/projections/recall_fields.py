"""The values a memory's recall rows derive from its events: when it was said, whether it asks, the
stretch of valid time a revision answers for, and times as the view's session reads them back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from psycopg import Cursor


@dataclass(frozen=True)
class Answer:
    """The stretch of valid time one revision answers for, and its length in terms."""

    valid_from: datetime | None
    valid_to: datetime | None
    doc_len: int


def readable(*times: datetime | None) -> None:
    """Raise, as reading the rows back would, for a time PostgreSQL stores but Python cannot load (an event
    from before the boundary refused such times): the event is then set aside, not left unreadable."""
    for value in times:
        if value is not None:
            value.astimezone(UTC)


def said_at(evidence: list[dict[str, Any]] | None) -> datetime | None:
    """When the memory was said: its first evidence's time, if it has one."""
    value = (evidence or [{}])[0].get("occurred_at")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


def asks(text: str | None) -> bool:
    """A question: the memory said after it in the same conversation may be its answer."""
    return bool(text) and text.rstrip().endswith(("?", "？"))  # type: ignore[union-attr]


def zone(name: str) -> Any:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def session_zone(curs: Cursor[Any]) -> Any:
    """The time zone the view's session gives times back in."""
    curs.execute("SELECT current_setting('TimeZone') AS zone")
    row = curs.fetchone()
    return zone(row["zone"] if row else "UTC")
