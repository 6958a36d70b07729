"""The agent-framework adapters' one tool definition (src/contract/tools.json) is the MCP tools':
names, descriptions and input schemas, so an agent sees the same tools whichever way it connects."""

from __future__ import annotations

import json
from importlib import resources

from scripts.tool_definitions import text


def test_the_shared_definitions_are_the_mcp_tools() -> None:
    shipped = resources.files("engram.contract").joinpath("tools.json").read_text(encoding="utf-8")
    assert shipped == text(), "src/contract/tools.json is stale: run .venv/bin/python scripts/tool_definitions.py"
    names = [t["name"] for t in json.loads(shipped)]
    assert names == ["recall", "remember", "list_memories", "get_memory", "memory_history", "correct_memory",
                     "forget_memory", "forget_status"]
