"""The view cipher: views hold personal text only sealed under the memory's own data key."""

from __future__ import annotations

import json
from typing import Any

from engram.adapters.crypto import seal, unseal


def _default(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _aad(memory_id: Any, purpose: str) -> bytes:
    return f"view:{purpose}:{memory_id}".encode()


def seal_for_view(key: bytes, memory_id: Any, purpose: str, value: Any) -> bytes:
    return seal(key, json.dumps(value, default=_default).encode(), _aad(memory_id, purpose))


def unseal_from_view(key: bytes, memory_id: Any, purpose: str, blob: bytes | None) -> Any:
    if blob is None:
        return None
    return json.loads(unseal(key, bytes(blob), _aad(memory_id, purpose)))
