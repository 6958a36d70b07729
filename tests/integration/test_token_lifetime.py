"""A leaked token must not work for centuries: one expiring more than ENGRAM_MAX_TOKEN_DAYS ahead is 401."""

from __future__ import annotations

from datetime import timedelta

import jwt

from tests.support.helpers import SECRET, auth


def _status(client, headers) -> tuple[int, str | None]:
    r = client.get("/v1/memories", headers=headers)
    return r.status_code, r.json().get("code") if r.status_code != 200 else None


def test_tokens_living_longer_than_the_cap_are_refused(client) -> None:
    assert _status(client, auth(ttl=timedelta(days=29, hours=23))) == (200, None)
    for ttl in (timedelta(days=30, minutes=5), timedelta(days=365 * 300)):
        assert _status(client, auth(ttl=ttl)) == (401, "token_lifetime_too_long")
    huge = jwt.encode({"sub": "alice", "company": "acme", "role": "user", "exp": 2**62}, SECRET, algorithm="HS256")
    assert _status(client, {"Authorization": f"Bearer {huge}"})[0] == 401


def test_the_cap_is_configurable(settings, database) -> None:
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    system = Engram.open(settings.replace(max_token_days=1), database=database, background=False)
    try:
        with TestClient(create_app(system, SECRET)) as c:
            assert _status(c, auth(ttl=timedelta(hours=23))) == (200, None)
            assert _status(c, auth(ttl=timedelta(days=2))) == (401, "token_lifetime_too_long")
    finally:
        system.close()
