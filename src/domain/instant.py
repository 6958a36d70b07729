"""The one rule for times a caller gives us: an offset, and a moment between 1900 and 2200 in UTC.

Any time outside that range could be stored but not read back everywhere (PostgreSQL and Python
disagree on years outside 1-9999 once an offset is applied), so nothing outside it is accepted.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .errors import DomainError

EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


class InvalidTime(DomainError):
    code, status, title = "invalid_time", 422, "Time is not valid"


def check_instant(value: datetime | None, what: str = "time") -> datetime | None:
    """Return the time unchanged when acceptable; None passes (no time given)."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidTime(f"{what} must carry an offset")
    try:
        in_utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidTime(f"{what} must lie between 1900-01-01 and 2200-01-01 UTC") from None
    if not EARLIEST <= in_utc <= LATEST:
        raise InvalidTime(f"{what} must lie between 1900-01-01 and 2200-01-01 UTC")
    return value
