"""Engram for LangChain: `EngramRetriever`, a retriever over recall, and `engram_tools`, the MCP tools
as LangChain tools (the same names, descriptions and input schemas: `engram/contract/tools.json`).

    pip install 'engram[langchain]'

    from engram.integrations.langchain import EngramRetriever, engram_tools
    retriever = EngramRetriever(base_url="http://127.0.0.1:8080", token=token)
    documents = retriever.invoke("how should reports look")

Each document's `page_content` is the recalled text; its `metadata` holds `id`, `kind` (`memory` or
`insight`), `score`, `valid_from`, `valid_to` (RFC 3339 or None) and `evidence` (the quotes and where
they were said). Only what the token's caller may use now is returned, as recall returns it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, PrivateAttr

from engram.client import AsyncClient, Client, EngramError
from engram.contract.responses import RecallItem, RecallOut

__all__ = ["EngramRetriever", "engram_tools", "tool_definitions"]


def tool_definitions() -> list[dict[str, Any]]:
    """The MCP tools' names, descriptions and input JSON Schemas, as every adapter shares them."""
    document: list[dict[str, Any]] = json.loads(
        resources.files("engram.contract").joinpath("tools.json").read_text(encoding="utf-8"))
    return document


def _document(item: RecallItem) -> Document:
    seen = item.model_dump(mode="json")
    return Document(page_content=item.text or "", id=str(item.id), metadata={
        "id": seen["id"], "kind": seen["kind"], "score": seen["score"], "valid_from": seen["valid_from"],
        "valid_to": seen["valid_to"], "evidence": seen["evidence"]})


class EngramRetriever(BaseRetriever):
    """Recall as a LangChain retriever: `invoke(query)` returns the confirmed memories and insights the
    caller may use now, best match first. Give `token`, or a bot's `api_key` with the `person` it acts for."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_url: str
    token: str | None = None
    api_key: str | None = None
    person: str | None = None
    limit: int = 8
    as_of: str | None = None
    _client: Client | None = PrivateAttr(default=None)

    def _body(self, query: str) -> dict[str, Any]:
        return {"query": query, "limit": self.limit, **({"as_of": self.as_of} if self.as_of else {})}

    def _connect(self) -> Client:
        if self._client is None:
            self._client = Client(self.base_url, self.token, api_key=self.api_key, person=self.person)
        return self._client

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        recalled: RecallOut = self._connect().recall(**self._body(query))
        return [_document(item) for item in recalled.items]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        async with AsyncClient(self.base_url, self.token, api_key=self.api_key, person=self.person) as client:
            recalled = await client.recall(**self._body(query))
        return [_document(item) for item in recalled.items]


def _json(answer: Any) -> str:
    if isinstance(answer, BaseModel):
        return answer.model_dump_json()
    return json.dumps(answer)


def _calls(client: Client, source_kind: str) -> dict[str, Callable[..., Any]]:
    """What each tool sends: the same bodies the MCP tools send (api/mcp_tools.py)."""

    def recall(query: str = "", as_of: str | None = None, limit: int = 20) -> Any:
        return client.recall(query=query, limit=limit, as_of=as_of)

    def remember(text: str, tags: list[str] | None = None, source_id: str | None = None,
                 message_id: str | None = None) -> Any:
        source = {"kind": source_kind, "id": source_id or "langchain", "message_id": message_id}
        return client.remember(text=text, source=source, tags=tags)

    def correct_memory(id: str, text: str, valid_from: str | None = None) -> Any:  # `id`: the tool's own name for it
        return client.correct(id, text=text, valid_from=valid_from)

    return {
        "recall": recall,
        "remember": remember,
        "list_memories": lambda q=None: client.memories(q=q),
        "get_memory": lambda id: client.memory(id),
        "memory_history": lambda id: client.history(id),
        "correct_memory": correct_memory,
        "forget_memory": lambda id: client.forget(id),
        "forget_status": lambda forget_id: client.forget_status(forget_id),
    }


def engram_tools(client: Client, *, source_kind: str = "langchain") -> list[StructuredTool]:
    """The eight MCP tools as LangChain tools calling `client`. A result is the JSON document the API
    answers; a problem is returned to the agent as `code: detail` (e.g. `not_found: no such memory`),
    as the MCP tools report it. `source_kind`: the `kind` of what `remember` stores."""
    calls = _calls(client, source_kind)
    tools = []
    for definition in tool_definitions():
        call = calls[definition["name"]]

        def run(_call: Callable[..., Any] = call, **arguments: Any) -> str:
            try:
                return _json(_call(**{k: v for k, v in arguments.items() if v is not None}))
            except EngramError as e:
                raise ToolException(f"{e.code}: {e.detail}") from None
            except TypeError as e:  # the client's own check of an argument
                raise ToolException(f"validation_error: {e}") from None

        tools.append(StructuredTool.from_function(func=run, name=definition["name"],
                                                  description=definition["description"],
                                                  args_schema=definition["input_schema"], handle_tool_error=True,
                                                  infer_schema=False))
    return tools
