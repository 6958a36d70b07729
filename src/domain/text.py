"""Rules for personal text accepted into Engram."""

from __future__ import annotations

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
