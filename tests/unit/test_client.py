"""The Python client without a server: what it imports, the requests it builds, when it retries."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from engram.client import AsyncClient, Client, RetryPolicy, calls
from engram.client.retry import retry_after
from engram.contract.responses import SourceOut

SERVER_ONLY = ("fastapi", "starlette", "uvicorn", "eventsourcing", "psycopg", "engram.api.http", "engram.service",
               "engram.adapters", "engram.domain", "engram.projections")


def test_importing_the_client_loads_nothing_of_the_server() -> None:
    code = ("import sys; from engram.client import AsyncClient, Client, EngramError; "
            "print(' '.join(sorted(m for m in sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                                timeout=60).stdout.split())
    assert {"httpx", "pydantic", "engram.client", "engram.contract.responses"} <= loaded
    assert sorted(m for m in loaded if m.startswith(SERVER_ONLY)) == []


def test_requests_carry_the_given_fields_only() -> None:
    at = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    call = calls.remember(text="I like tea", source=SourceOut(kind="chat", id="c-1", message_id=None),
                          occurred_at=at, tags=("drinks",))
    assert (call.method, call.path) == ("POST", "/v1/memories")
    assert call.json == {"text": "I like tea", "explicit": True, "source": {"kind": "chat", "id": "c-1"},
                         "occurred_at": "2026-11-02T09:00:00+00:00", "tags": ["drinks"]}
    assert calls.memories(q="tea", limit=5).params == {"q": "tea", "limit": 5}
    assert calls.memory("a/b c").path == "/v1/memories/a%2Fb%20c"  # an id is one path segment
    assert calls.settings().method == "GET"
    assert calls.settings(learning_paused=True, use_paused=False).json == {"learning_paused": True, "use_paused": False}
    with pytest.raises(TypeError):
        calls.settings(learning_paused=True)
    with pytest.raises(TypeError):
        calls.receive(receipt_id="r-1", messages=[])


def test_only_calls_the_api_makes_idempotent_may_be_retried() -> None:
    source = {"kind": "chat", "id": "c-1"}
    assert calls.remember(text="x", source={**source, "message_id": "m-1"}).idempotent
    assert not calls.remember(text="x", source=source).idempotent
    assert calls.receive(receipt_id="r-1", author="user", text="x", source=source).idempotent
    assert calls.receive(messages=[{"receipt_id": "r-1"}]).idempotent
    assert calls.forget("id").idempotent and calls.forget_many(ids=["id"]).idempotent
    assert not calls.forget_many(source_id="c-1").idempotent
    assert calls.recall(query="x").idempotent and calls.export().idempotent and calls.settings(
        learning_paused=False, use_paused=False).idempotent
    for call in (calls.correct("id", text="x"), calls.confirm("id"), calls.reject("id"), calls.confirm_insight("id"),
                 calls.reject_insight("id"), calls.forget_me(), calls.revoke_source("s")):
        assert not call.idempotent, call.path


def _answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_the_wait_grows_is_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_retries=5, backoff=1.0, max_backoff=6.0)
    recall, correct = calls.recall(query="x"), calls.correct("id", text="x")
    waits = [policy.wait(recall, n, _answer(503)) for n in range(5)]
    for n, wait in enumerate(waits):
        ceiling = min(2.0 ** n, 6.0)
        assert wait is not None and ceiling / 2 <= wait <= ceiling
    assert policy.wait(recall, 5, _answer(503)) is None  # retries spent
    assert policy.wait(recall, 0, _answer(503, **{"Retry-After": "4"})) == 4
    assert policy.wait(recall, 0, _answer(503, **{"Retry-After": "120"})) == 6  # capped
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)
    assert policy.wait(recall, 0, _answer(503, **{"Retry-After": later})) == 6
    assert 1 < (retry_after(_answer(503, **{"Retry-After": format_datetime(
        datetime.now(UTC) + timedelta(seconds=3), usegmt=True)})) or 0) <= 3
    assert retry_after(_answer(503, **{"Retry-After": "soon"})) is None
    assert policy.wait(recall, 0, _answer(429, **{"Retry-After": "2"})) == 2  # rate_limited: after its wait
    for status in (200, 500, 502):
        assert policy.wait(recall, 0, _answer(status)) is None
    assert policy.wait(correct, 0, _answer(503)) is None
    assert policy.wait(correct, 0, _answer(429, **{"Retry-After": "1"})) is None


def test_lost_connections_are_retried_for_idempotent_calls_only() -> None:
    policy = RetryPolicy(max_retries=1, backoff=0.0)
    recall, correct = calls.recall(query="x"), calls.correct("id", text="x")
    for error in (httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("closed")):
        assert policy.wait(recall, 0, error) == 0
        assert policy.wait(correct, 0, error) is None
    assert policy.wait(recall, 0, httpx.UnsupportedProtocol("ftp")) is None
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)


def test_both_clients_have_every_call_with_its_own_signature() -> None:
    sync, asynchronous = Client("http://127.0.0.1:9", "t"), AsyncClient("http://127.0.0.1:9", "t")
    recall = inspect.signature(sync.recall)
    assert list(recall.parameters) == ["query", "as_of", "max_bytes", "limit", "tags"]
    assert recall.return_annotation == "RecallOut" and inspect.signature(asynchronous.recall) == recall
    assert inspect.iscoroutinefunction(asynchronous.remember) and not inspect.iscoroutinefunction(sync.remember)
    assert "POST /v1/memories" in str(Client.remember.__doc__)
    sync.close()
    asyncio.run(asynchronous.aclose())
    assert sync.is_closed and asynchronous.is_closed


def test_arguments_are_checked_before_anything_is_sent() -> None:
    """`remember(source="chat")` once failed inside the client with an AttributeError."""
    with pytest.raises(TypeError) as wrong:
        calls.remember(text="I like tea", source="chat")  # type: ignore[arg-type]
    said = str(wrong.value)
    assert said.startswith("remember(): source cannot be str") and 'for example source={"kind": "chat"' in said
    with pytest.raises(TypeError, match=r"recall\(\): query is required"):
        calls.recall()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"recall\(\): limit cannot be str"):
        calls.recall(query="tea", limit="5")  # type: ignore[arg-type]  # never converted
    with pytest.raises(TypeError, match=r"memory\(\): memory_id cannot be int"):
        calls.memory(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"remember\(\): tags cannot be str"):
        calls.remember(text="x", source={"kind": "chat", "id": "c"}, tags="reports")  # type: ignore[arg-type]
    source = SourceOut(kind="chat", id="chat-42", message_id="m-8")  # a memory's own source, as a model
    sent = calls.remember(text="I like tea", source=source, occurred_at=datetime(2026, 11, 2, tzinfo=UTC))
    assert sent.json["source"] == {"kind": "chat", "id": "chat-42", "message_id": "m-8"} and sent.idempotent
    assert calls.memory("a/b").path == "/v1/memories/a%2Fb"
