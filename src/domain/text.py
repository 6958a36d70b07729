"""Rules for personal text accepted into Engram."""

from __future__ import annotations

import re

from .errors import InvalidText, TextTooLarge

DEFAULT_MAX_TEXT_BYTES = 8 * 1024


def validate_text(text: str, max_bytes: int = DEFAULT_MAX_TEXT_BYTES, *, allow_empty: bool = False) -> str:
    """Return the text unchanged when acceptable; never echo it in an error."""
    if "\x00" in text:
        raise InvalidText("text contains a NUL character")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidText("text contains an unpaired surrogate") from None
    if size > max_bytes:
        raise TextTooLarge(f"text is {size} bytes; the limit is {max_bytes}")
    if not allow_empty and not text.strip():
        raise InvalidText("text is empty")
    return text


def is_acceptable_text(text: str, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> bool:
    """Whether `validate_text` accepts it: for text Engram did not receive from a person (a model's)."""
    try:
        validate_text(text, max_bytes)
    except (InvalidText, TextTooLarge):
        return False
    return True


MAX_ID_LENGTH = 200
_NOT_IN_AN_ID = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")  # control characters and lone surrogates


def is_valid_id(value: object) -> bool:
    """Ids (sources, teams, receipts, bots) are printable text: no control characters, no surrogates."""
    if not isinstance(value, str) or not value or len(value) > MAX_ID_LENGTH or value in (".", ".."):
        return False  # `.` and `..` would name another route in any URL built from them
    return _NOT_IN_AN_ID.search(value) is None


def validate_id(value: str, what: str = "id") -> str:
    if not is_valid_id(value):
        raise InvalidText(f"{what} must be 1 to {MAX_ID_LENGTH} printable characters, other than . and ..")
    return value
