"""A page never answers with a problem document: the services' refusals, a database outage and an
unexpected error each become a page with the right status (ADR 0031), in-process."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.availability import DatabaseUnavailable
from engram.api import dependencies

from tests.support.helpers import auth


class Failing:
    """A memory service whose reads fail as `error` says."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise self.error

        return fail


@pytest.mark.parametrize(("error", "status", "words"), [
    (DatabaseUnavailable("the database does not answer"), 503, "cannot reach its database"),
    (RuntimeError("secret personal text"), 500, "could not be shown"),
])
def test_failures_are_pages_without_their_message(client: TestClient, error: Exception, status: int, words: str) -> None:
    async def failing() -> Any:
        return Failing(error)

    client.app.dependency_overrides[dependencies.memory_service] = failing  # type: ignore[attr-defined]
    try:
        r = client.get("/memory", headers=auth(user="p-errors"))
    finally:
        client.app.dependency_overrides.clear()  # type: ignore[attr-defined]
    assert r.status_code == status and r.headers["content-type"].startswith("text/html")
    assert words in r.text and "secret personal text" not in r.text and "does not answer" not in r.text
    assert r.headers.get("retry-after") == ("5" if status == 503 else None)
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_refusals_of_the_services_are_pages_with_their_status(client: TestClient) -> None:
    # a bot no directory lists may not change the person's controls: the service refuses, the page says so
    bot = auth(user="p-errors", role="bot", bot="b-unlisted")
    refused = client.post("/memory/settings", data={"use_paused": "true"}, headers=bot, follow_redirects=False)
    assert refused.status_code == 403 and refused.headers["content-type"].startswith("text/html")
    assert "<h1>" in refused.text
    assert client.get("/v1/settings", headers=auth(user="p-errors")).json()["use_paused"] is False
    missing = client.get("/memory/forgets/fg-0000", headers=auth(user="p-errors"))
    assert missing.status_code == 404 and "Not found" in missing.text
    assert client.get("/memory", headers=auth(user="p-errors")).status_code == 200
