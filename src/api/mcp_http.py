"""MCP over streamable HTTP at `/mcp` inside `engram serve` (ADR 0028).

Every request to `/mcp` is authenticated like every other route (`dependencies.any_caller`: the same
token decoder, the same 401 problem); the verified caller rides on the request's ASGI scope to the
tool call it carries, and the tools call the services for that caller in this process: the same
request schemas validate the arguments, the same services decide visibility, the same response
models write the documents. A session id names protocol state only; who acts is decided by the
token of each request, so a session cannot lend one person's identity to another's requests.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ValidationError
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from engram.adapters.availability import UNAVAILABLE_ERRORS, DatabaseUnavailable
from engram.contract.requests import CorrectIn, RecallIn, RememberIn
from engram.domain.errors import DomainError
from engram.domain.scope import Caller
from engram.service.pending_writes import collecting

from . import dependencies, problems
from .mcp_tools import EngramMCP, Problem, build_server

if TYPE_CHECKING:
    from engram.adapters.partition_settle import PartitionSettle

PATH = "/mcp"
SESSION_HEADER = "mcp-session-id"
_CALLER = "engram.caller"  # the scope key the verified caller travels under


def _invalid(exc: ValidationError) -> Problem:
    """A request body the HTTP API would refuse with 422, as the same code (field names, no values)."""
    errors = exc.errors()
    detail = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or 'body'}: {e.get('msg', '')}" for e in errors)
    code = "invalid_time" if any(e.get("type") == "invalid_time" for e in errors) else "validation_error"
    return Problem(code, detail)


class ServiceBackend:
    """The tools' requests served by the services of this process, for one verified caller."""

    def __init__(self, request: Request, caller: Caller) -> None:
        self.request, self.caller = request, caller

    async def _run(self, work: Callable[[], BaseModel], *, admit: bool = True) -> dict[str, Any]:
        """One service call in a worker thread; a write answers once visible (API.md "Consistency"),
        or after the timeout with `visible: false`, as the HTTP API's writes do. The answer is what the
        HTTP API answers: the fields the service set, as JSON."""
        ledger = await dependencies.ledger(self.request)

        def call() -> tuple[dict[str, Any], list[Any]]:
            with collecting() as pending:
                if admit:
                    dependencies.require_admitted(self.caller, ledger)
                answer = work().model_dump(mode="json", by_alias=True, exclude_unset=True)
                return answer, pending.recordings

        try:
            document, recordings = await to_thread.run_sync(call)
            if recordings:  # left here only by a settler that defers the wait to this layer
                settle = cast("PartitionSettle", ledger.settler)
                if not await settle.visible(recordings, settle.timeout):
                    document = {**document, "visible": False}
        except DomainError as exc:
            raise Problem(exc.code, exc.detail) from None
        except UNAVAILABLE_ERRORS:
            raise Problem("unavailable", DatabaseUnavailable.detail) from None
        except ValidationError as exc:
            raise _invalid(exc) from None
        return document

    async def recall(self, body: dict[str, Any]) -> dict[str, Any]:
        service, who = await dependencies.recall_service(self.request), self.caller

        def work() -> BaseModel:
            b = RecallIn.model_validate(body)
            return service.recall(who, query=b.query, as_of=b.as_of, max_bytes=b.max_bytes, limit=b.limit)

        return await self._run(work, admit=False)  # recall works in every rollout mode

    async def remember(self, body: dict[str, Any]) -> dict[str, Any]:
        memories, who = await dependencies.memory_service(self.request), self.caller

        def work() -> BaseModel:
            b = RememberIn.model_validate(body)
            return memories.remember(who, text=b.text, source=b.source.model_dump(), occurred_at=b.occurred_at,
                                     visibility=b.visibility, team=b.team, valid_from=b.valid_from,
                                     valid_to=b.valid_to, tags=b.tags)

        return await self._run(work)

    async def list_memories(self, q: str | None) -> dict[str, Any]:
        memories, who = await dependencies.memory_service(self.request), self.caller
        return await self._run(lambda: memories.list_memories(who, q=q, limit=50, cursor=None))

    async def get_memory(self, memory_id: str) -> dict[str, Any]:
        memories, who = await dependencies.memory_service(self.request), self.caller
        return await self._run(lambda: memories.get(who, memory_id))

    async def memory_history(self, memory_id: str) -> dict[str, Any]:
        memories, who = await dependencies.memory_service(self.request), self.caller
        return await self._run(lambda: memories.history(who, memory_id))

    async def correct_memory(self, memory_id: str, body: dict[str, Any]) -> dict[str, Any]:
        memories, who = await dependencies.memory_service(self.request), self.caller

        def work() -> BaseModel:
            b = CorrectIn.model_validate(body)
            return memories.correct(who, memory_id, text=b.text, valid_from=b.valid_from, valid_to=b.valid_to,
                                    reason=b.reason, acknowledge_sensitive=b.acknowledge_sensitive,
                                    source=b.source.model_dump() if b.source else None)

        return await self._run(work)

    async def forget_memory(self, memory_id: str) -> dict[str, Any]:
        memories, who = await dependencies.memory_service(self.request), self.caller
        return await self._run(lambda: memories.forget(who, memory_id))

    async def forget_status(self, forget_id: str) -> dict[str, Any]:
        forgetting, who = await dependencies.forgetting_service(self.request), self.caller
        return await self._run(lambda: forgetting.status(who, forget_id))


def _backend_of(ctx: Context) -> ServiceBackend:
    request = ctx.request_context.request
    if not isinstance(request, Request) or not isinstance(request.scope.get(_CALLER), Caller):
        raise Problem("unauthenticated", "a bearer token is required")  # only /mcp below reaches the tools
    return ServiceBackend(request, request.scope[_CALLER])


# JSON-RPC's range for a server's own errors, one code a status (what MCP clients show beside the message)
RPC_CODES = {401: -32001, 403: -32003, 404: -32004, 429: -32029, 503: -32053}


def for_mcp(request: Request, problem: JSONResponse) -> JSONResponse:
    """A refusal of `/mcp` as an MCP client reads it: to a client that accepts event streams (every MCP
    SDK), a JSON-RPC error (`application/json`, the same status and headers) whose message is the
    problem's `code: detail` and whose data is the problem document; to anyone else the problem itself.
    MCP SDKs surface a JSON-RPC error body, where a problem document left only "-32603"."""
    if "text/event-stream" not in request.headers.get("accept", ""):
        return problem
    document = json.loads(bytes(problem.body))
    error = {"code": RPC_CODES.get(problem.status_code, -32000),
             "message": f"{document['code']}: {document['detail']}", "data": document}
    headers = {k: v for k, v in problem.headers.items() if k.lower() in ("www-authenticate", "retry-after")}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=problem.status_code,
                        headers=headers)


class McpEndpoint:
    """`/mcp`: 401 (a problem, like every route's) without a valid bearer token; else the SDK's
    streamable HTTP transport, with the verified caller in the request's scope."""

    KEPT = 10_000  # sessions whose owner is remembered; the oldest beyond that can no longer be ended early

    def __init__(self, server: EngramMCP) -> None:
        self.server = server
        self.owners: OrderedDict[str, tuple[str, str, str, str | None]] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            deployment = await dependencies.deployment_settings(request)
            caller = await dependencies.any_caller(request, None, deployment)
        except DomainError as exc:  # as every route answers it: a 401's reason, a 429's Retry-After
            await for_mcp(request, problems.of(exc))(scope, receive, send)
            return
        try:
            manager = self.server.session_manager
        except RuntimeError:  # the app's lifespan has not started the session manager
            await for_mcp(request, problems.problem(503, "unavailable", "Service unavailable",
                                                    "MCP is starting"))(scope, receive, send)
            return
        session_id = request.headers.get(SESSION_HEADER)
        identity = (caller.company, caller.person, caller.role, caller.bot)
        if request.method == "DELETE" and session_id is not None and self.owners.get(session_id) != identity:
            # a session ends only by the identity that opened it, whoever else learnt its id
            await for_mcp(request, problems.problem(404, "not_found", "Not found", "no such MCP session"))(
                scope, receive, send)
            return
        await manager.handle_request({**scope, _CALLER: caller}, receive, self._owned(send, session_id, identity))
        if request.method == "DELETE" and session_id is not None:
            self.owners.pop(session_id, None)

    def _owned(self, send: Send, session_id: str | None, identity: tuple[str, str, str, str | None]) -> Send:
        """`send`, noting who opened a session the answer names for the first time."""
        if session_id is not None:
            return send

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", ()):
                    if name.decode("latin-1").lower() == SESSION_HEADER:
                        self.owners[value.decode("latin-1")] = identity
                        while len(self.owners) > self.KEPT:
                            self.owners.popitem(last=False)
            await send(message)

        return noting


def install(app: FastAPI) -> None:
    """Mount `/mcp` and run the SDK's session manager inside the app's lifespan: each start of the
    app (a server, a test client) gets a new manager, as one can run only once."""
    server = build_server(_backend_of)
    app.router.routes.append(Route(PATH, endpoint=McpEndpoint(server), methods=["GET", "POST", "DELETE"]))
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        # The bearer token (never a cookie) is what a rebinding page cannot send, and the service may be
        # reached by any host name (a container's): the SDK's Host-header check would refuse those.
        server.streamable_http_app(streamable_http_path=PATH,
                                   transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        async with server.session_manager.run(), inner(application) as state:
            yield state

    app.router.lifespan_context = lifespan
