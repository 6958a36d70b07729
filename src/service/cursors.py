"""Page cursors: the last item's time and id, opaque to the caller, refused with 400 when tampered with."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime

from engram.domain.errors import DomainError


class InvalidCursor(DomainError):
    code, status, title = "invalid_cursor", 400, "Cursor is not valid"


def encode_cursor(at: datetime, item_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([at.isoformat(), item_id]).encode()).decode()


def decode_cursor(cursor: str, check_id: Callable[[str], object] = str) -> tuple[datetime, str]:
    """The time and id a cursor holds; `check_id` raises on an id of the wrong form (a memory's is a UUID)."""
    try:
        at, item_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(item_id, str):
            raise ValueError(item_id)
        check_id(item_id)
        return datetime.fromisoformat(at), item_id
    except Exception:  # noqa: BLE001
        raise InvalidCursor("cursor is not valid") from None
