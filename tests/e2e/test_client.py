"""The Python client (`engram.client`) against a running `engram serve`: every call through both
clients, problems as `EngramError`, retries on 503 and lost connections for idempotent calls only
(through a local proxy that answers from a script first), pagination, and the pool closed by `with`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import psutil
import pytest

from engram.client import AsyncClient, Client, EngramError
from engram.contract.responses import CandidateOut, ExportOut, MemoryOut, ReceiptBatch

from tests.support.helpers import serving, token, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

FAST = {"backoff": 0.01, "max_backoff": 0.05}  # retries without waiting in tests


@pytest.fixture(scope="module")
def serve(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`engram serve` on a fresh database of the session's PostgreSQL, its background work quick."""
    with serving(postgres, tmp_path_factory.mktemp("client-serve")) as url:
        yield url


def person() -> str:
    """A token for a person of their own: each test sees only what it stored."""
    return token(company="acme", user="p-" + uuid.uuid4().hex[:8])


def chat(message_id: str | None = None) -> dict[str, str]:
    source = {"kind": "chat", "id": "chat-client"}
    return {**source, "message_id": message_id} if message_id else source


class Proxy:
    """A local HTTP proxy in front of `engram serve`. Each request takes the next step of `script`
    ("503": a problem response with Retry-After 0; "drop": the connection closed without an answer);
    once the script is spent, requests pass through. Records method, path, request id and body."""

    def __init__(self, upstream: str) -> None:
        self.upstream = httpx.Client(base_url=upstream, timeout=30)
        self.script: list[str] = []
        self.seen: list[tuple[str, str, str, Any]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                proxy.seen.append((self.command, self.path.partition("?")[0], self.headers.get("x-request-id", ""),
                                   json.loads(body) if body else None))
                step = proxy.script.pop(0) if proxy.script else "pass"
                if step == "drop":
                    self.close_connection = True
                    return
                if step == "503":
                    status, content = 503, json.dumps({"type": "about:blank", "title": "Service unavailable",
                                                        "status": 503, "detail": "try later", "code": "unavailable"})
                    headers = {"content-type": "application/problem+json", "retry-after": "0"}
                else:
                    answer = proxy.upstream.request(self.command, self.path, content=body, headers={
                        k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type",
                                                                               "x-request-id")})
                    status, content = answer.status_code, answer.text
                    headers = {k: v for k, v in answer.headers.items() if k in ("content-type", "x-request-id")}
                data = content.encode()
                self.send_response(status)
                for name, value in {**headers, "content-length": str(len(data))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def paths(self) -> list[str]:
        return [f"{method} {path}" for method, path, _, _ in self.seen]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.upstream.close()


@pytest.fixture
def proxy(serve: str) -> Iterator[Proxy]:
    p = Proxy(serve)
    yield p
    p.close()


def test_every_call_round_trips_through_the_client(serve: str) -> None:
    with Client(serve, person()) as engram:
        memory = engram.remember(text="I prefer standups at 9:30", source=chat("m-1"), occurred_at=datetime.now(UTC))
        assert isinstance(memory, MemoryOut) and memory.status == "confirmed"
        assert memory.text == "I prefer standups at 9:30" and memory.source and memory.source.message_id == "m-1"
        sensitive = engram.remember(text="My blood pressure medication is lisinopril", source=chat("m-2"))
        assert isinstance(sensitive, CandidateOut) and sensitive.review == "sensitive"

        recalled = engram.recall(query="standups", limit=5)
        assert [(i.id, i.text) for i in recalled.items] == [(memory.id, "I prefer standups at 9:30")]
        assert recalled.items[0].evidence[0].quote == "I prefer standups at 9:30" and not recalled.degraded
        assert [m.id for m in engram.memories(q="standups").items] == [memory.id]
        assert engram.memory(memory.id).text == "I prefer standups at 9:30"
        assert engram.links(memory.id).items == []

        corrected = engram.correct(memory.id, text="I prefer standups at 10:00", reason="moved")
        assert (corrected.revision, corrected.text) == (2, "I prefer standups at 10:00")
        events = engram.history(memory.id).events
        assert [e.revision for e in events] == [1, 2] and events[-1].text == "I prefer standups at 10:00"

        # a receipt is learned from in the background: its candidate is confirmed, the sensitive one rejected
        queued = engram.receive(receipt_id="r-1", author="user", text="Great. I prefer decaf after 3pm.",
                                source=chat("m-3"))
        assert (queued.receipt_id, queued.state) == ("r-1", "queued")
        assert engram.receipt("r-1").receipt_id == "r-1"
        learned = wait_for(lambda: [c for c in engram.candidates().items if c.review == "normal"])
        assert [c.evidence[0].quote for c in learned] == ["I prefer decaf after 3pm."]
        confirmed = engram.confirm(learned[0].id, text="I prefer decaf after 3pm")
        assert (confirmed.status, confirmed.text) == ("confirmed", "I prefer decaf after 3pm")
        assert engram.reject(sensitive.id).status == "rejected"
        assert engram.candidates().items == []

        # the same preference said twice becomes an insight (the local proposer, in the background)
        for n, text in enumerate(["From now on, risks come first in every report.", "Remember: risks first, always."]):
            engram.remember(text=text, source=chat(f"m-risk-{n}"))
        proposed = wait_for(lambda: engram.insights(status="proposed").items)
        assert "risks first" in str(proposed[0].text) and len(proposed[0].evidence_memory_ids) == 2
        assert engram.confirm_insight(proposed[0].id).status == "confirmed"
        assert [i.id for i in engram.insights(status="confirmed").items] == [proposed[0].id]

        assert engram.settings().learning_paused is False
        paused = engram.settings(learning_paused=True, use_paused=False)
        assert (paused.learning_paused, paused.use_paused) == (True, False)
        assert engram.settings().learning_paused is True
        assert engram.receive(receipt_id="r-2", author="user", text="I like tea", source=chat("m-4")).state == "ignored"
        engram.settings(learning_paused=False, use_paused=False)

        exported = engram.export()
        assert isinstance(exported, ExportOut)
        assert {m.text for m in exported.memories} >= {"I prefer standups at 10:00", "I prefer decaf after 3pm"}
        assert "I prefer decaf after 3pm" in engram.export(format="markdown")

        accepted = engram.forget(memory.id)
        assert accepted.status == "stopped_using"
        status = engram.forget_status(accepted.forget_id)
        assert status.forget_id == accepted.forget_id and {c.copy_ for c in status.copies} >= {"event_store", "recall_view"}
        assert engram.recall(query="standups").items == []
        assert accepted.forget_id in [f.forget_id for f in engram.forgets().items]
        many = engram.forget_many(ids=[confirmed.id])
        assert len(many.forget_ids) == 1


def test_the_async_client_round_trips(serve: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(serve, person()) as engram:
            memory = await engram.remember(text="I take the 7:40 train", source=chat("a-1"))
            assert isinstance(memory, MemoryOut)
            assert [i.id for i in (await engram.recall(query="train")).items] == [memory.id]
            assert (await engram.memory(memory.id)).text == "I take the 7:40 train"
            corrected = await engram.correct(memory.id, text="I take the 8:10 train")
            assert [e.revision for e in (await engram.history(memory.id)).events] == [1, 2]
            assert corrected.revision == 2
            for n, text in enumerate(["Please always put the summary first.", "Always put the summary first."]):
                await engram.remember(text=text, source=chat(f"a-sum-{n}"))
            for _ in range(150):
                proposed = (await engram.insights(status="proposed")).items
                if proposed:
                    break
                await asyncio.sleep(0.2)
            assert (await engram.reject_insight(proposed[0].id)).status == "rejected"
            assert (await engram.settings()).use_paused is False
            queued = await engram.receive(receipt_id="a-r", author="assistant", text="Noted.", source=chat("a-2"))
            assert queued.receipt_id == "a-r"
            assert (await engram.candidates()).items == []
            forgot = await engram.forget(memory.id)
            assert (await engram.forget_status(forgot.forget_id)).forget_id == forgot.forget_id
            exported = await engram.export()
            assert isinstance(exported, ExportOut) and "I take the 8:10 train" not in {m.text for m in exported.memories}

    asyncio.run(scenario())


def test_problem_responses_raise_engram_error(serve: str) -> None:
    with Client(serve, person()) as engram:
        with pytest.raises(EngramError) as missing:
            engram.memory(str(uuid.uuid4()))
        assert (missing.value.status, missing.value.code) == (404, "not_found") and missing.value.request_id
        with pytest.raises(EngramError) as invalid:
            engram.recall(query="x", as_of="yesterday")
        assert (invalid.value.status, invalid.value.code) == (422, "invalid_time")
        assert [e["field"] for e in invalid.value.errors] == ["as_of"]
        with pytest.raises(EngramError) as secret:
            engram.remember(text="my password is hunter2-Xq9!vLp", source=chat("s-1"))
        assert (secret.value.status, secret.value.code) == (422, "secret_refused")
        with pytest.raises(EngramError) as admin_only:
            engram.admin_status()
        assert (admin_only.value.status, admin_only.value.code) == (403, "forbidden")
    forged = token(company="acme", user="mallory", secret="another-secret-" + "y" * 32)
    with Client(serve, forged) as engram, pytest.raises(EngramError) as unauthenticated:
        engram.recall(query="anything")
    assert (unauthenticated.value.status, unauthenticated.value.code) == (401, "invalid_token")
    with Client(serve, token(company="acme", user="alice", role="bot", bot="b-unknown")) as bot:
        with pytest.raises(EngramError) as unregistered:
            bot.remember(text="I like tea", source=chat("b-1"))
        assert (unregistered.value.status, unregistered.value.code) == (403, "bot_not_registered")
    with Client(serve, token(company="acme", user="root", role="admin")) as admin:
        assert admin.admin_status().company == "acme"


def test_idempotent_calls_are_retried_on_503_and_lost_connections(proxy: Proxy) -> None:
    with Client(proxy.url, person(), max_retries=3, **FAST) as engram:
        proxy.script = ["503", "drop", "503"]
        memory = engram.remember(text="I cycle to work", source=chat("r-1"))  # a message id: stored once
        assert proxy.paths() == ["POST /v1/memories"] * 4
        assert len({request_id for _, _, request_id, _ in proxy.seen}) == 1  # one call, one id for every try
        proxy.seen.clear()
        with pytest.raises(EngramError) as missing:
            engram.memory(str(uuid.uuid4()))
        assert missing.value.request_id == proxy.seen[-1][2]  # the service answered with the id the client sent
        proxy.seen.clear()
        proxy.script = ["drop", "503"]
        assert [i.id for i in engram.recall(query="cycle").items] == [memory.id]
        proxy.script = ["503"]
        assert engram.memory(memory.id).id == memory.id
        proxy.script = ["503"]
        assert engram.receive(receipt_id="r-x", author="user", text="ok", source=chat("r-2")).receipt_id == "r-x"
        proxy.script = ["drop"]
        forgotten = engram.forget(memory.id)
        assert proxy.paths() == ["POST /v1/recall"] * 3 + [f"GET /v1/memories/{memory.id}"] * 2 + \
            ["POST /v1/receipts"] * 2 + [f"POST /v1/memories/{memory.id}/forget"] * 2
        assert engram.forget_status(forgotten.forget_id).memory_id == memory.id
        assert engram.memories().items == []  # the four tries stored one memory, now forgotten

        proxy.seen.clear()
        proxy.script = ["503"] * 10
        with pytest.raises(EngramError) as gave_up:
            engram.recall(query="cycle")
        assert (gave_up.value.status, gave_up.value.code, gave_up.value.retry_after) == (503, "unavailable", 0)
        assert len(proxy.seen) == 4  # the first try and three more, then the 503 is raised
        proxy.script = []


def test_calls_the_api_does_not_make_idempotent_are_sent_once(proxy: Proxy) -> None:
    with Client(proxy.url, person(), max_retries=3, **FAST) as engram:
        memory = engram.remember(text="I swim on Tuesdays", source=chat("n-1"))
        proxy.seen.clear()
        proxy.script = ["503"]
        with pytest.raises(EngramError) as refused:
            engram.correct(memory.id, text="I swim on Wednesdays")
        assert refused.value.status == 503
        proxy.script = ["drop"]
        with pytest.raises(httpx.RemoteProtocolError):
            engram.correct(memory.id, text="I swim on Thursdays")
        proxy.script = ["503"]
        with pytest.raises(EngramError):
            engram.remember(text="I swim at noon", source=chat())  # no message id: not idempotent
        assert proxy.paths() == [f"POST /v1/memories/{memory.id}/correct"] * 2 + ["POST /v1/memories"]
        assert engram.memory(memory.id).revision == 1  # neither correction reached the service
        assert [m.text for m in engram.memories().items] == ["I swim on Tuesdays"]


def test_iter_memories_follows_next_cursor(proxy: Proxy) -> None:
    texts = [f"Reading list entry {n}: a book about rivers" for n in range(7)]
    bearer = person()
    with Client(proxy.url, bearer) as engram:
        for n, text in enumerate(texts):
            engram.remember(text=text, source=chat(f"p-{n}"))
        first = engram.memories(limit=3)
        assert len(first.items) == 3 and first.next_cursor
        proxy.seen.clear()
        listed = [m.text for m in engram.iter_memories(page_size=3)]
        assert sorted(listed) == sorted(texts) and len(set(listed)) == 7
        assert proxy.paths() == ["GET /v1/memories"] * 3  # 3 + 3 + 1

    async def listed_async() -> list[str | None]:
        async with AsyncClient(proxy.url, bearer) as engram:
            return [m.text async for m in engram.iter_memories(q="rivers", page_size=2)]

    assert sorted(asyncio.run(listed_async())) == sorted(texts)


def _connections_to(url: str) -> int:
    port = httpx.URL(url).port
    return sum(1 for c in psutil.Process().net_connections(kind="tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def test_with_closes_the_connection_pool(serve: str) -> None:
    assert _connections_to(serve) == 0
    with Client(serve, person()) as engram:
        engram.settings()
        assert _connections_to(serve) == 1  # kept alive in the pool
    assert engram.is_closed and _connections_to(serve) == 0
    with pytest.raises(RuntimeError):
        engram.settings()

    async def scenario() -> tuple[int, bool, int]:
        async with AsyncClient(serve, person()) as engram:
            await engram.settings()
            during = _connections_to(serve)
        return during, engram.is_closed, _connections_to(serve)

    assert asyncio.run(scenario()) == (1, True, 0)


def test_a_whole_conversation_is_sent_as_messages(proxy: Proxy) -> None:
    messages = [{"receipt_id": f"conv-{n}", "author": author, "text": text, "source": chat(f"c-{n}"),
                 "occurred_at": datetime(2026, 11, 2, 9, n, tzinfo=UTC)}
                for n, (author, text) in enumerate([("user", "I prefer tea in the afternoon."), ("assistant", "Noted.")])]
    with Client(proxy.url, person(), max_retries=0) as engram:
        batch = engram.receive(messages=messages)
        assert isinstance(batch, ReceiptBatch)
        assert [(r.receipt_id, r.state) for r in batch.items] == [("conv-0", "queued"), ("conv-1", "ignored")]
        assert engram.receipt("conv-0").attempts == 0
    assert proxy.seen[0][3] == {"messages": [
        {**m, "occurred_at": f"2026-11-02T09:0{n}:00+00:00"} for n, m in enumerate(messages)]}


def test_a_bot_key_and_its_person_instead_of_a_token(serve: str) -> None:
    admin = {"Authorization": f"Bearer {token(user='root', role='admin')}"}
    directory = {"teams": {}, "sources": {}, "bots": {"b-notes": {"teams": [], "sources": []}}}
    assert httpx.put(f"{serve}/v1/admin/directory", json=directory, headers=admin, timeout=30).status_code == 200
    key = httpx.post(f"{serve}/v1/admin/bots/b-notes/keys", headers=admin, timeout=30).json()["key"]
    who = "key-" + uuid.uuid4().hex[:8]
    with Client(serve, api_key=key, person=who) as bot:
        memory = bot.remember(text="I keep my notes in a paper diary", source=chat("m-k"))
        assert isinstance(memory, MemoryOut)
        assert [i.id for i in bot.recall(query="paper diary").items] == [memory.id]
    with Client(serve, token(user=who)) as person_itself:  # the same person's memory
        assert person_itself.memory(memory.id).text == "I keep my notes in a paper diary"
    with pytest.raises(TypeError):
        Client(serve, api_key=key)  # whom it acts for
    with pytest.raises(TypeError):
        Client(serve, token(), api_key=key, person=who)
    forged_key = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    with Client(serve, api_key=forged_key, person=who) as forged, pytest.raises(EngramError) as refused:
        forged.settings()
    assert (refused.value.status, refused.value.code) == (401, "key_revoked")
