"""`engram mcp`: the MCP tools over stdio, for one person, against a running Engram's HTTP API.

The token (`ENGRAM_TOKEN`) decides who the person is, exactly as for any other client of the API;
this process holds no keys and reads no database. `HttpBackend` is the only code here that speaks
HTTP: eight requests, each answering its JSON document or raising the problem's code.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import httpx2 as httpx  # a tool call the host cancels leaves no connection in the pool (ADR 0036)

from .mcp_tools import Problem, build_server

DEFAULT_URL = "http://127.0.0.1:8080"


class HttpBackend:
    """The tools' requests to the HTTP API with the person's bearer token."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0, person: str | None = None) -> None:
        """`token`: the person's bearer token, or a bot key with the `person` it acts for."""
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}", "User-Agent": "engram-mcp"}
        if person is not None:
            headers["X-Engram-Person"] = person
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, headers=headers)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError:
            raise Problem("unavailable", f"the Engram service at {self.base_url} did not answer") from None
        try:
            document = response.json()
        except ValueError:
            document = None
        if response.status_code >= 400:
            if isinstance(document, dict) and isinstance(document.get("code"), str):
                raise Problem(document["code"], str(document.get("detail") or document.get("title") or ""))
            raise Problem("http_error", f"the service answered {response.status_code}")
        if not isinstance(document, dict):
            raise Problem("http_error", "the service answered something that is not a JSON document")
        return document

    async def recall(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", "/v1/recall", json=body)

    async def remember(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", "/v1/memories", json=body)

    async def list_memories(self, q: str | None) -> dict[str, Any]:
        return await self._call("GET", "/v1/memories", params={"q": q} if q is not None else None)

    async def get_memory(self, memory_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/memories/{_segment(memory_id)}")

    async def memory_history(self, memory_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/memories/{_segment(memory_id)}/history")

    async def correct_memory(self, memory_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", f"/v1/memories/{_segment(memory_id)}/correct", json=body)

    async def forget_memory(self, memory_id: str) -> dict[str, Any]:
        return await self._call("POST", f"/v1/memories/{_segment(memory_id)}/forget")

    async def forget_status(self, forget_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/forgets/{_segment(forget_id)}")


def _segment(value: str) -> str:
    """An id as one path segment: `/`, `?` and `#` in it cannot reach another route, nor can `.` or `..`
    (the tools refuse those first; a URL never holds one)."""
    if value in (".", ".."):
        raise Problem("validation_error", "id: cannot be . or ..")
    return quote(value, safe="")


def run_stdio(environ: dict[str, str] | None = None) -> int:
    """Serve the tools on stdin/stdout until the client closes them."""
    env = os.environ if environ is None else environ
    token, key, person = (env.get(name, "").strip() for name in ("ENGRAM_TOKEN", "ENGRAM_API_KEY", "ENGRAM_PERSON"))
    if key and (token or not person):
        raise ValueError("ENGRAM_API_KEY (a bot key) goes with ENGRAM_PERSON (whom the bot acts for), not ENGRAM_TOKEN")
    if not token and not key:
        raise ValueError("set ENGRAM_TOKEN to the person's bearer token (`engram token --company C --user U`), or "
                         "ENGRAM_API_KEY and ENGRAM_PERSON for a bot key")
    backend = HttpBackend(env.get("ENGRAM_URL", "").strip() or DEFAULT_URL, token or key,
                          person=person if key else None)
    server = build_server(lambda _ctx: backend)

    async def serve() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await backend.aclose()

    import anyio

    anyio.run(serve)
    return 0
