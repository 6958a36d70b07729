"""The agent-framework adapters' one tool definition (src/contract/tools.json) is the MCP tools':
names, descriptions and input schemas, so an agent sees the same tools whichever way it connects."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

from scripts.tool_definitions import text

from engram.contract.examples import ARGUMENTS


def test_the_shared_definitions_are_the_mcp_tools() -> None:
    shipped = resources.files("engram.contract").joinpath("tools.json").read_text(encoding="utf-8")
    assert shipped == text(), "src/contract/tools.json is stale: run .venv/bin/python scripts/tool_definitions.py"
    names = [t["name"] for t in json.loads(shipped)]
    assert names == ["recall", "remember", "list_memories", "get_memory", "memory_history", "correct_memory",
                     "forget_memory", "forget_status"]


def test_the_typescript_client_shows_the_same_example_source() -> None:
    """Its TypeError's example is the 422's and the Python client's (engram.contract.examples.ARGUMENTS)."""
    source = (Path(__file__).resolve().parents[2] / "clients" / "typescript" / "src" / "index.ts").read_text("utf-8")
    shown = re.search(r"^const SOURCE_EXAMPLE = '(.*)';$", source, re.M)
    assert shown is not None, "clients/typescript/src/index.ts no longer names SOURCE_EXAMPLE"
    as_json = re.sub(r"(\w+): ", r'"\1": ', shown.group(1))
    assert json.loads(as_json) == ARGUMENTS["source"]
