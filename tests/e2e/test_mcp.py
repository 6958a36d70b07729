"""MCP, driven by the SDK's own client: `engram mcp` over stdio against a running `engram serve`, and
streamable HTTP at `/mcp` of that server, with the bearer token (API.md "For agents and programs")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, Implementation, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_serve import ENGRAM, _env, _free_port
from tests.support.helpers import SECRET, is_problem, token, wait_until_ready

pytestmark = pytest.mark.e2e

AGENT = Implementation(name="test-agent", version="1")
TOOLS = {"recall", "remember", "list_memories", "get_memory", "memory_history", "correct_memory", "forget_memory",
         "forget_status"}


class Serve:
    """One `engram serve` for the module, with a known token secret so the test signs its tokens."""

    def __init__(self, data_dir: Path) -> None:
        self.port = _free_port()
        env = {**_env(data_dir), "ENGRAM_TOKEN_SECRET": SECRET}
        self.proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(self.port)], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until_ready(self.proc, self.url, lambda: self.proc.stdout.read().decode() if self.proc.stdout else "")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = Serve(tmp_path_factory.mktemp("mcp") / "engram-data")
    yield server
    server.stop()


Connect = Callable[[str], AbstractAsyncContextManager[Client]]


def over_stdio(serve: Serve) -> Connect:
    """`engram mcp` as a subprocess of the client, for the person of `bearer`."""

    @asynccontextmanager
    async def connect(bearer: str) -> AsyncIterator[Client]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        params = StdioServerParameters(command=str(Path(sys.executable).parent / "engram"), args=["mcp"],
                                       env={**env, "ENGRAM_URL": serve.url, "ENGRAM_TOKEN": bearer})
        async with Client(params, client_info=AGENT) as client:
            yield client

    return connect


def over_http(serve: Serve) -> Connect:
    """Streamable HTTP at /mcp with `Authorization: Bearer`."""

    @asynccontextmanager
    async def connect(bearer: str) -> AsyncIterator[Client]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60) as http:
            async with Client(streamable_http_client(serve.url + "/mcp", http_client=http), client_info=AGENT) as client:
                yield client

    return connect


TRANSPORTS = {"stdio": over_stdio, "http": over_http}


def run(connect: Connect, bearer: str, steps: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with connect(bearer) as client:
            return await steps(client)

    return anyio.run(main)


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


async def failure(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error
    return result.content[0].text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_eight_tools_with_descriptions_and_input_schemas(serve: Serve, transport: str) -> None:
    async def steps(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in run(TRANSPORTS[transport](serve), token(user="tina"), steps)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80, tool.name  # what it does, when, what comes back
        assert tool.input_schema["type"] == "object"
    assert set(tools["recall"].input_schema["properties"]) == {"query", "as_of", "limit"}
    assert {"text", "tags"} <= set(tools["remember"].input_schema["properties"])
    assert tools["remember"].input_schema["required"] == ["text"]
    assert set(tools["list_memories"].input_schema["properties"]) == {"q"}
    for name in ("get_memory", "memory_history", "forget_memory"):
        assert tools[name].input_schema["required"] == ["id"]
    assert set(tools["correct_memory"].input_schema["properties"]) == {"id", "text", "valid_from"}
    assert tools["forget_status"].input_schema["required"] == ["forget_id"]
    assert tools["recall"].input_schema["properties"]["limit"]["maximum"] == 200
    assert tools["recall"].annotations.read_only_hint and tools["forget_memory"].annotations.destructive_hint


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remember_recall_correct_forget_round_trip(serve: Serve, transport: str) -> None:
    person = f"rita-{transport}"

    async def steps(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        seen["remembered"] = await call(client, "remember", text="I prefer tea over coffee in the morning")
        memory_id = seen["remembered"]["id"]
        seen["recalled"] = await call(client, "recall", query="what do I drink in the morning?")
        seen["listed"] = await call(client, "list_memories", q="tea")
        seen["got"] = await call(client, "get_memory", id=memory_id)
        seen["corrected"] = await call(client, "correct_memory", id=memory_id,
                                       text="I prefer green tea in the morning", valid_from="2026-03-01T00:00:00+00:00")
        seen["earlier"] = await call(client, "recall", query="morning tea", as_of="2026-02-01T00:00:00+00:00")
        seen["history"] = await call(client, "memory_history", id=memory_id)
        seen["forgotten"] = await call(client, "forget_memory", id=memory_id)
        seen["status"] = await call(client, "forget_status", forget_id=seen["forgotten"]["forget_id"])
        seen["after"] = await call(client, "recall", query="morning tea")
        seen["history_after"] = await call(client, "memory_history", id=memory_id)
        seen["got_after"] = await call(client, "get_memory", id=memory_id)
        return seen

    seen = run(TRANSPORTS[transport](serve), token(user=person), steps)
    memory = seen["remembered"]
    assert memory["status"] == "confirmed" and memory["text"] == "I prefer tea over coffee in the morning"
    assert memory["source"] == {"kind": "mcp", "id": "test-agent", "message_id": None}  # the client's own name
    assert [i["id"] for i in seen["recalled"]["items"]] == [memory["id"]]
    assert seen["recalled"]["degraded"] is False
    assert [i["id"] for i in seen["listed"]["items"]] == [memory["id"]]
    assert seen["got"]["id"] == memory["id"] and seen["got"]["revision"] == 1
    assert seen["corrected"]["revision"] == 2 and seen["corrected"]["text"] == "I prefer green tea in the morning"
    assert [i["text"] for i in seen["earlier"]["items"]] == ["I prefer tea over coffee in the morning"]
    assert [e["revision"] for e in seen["history"]["events"]] == [1, 2]
    assert seen["forgotten"]["status"] == "stopped_using"
    assert seen["status"]["forget_id"] == seen["forgotten"]["forget_id"]
    assert {c["copy"] for c in seen["status"]["copies"]} >= {"event_store", "recall_view"}
    assert seen["after"]["items"] == []
    assert all(e["text"] is None for e in seen["history_after"]["events"])
    # the very document the HTTP API answers
    r = httpx.get(f"{serve.url}/v1/memories/{memory['id']}", headers={"Authorization": f"Bearer {token(user=person)}"})
    assert r.status_code == 200 and r.json() == seen["got_after"] and r.json()["status"] == "forgotten"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tool_errors_carry_the_problem_code(serve: Serve, transport: str) -> None:
    async def steps(client: Client) -> dict[str, str]:
        return {
            "unknown": await failure(client, "get_memory", id="no-such-memory"),
            "unknown_history": await failure(client, "memory_history", id="00000000-0000-0000-0000-000000000000"),
            "unknown_forget": await failure(client, "forget_status", forget_id="no-such-forget"),
            "bad_time": await failure(client, "recall", query="x", as_of="yesterday"),
            "bad_limit": await failure(client, "recall", query="x", limit=0),
            "missing": await failure(client, "remember"),
            "secret": await failure(client, "remember", text="my password is hunter2-Secret!9"),
            "listed": json.dumps(await call(client, "list_memories")),
        }

    errors = run(TRANSPORTS[transport](serve), token(user=f"eve-{transport}"), steps)
    assert errors["unknown"].startswith("not_found: ")
    assert errors["unknown_history"].startswith("not_found: ")
    assert errors["unknown_forget"].startswith("not_found: ")
    assert errors["bad_time"].startswith("invalid_time: ")
    assert errors["bad_limit"].startswith("validation_error: limit")
    assert errors["missing"].startswith("validation_error: text")
    assert errors["secret"].startswith("secret_refused: ")
    assert "hunter2" not in errors["secret"]
    assert json.loads(errors["listed"])["items"] == []  # nothing stored by any refused call


def test_mcp_over_http_needs_a_valid_bearer_token(serve: Serve) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "probe", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    forged = token(user="mallory").rsplit(".", 1)[0] + ".AAAA"
    for auth in ({}, {"Authorization": f"Bearer {forged}"}, {"Authorization": "Basic YTpi"}):
        code = "invalid_token" if "AAAA" in auth.get("Authorization", "") else "unauthenticated"
        r = httpx.post(serve.url + "/mcp", json=initialize, headers={**headers, **auth})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["data"]["code"] == code  # a JSON-RPC error, as MCP clients read one
        is_problem(httpx.post(serve.url + "/mcp", json=initialize, headers=auth), 401, code)  # to anyone else

    async def steps(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(BaseException) as refused:  # an exception group, or the SDK's own error
        run(over_http(serve), forged, steps)
    said = " ".join(str(e) for e in _flat(refused.value))
    assert "invalid_token: " in said and "-32603" not in said, said  # the SDK shows the problem's code and detail


def _flat(error: BaseException) -> list[BaseException]:
    inner = getattr(error, "exceptions", None)
    return [error] if not inner else [e for sub in inner for e in _flat(sub)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_another_persons_token_never_sees_the_memories(serve: Serve, transport: str) -> None:
    alice, bob = token(user=f"alice-{transport}"), token(user=f"bob-{transport}")
    connect = TRANSPORTS[transport](serve)

    async def remember(client: Client) -> dict[str, Any]:
        return await call(client, "remember", text="My locker code is on the blue card in my desk drawer")

    memory = run(connect, alice, remember)

    async def snoop(client: Client) -> dict[str, Any]:
        return {
            "recall": await call(client, "recall", query="locker code blue card desk drawer"),
            "list": await call(client, "list_memories", q="locker"),
            "get": await failure(client, "get_memory", id=memory["id"]),
            "history": await failure(client, "memory_history", id=memory["id"]),
            "correct": await failure(client, "correct_memory", id=memory["id"], text="mine now"),
            "forget": await failure(client, "forget_memory", id=memory["id"]),
        }

    seen = run(connect, bob, snoop)
    assert seen["recall"]["items"] == [] and seen["list"]["items"] == []
    for name in ("get", "history", "correct", "forget"):
        assert seen[name].startswith("not_found: "), (name, seen[name])

    async def still_there(client: Client) -> dict[str, Any]:
        return await call(client, "get_memory", id=memory["id"])

    assert run(connect, alice, still_there)["text"] == memory["text"]  # untouched by bob's attempts


def test_stdio_without_a_token_or_a_service() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    done = subprocess.run(ENGRAM + ["mcp"], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "ENGRAM_TOKEN" in done.stderr and done.stdout == ""

    class Nowhere:  # a port nothing listens on
        url = f"http://127.0.0.1:{_free_port()}"

    async def steps(client: Client) -> str:
        return await failure(client, "recall", query="anything")

    text = run(over_stdio(Nowhere()), token(), steps)  # type: ignore[arg-type]
    assert text.startswith("unavailable: ") and Nowhere.url in text


def test_stdio_with_a_bot_key_acts_for_the_person_it_names(serve: Serve) -> None:
    admin = {"Authorization": f"Bearer {token(company='keys-co', user='root', role='admin')}"}
    directory = {"teams": {}, "sources": {}, "bots": {"b-agent": {"teams": [], "sources": []}}}
    assert httpx.put(f"{serve.url}/v1/admin/directory", json=directory, headers=admin, timeout=30).status_code == 200
    key = httpx.post(f"{serve.url}/v1/admin/bots/b-agent/keys", headers=admin, timeout=30).json()["key"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "engram"), args=["mcp"],
                                   env={**env, "ENGRAM_URL": serve.url, "ENGRAM_API_KEY": key, "ENGRAM_PERSON": "kim"})

    async def steps() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(params, client_info=AGENT) as client:
            made = await call(client, "remember", text="I water the plants on Sundays")
            return made, await call(client, "recall", query="plants")

    made, recalled = anyio.run(steps)
    assert [i["id"] for i in recalled["items"]] == [made["id"]]
    kim = {"Authorization": f"Bearer {token(company='keys-co', user='kim')}"}
    assert httpx.get(f"{serve.url}/v1/memories/{made['id']}", headers=kim, timeout=30).json()["text"] \
        == "I water the plants on Sundays"  # kim's own memory, remembered by her bot
    done = subprocess.run(ENGRAM + ["mcp"], env={**env, "ENGRAM_API_KEY": key}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "ENGRAM_PERSON" in done.stderr and key not in done.stderr
