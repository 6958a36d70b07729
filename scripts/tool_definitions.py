"""Writes src/contract/tools.json: the MCP tools' names, descriptions and input JSON Schemas, the one
definition every agent-framework adapter shares (LangChain's tools, the AI SDK's).

    .venv/bin/python scripts/tool_definitions.py

tests/unit/test_tool_definitions.py fails when the file and the MCP tools differ.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from engram.api.mcp_tools import build_server

TARGET = Path(__file__).resolve().parents[1] / "src" / "contract" / "tools.json"


def definitions() -> list[dict[str, Any]]:
    tools = asyncio.run(build_server(lambda ctx: None).list_tools())
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]


def text() -> str:
    return json.dumps(definitions(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"


if __name__ == "__main__":
    TARGET.write_text(text(), encoding="utf-8")
    print(f"wrote {TARGET}")
