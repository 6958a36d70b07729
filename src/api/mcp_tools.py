"""The Model Context Protocol face of Engram: the eight tools of API.md "For agents and programs".

One definition serves both transports. A tool only shapes its arguments into the request body the
HTTP API takes and hands it to a `Backend`: over stdio (`engram mcp`) the backend is the HTTP API of a
running service (`mcp_remote.py`); inside `engram serve` it is the services themselves, called for the
caller of the verified bearer token (`mcp_http.py`). Either way a tool answers with the same JSON
document the HTTP API answers, and a problem becomes a tool error that starts with its `code`
(`not_found: no such memory`), so an agent can act on it as a program acts on a problem response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import AfterValidator, Field, ValidationError

from engram.domain.text import is_valid_id

INSTRUCTIONS = (
    "Engram is the long-term memory of one person: what they asked to be remembered about themselves "
    "(preferences, plans, facts about their work and life), with the evidence each memory rests on. "
    "Use `recall` before answering anything that may depend on what the person told you earlier; "
    "`remember` only what the person explicitly asks you to remember, in their own words; "
    "`correct_memory` when they say a memory is wrong or has changed; `forget_memory` when they ask you "
    "to forget. Every result is a JSON document; an error starts with a code such as `not_found:`."
)


class Problem(ToolError):
    """A problem response, or a domain error, as a tool reports it: `code: detail`."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


class Backend(Protocol):
    """What the tools need of Engram: the HTTP API's requests, each answering its JSON document or
    raising `Problem`. The bodies are the HTTP API's request bodies."""

    async def recall(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def remember(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def list_memories(self, q: str | None) -> dict[str, Any]: ...
    async def get_memory(self, memory_id: str) -> dict[str, Any]: ...
    async def memory_history(self, memory_id: str) -> dict[str, Any]: ...
    async def correct_memory(self, memory_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def forget_memory(self, memory_id: str) -> dict[str, Any]: ...
    async def forget_status(self, forget_id: str) -> dict[str, Any]: ...


BackendOf = Callable[[Context], Backend]  # the backend serving one tool call (its caller, on HTTP)

# Argument types: what the input schemas tell an agent. Bounds the SDK checks become `validation_error`.
def _an_id(value: str) -> str:
    """An id names one thing, checked before any URL is built from it (`engram mcp` builds them)."""
    if not is_valid_id(value):
        raise ValueError("an id is printable text of at most 200 characters, other than . and ..")
    return value


MemoryId = Annotated[str, AfterValidator(_an_id), Field(min_length=1, max_length=200,
                                                        description="a memory's `id`, as recall and list_memories return it")]
Tag = Annotated[str, Field(min_length=1, max_length=64, description="a label of at most 64 characters")]


def _client_name(ctx: Context) -> str:
    """The connected client's own name (from its `initialize`), or `mcp` when it gave none."""
    try:
        params = ctx.session.client_params
    except (ValueError, AttributeError):
        return "mcp"
    name = params.client_info.name if params is not None else None
    return name.strip()[:200] if isinstance(name, str) and name.strip() else "mcp"


def _result(document: dict[str, Any]) -> CallToolResult:
    """The document as JSON text (what API.md promises) and as structured content."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=document)


class EngramMCP(MCPServer[Any]):
    """An MCP server whose tool errors start with a code: argument validation reports
    `validation_error: <field>: <message>` (field names and messages only, never the values)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                                   for e in cause.errors())
                raise ToolError(f"validation_error: {fields}") from cause
            if isinstance(cause, Problem):
                raise ToolError(str(cause)) from cause
            raise


TOOL_NAMES = frozenset({"recall", "remember", "list_memories", "get_memory", "memory_history", "correct_memory",
                        "forget_memory", "forget_status"})  # the tools below (tests/integration/test_mcp_http.py)


class OnlyOurToolNames(logging.Filter):
    """The SDK logs a failed call with its tool's name: for a name no tool has, that is the caller's own
    text, so such a line says `an unknown tool` instead (our tools' lines stay as they are)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args and str(record.msg).startswith("Tool %r") \
                and record.args[0] not in self.names:
            record.msg, record.args = "Tool call failed: %s", ("an unknown tool",)
        return True


def build_server(backend_of: BackendOf) -> EngramMCP:
    """The eight tools, each calling the backend that serves the current call."""
    server = EngramMCP("engram", title="Engram memory", instructions=INSTRUCTIONS, version="1", log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=read_only, structured_output=False)
    async def recall(
        ctx: Context,
        query: Annotated[str, Field(description="what to look for, in the person's words or a question "
                                                "('how do I like my reports?'); empty lists the most relevant")] = "",
        as_of: Annotated[str | None, Field(description="recall what was valid at this RFC 3339 time with an offset "
                                                       "(default now)", json_schema_extra={"format": "date-time"})] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="at most this many items")] = 20,
    ) -> CallToolResult:
        """Recall what the person told Engram that bears on a question or topic: confirmed memories and
        insights valid now (or at `as_of`), best match first. Use it before answering anything that may
        depend on the person's preferences, plans or facts they shared earlier. Returns
        {"items": [{"id", "kind", "text", "revision", "valid_from", "valid_to", "evidence", "score"}],
        "degraded", "bytes"}; an item's `id` is what get_memory, correct_memory and forget_memory take."""
        body = {"query": query, "limit": limit, **({"as_of": as_of} if as_of is not None else {})}
        return _result(await backend_of(ctx).recall(body))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False), structured_output=False)
    async def remember(
        ctx: Context,
        text: Annotated[str, Field(min_length=1, description="the statement to remember, exactly as the person "
                                                            "said it (at most 8 KiB of UTF-8)")],
        tags: Annotated[list[Tag] | None, Field(max_length=16, description="optional labels (up to 16) to "
                                                                          "filter by later")] = None,
        source_id: Annotated[str | None, Field(min_length=1, max_length=200, description="where it was said, e.g. "
                                               "the chat's id (default: this client's name)")] = None,
        message_id: Annotated[str | None, Field(min_length=1, max_length=200, description="the id of the "
                                                "person's message that asked to remember it")] = None,
    ) -> CallToolResult:
        """Remember a statement about the person because they explicitly asked you to ("remember that I
        prefer weekly reports as bullet points"). Store their own words, not your summary. Remembering
        the same text from the same message again answers the memory stored the first time. Returns the
        memory {"id", "text", "status": "confirmed", "revision", "valid_from", "evidence", ...}; a
        sensitive statement (health, finances, ...) comes back as a candidate with
        "status": "pending_review" that the person confirms in Engram; a secret (password, API key) is
        refused with `secret_refused` and nothing is stored."""
        source = {"kind": "mcp", "id": source_id or _client_name(ctx), "message_id": message_id}
        body: dict[str, Any] = {"text": text, "explicit": True, "source": source}
        if tags:
            body["tags"] = tags
        return _result(await backend_of(ctx).remember(body))

    @server.tool(annotations=read_only, structured_output=False)
    async def list_memories(
        ctx: Context,
        q: Annotated[str | None, Field(max_length=1024, description="only memories whose text contains these "
                                                                   "words (default: all)")] = None,
    ) -> CallToolResult:
        """List the person's confirmed memories, newest first, optionally only those matching `q`. Use it
        to show the person what Engram holds or to find a memory's id; use recall to answer a question.
        Returns {"items": [memory], "next_cursor"}."""
        return _result(await backend_of(ctx).list_memories(q))

    @server.tool(annotations=read_only, structured_output=False)
    async def get_memory(ctx: Context, id: MemoryId) -> CallToolResult:  # API.md names it `id`
        """Read one memory by id: {"id", "text", "status", "revision", "visibility", "team", "source",
        "valid_from", "valid_to", "time_uncertain", "evidence", "created_at", "updated_at"}. A memory
        that does not exist or is not the caller's answers `not_found`."""
        return _result(await backend_of(ctx).get_memory(id))

    @server.tool(annotations=read_only, structured_output=False)
    async def memory_history(ctx: Context, id: MemoryId) -> CallToolResult:
        """A memory's history: every revision and who made it, oldest first, as
        {"events": [{"type", "at", "actor", "revision", "text"}]}. After forgetting, the events stay and
        their text is null. Use it when the person asks what they said before or why a memory changed."""
        return _result(await backend_of(ctx).memory_history(id))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
                 structured_output=False)
    async def correct_memory(
        ctx: Context, id: MemoryId,
        text: Annotated[str, Field(min_length=1, description="the corrected statement, in the person's words")],
        valid_from: Annotated[str | None, Field(
            description="when the new text became true (RFC 3339 with an offset): the old text stays the answer "
                        "for earlier times. Leave it out when the old text was simply wrong",
            json_schema_extra={"format": "date-time"})] = None,
    ) -> CallToolResult:
        """Correct a memory when the person says it is wrong or has changed ("I moved to Berlin in
        March"). Without `valid_from` the new text replaces the old for all times; with it, the change
        holds from then on. Returns the memory with its revision increased by one."""
        body: dict[str, Any] = {"text": text, **({"valid_from": valid_from} if valid_from is not None else {})}
        return _result(await backend_of(ctx).correct_memory(id, body))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                             open_world_hint=False), structured_output=False)
    async def forget_memory(ctx: Context, id: MemoryId) -> CallToolResult:
        """Forget a memory when the person asks you to: Engram stops using it at once and then purges
        every copy (event store, views, search index, backups). Returns {"forget_id", "status":
        "stopped_using"}; pass `forget_id` to forget_status to follow the purge."""
        return _result(await backend_of(ctx).forget_memory(id))

    @server.tool(annotations=read_only, structured_output=False)
    async def forget_status(
        ctx: Context,
        forget_id: Annotated[str, AfterValidator(_an_id), Field(min_length=1, max_length=200, description="the `forget_id` that "
                                                                                "forget_memory returned")],
    ) -> CallToolResult:
        """Where a forget stands: {"forget_id", "status": "stopped_using" or "purge_complete", "copies":
        [{"copy", "state": "pending" or "purged", "evidence", "purged_at"}]}. Use it when the person asks
        whether something they asked you to forget is really gone."""
        return _result(await backend_of(ctx).forget_status(forget_id))

    sdk_log = logging.getLogger("mcp.server.mcpserver.server")
    for old in [f for f in sdk_log.filters if isinstance(f, OnlyOurToolNames)]:
        sdk_log.removeFilter(old)  # one filter, however many servers this process builds
    sdk_log.addFilter(OnlyOurToolNames(set(TOOL_NAMES)))
    return server
