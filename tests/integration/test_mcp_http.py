"""`/mcp` inside the app, spoken to as JSON-RPC over streamable HTTP: the session manager follows the
app's lifespan, and who acts is decided by each request's bearer token (ADR 0028)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters import logs
from engram.api.http import create_app
from engram.api.mcp_tools import TOOL_NAMES

from tests.support.helpers import SECRET, is_problem, token

pytestmark = pytest.mark.integration

ACCEPT = {"Accept": "application/json, text/event-stream"}


class Session:
    """One MCP session over the test client: initialize, then tool calls; each request carries `bearer`."""

    def __init__(self, client: TestClient, bearer: str, session_id: str | None = None) -> None:
        self.client, self.bearer, self.session_id, self.ids = client, bearer, session_id, 0
        if session_id is None:
            r = self._post({"method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it-agent", "version": "1"}}})
            assert r.status_code == 200, r.text
            self.session_id = r.headers["mcp-session-id"]
            assert self._post({"method": "notifications/initialized"}, notification=True).status_code == 202

    def _post(self, message: dict[str, Any], notification: bool = False) -> Any:
        headers = {**ACCEPT, "Authorization": f"Bearer {self.bearer}", "mcp-protocol-version": "2025-06-18"}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        if not notification:
            self.ids += 1
            message = {**message, "id": self.ids}
        return self.client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", **message})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        r = self._post({"method": method, "params": params})
        assert r.status_code == 200, r.text
        (answer,) = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
        return answer["result"]

    def tool(self, name: str, **arguments: Any) -> tuple[bool, str]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        return bool(result.get("isError")), result["content"][0]["text"]


def is_mcp_error(r: Any, status: int, code: str) -> None:
    """A refusal as MCP clients read it: a JSON-RPC error whose data is the problem document."""
    assert r.status_code == status and r.headers["content-type"] == "application/json", (r.status_code, r.text)
    error = r.json()["error"]
    assert error["message"].startswith(f"{code}: ") and error["data"]["code"] == code
    assert error["data"]["status"] == status


def test_the_session_manager_starts_with_each_run_of_the_app(engram: Any) -> None:
    app = create_app(engram, SECRET)
    not_started = TestClient(app).post("/mcp", headers={**ACCEPT, "Authorization": f"Bearer {token()}"},
                                       json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    is_mcp_error(not_started, 503, "unavailable")  # no lifespan, no session manager
    for _ in range(2):  # a manager runs once: each start of the app needs its own
        with TestClient(app) as client:
            tools = Session(client, token()).request("tools/list", {})["tools"]
            assert {t["name"] for t in tools} == TOOL_NAMES
    with TestClient(app) as client:  # remembered in one run, read in the next
        failed, text = Session(client, token()).tool("remember", text="I take the 8:15 train")
        assert not failed, text
        memory = json.loads(text)
        assert memory["source"] == {"kind": "mcp", "id": "it-agent", "message_id": None}


def test_each_request_acts_for_its_own_token_even_in_anothers_session(client: TestClient) -> None:
    alice = Session(client, token(user="alice"))
    failed, text = alice.tool("remember", text="My bike lock code is 4711")
    assert not failed, text
    memory_id = json.loads(text)["id"]
    # bob's token riding on alice's session id: the session lends no identity
    bob_in_alices_session = Session(client, token(user="bob"), session_id=alice.session_id)
    failed, text = bob_in_alices_session.tool("get_memory", id=memory_id)
    assert failed and text.startswith("not_found: ")
    failed, text = bob_in_alices_session.tool("recall", query="bike lock code")
    assert not failed and json.loads(text)["items"] == []
    failed, text = alice.tool("get_memory", id=memory_id)
    assert not failed and json.loads(text)["text"] == "My bike lock code is 4711"


def test_tokens_are_checked_like_every_route(client: TestClient) -> None:
    expired = token(ttl=timedelta(seconds=-10))
    too_long = token(ttl=timedelta(days=400))
    other_secret = token(secret="another-secret-" + "y" * 32)
    for bearer, code in ((expired, "token_expired"), (too_long, "token_lifetime_too_long"), (other_secret, "invalid_token")):
        r = client.post("/mcp", headers={**ACCEPT, "Authorization": f"Bearer {bearer}"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        # to an MCP client: a JSON-RPC error its SDK shows, carrying the problem (the same 401 and header)
        assert r.status_code == 401 and r.headers["content-type"] == "application/json"
        assert r.headers["www-authenticate"] == "Bearer"
        error = r.json()["error"]
        assert error["code"] == -32001 and error["message"].startswith(f"{code}: ")
        assert error["data"]["code"] == code and error["data"]["status"] == 401 and error["data"]["reason"]
        # to anything else: the problem document, as every route answers
        is_problem(client.post("/mcp", headers={"Authorization": f"Bearer {bearer}"}, json={}), 401, code)


def test_an_unregistered_bot_reads_nothing_and_writes_nothing(client: TestClient) -> None:
    bot = Session(client, token(role="bot", bot="helper-bot"))
    failed, text = bot.tool("remember", text="I prefer aisle seats")
    assert failed and text.startswith("bot_not_registered: ")
    failed, text = bot.tool("recall", query="aisle seats")
    assert not failed and json.loads(text)["items"] == []
    failed, text = Session(client, token()).tool("list_memories")
    assert not failed and json.loads(text)["items"] == []  # nothing was stored for the person


def test_tags_are_stored_never_dropped(client: TestClient) -> None:
    session = Session(client, token())
    failed, text = session.tool("remember", text="Send me the weekly report on Fridays", tags=["work", "reports"])
    assert not failed, text
    assert sorted(json.loads(text)["tags"]) == ["reports", "work"]
    failed, text = session.tool("list_memories")
    assert [m["tags"] for m in json.loads(text)["items"]] == [["work", "reports"]]
    failed, text = session.tool("remember", text="x", tags=["t" * 65])
    assert failed and text.startswith("validation_error: tags")


def test_a_session_ends_only_by_the_identity_that_opened_it(client: TestClient) -> None:
    alice = Session(client, token(user="alice"))
    for intruder in (token(user="bob"), token(company="beta", user="alice"), token(role="bot", bot="b-1")):
        r = client.delete("/mcp", headers={**ACCEPT, "Authorization": f"Bearer {intruder}",
                                           "mcp-session-id": alice.session_id, "mcp-protocol-version": "2025-06-18"})
        is_mcp_error(r, 404, "not_found")
    assert len(alice.request("tools/list", {})["tools"]) == 8  # still open
    again = Session(client, token(user="alice"), session_id=alice.session_id)  # a fresh token of hers may end it
    r = client.delete("/mcp", headers={**ACCEPT, "Authorization": f"Bearer {again.bearer}",
                                       "mcp-session-id": alice.session_id, "mcp-protocol-version": "2025-06-18"})
    assert r.status_code == 200, r.text
    assert alice._post({"method": "tools/list"}).status_code == 404  # ended


def test_ids_and_tool_names_are_checked_and_never_logged(client: TestClient) -> None:
    alice = Session(client, token())
    for bad in (".", "..", "a\nb"):
        failed, text = alice.tool("get_memory", id=bad)
        assert failed and text.startswith("validation_error: "), text
        failed, text = alice.tool("forget_status", forget_id=bad)
        assert failed and text.startswith("validation_error: "), text
    marker = "zq-unknown-tool-7731\nforged line"
    written = io.StringIO()
    logs.configure("json", "debug", stream=written)  # as `engram serve` logs, at its most talkative
    try:
        result = alice.request("tools/call", {"name": marker, "arguments": {}})
    finally:
        logs.configure("text", "warning")
    assert result.get("isError") and "zq-unknown-tool-7731" in result["content"][0]["text"]  # the caller is told
    assert "zq-unknown-tool-7731" not in written.getvalue(), "a caller's text in the logs"
    assert "an unknown tool" in written.getvalue()  # said, without the name
