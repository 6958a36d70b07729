"""Helpers for tests that talk to the API."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

SECRET = "test-secret-" + "x" * 32


def token(company: str = "acme", user: str = "alice", role: str = "user", bot: str | None = None,
          entry: str = "api", ttl: timedelta = timedelta(hours=1), secret: str = SECRET) -> str:
    from api.identity import issue_token

    return issue_token(secret, company=company, user=user, role=role, bot=bot, entry=entry, ttl=ttl)


def auth(**kwargs: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(**kwargs)}"}


def remember_body(text: str, **extra: Any) -> dict[str, Any]:
    body = {
        "text": text,
        "explicit": True,
        "source": {"kind": "chat", "id": "chat-42", "message_id": "m-" + uuid.uuid4().hex[:6]},
        "occurred_at": datetime(2026, 11, 2, 9, 0, tzinfo=timezone(timedelta(hours=8))).isoformat(),
        "visibility": "general",
        "team": None,
    }
    body.update(extra)
    return body


def put_directory(client: Any, document: dict[str, Any], company: str = "acme") -> dict[str, Any]:
    r = client.put("/v1/admin/directory", json=document, headers=auth(company=company, user="root", role="admin"))
    assert r.status_code == 200, r.text
    return r.json()
