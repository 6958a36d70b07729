"""A memory's vocabulary and the rules for its values: its statuses and review levels, and which tags
and valid times it accepts."""

from __future__ import annotations

from datetime import datetime

from .errors import InvalidTags, InvalidValidTime
from .instant import check_instant

PENDING = "pending_review"
CONFIRMED = "confirmed"
REJECTED = "rejected"
EXPIRED = "expired"
FORGOTTEN = "forgotten"

NORMAL = "normal"
SENSITIVE = "sensitive"


def tags_of(event: object) -> list[str]:
    """A creation event's tags: [] for events stored before tags existed, and once forgotten."""
    return list(getattr(event, "tags", None) or [])


MAX_TAGS = 16
MAX_TAG_LENGTH = 64


def check_tags(tags: list[str] | None) -> list[str]:
    """At most 16 distinct tags of 1 to 64 printable characters, in the order given."""
    found = list(dict.fromkeys(tags or []))
    if len(found) > MAX_TAGS:
        raise InvalidTags(f"at most {MAX_TAGS} tags")
    for tag in found:
        if not isinstance(tag, str) or not 1 <= len(tag) <= MAX_TAG_LENGTH or any(
                ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF for c in tag):
            raise InvalidTags(f"a tag is 1 to {MAX_TAG_LENGTH} printable characters")
    return found


def check_valid_time(valid_from: datetime | None, valid_to: datetime | None) -> None:
    check_instant(valid_from, "valid_from")
    check_instant(valid_to, "valid_to")
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        raise InvalidValidTime("valid_to must be later than valid_from")
