"""The README's five-minute tour, run as written against a running `engram serve`.

The shell block runs in bash from the repository root (curl and jq, `.venv/bin/engram token`), the
Python block with the package's client; only the service's address is changed, to the test server's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client as McpClient
from mcp import Implementation, StdioServerParameters

from tests.e2e.test_client import serve  # noqa: F401 - the module's running service
from tests.support.helpers import SECRET, token

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "http://127.0.0.1:8080"


def _tour_blocks() -> dict[str, str]:
    readme = (ROOT / "README.md").read_text()
    tour = readme[readme.index("## A five-minute tour"):]
    tour = tour[:tour.index("\n## ", 1)]
    blocks = dict(re.findall(r"```(sh|python)\n(.*?)```", tour, re.S)[:2])
    assert set(blocks) == {"sh", "python"}, "the tour has a shell block and a Python block"
    return blocks


def _environment(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_TOKEN_SECRET"] = SECRET  # what the test server signs with, as `engram token` is told to
    env["ENGRAM_URL"] = url
    return env


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="the tour's shell needs curl and jq")
def test_the_shell_tour_runs_as_written(serve: str) -> None:  # noqa: F811
    script = _tour_blocks()["sh"]
    assert f"URL={DEFAULT_URL}" in script
    script = "set -euo pipefail\n" + script.replace(f"URL={DEFAULT_URL}", f"URL={serve}")
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=_environment(serve), capture_output=True,
                          text=True, timeout=120)
    out = done.stdout
    print(out)
    assert done.returncode == 0, done.stderr[-2000:] + out[-2000:]
    # recall answered the memory with its quote; the conversation was queued and learned from
    assert '"quote": "I prefer weekly reports as short bullet points"' in out, out
    assert '{"receipt_id":"chat-42-m-9","state":"queued"' in out, out
    assert '"quote":"I live in Lisbon."' in out, out  # a candidate learned from Alice's own message
    assert "Noted." not in out  # the assistant's words are never learned
    status = re.search(r'"status": "(stopped_using|purge_complete)"', out)
    assert status, out
    assert '"event_store: purged"' in out and '"recall_view: purged"' in out, out


def test_the_python_tour_runs_as_written(serve: str) -> None:  # noqa: F811
    code = _tour_blocks()["python"]
    assert code.count("\n") <= 6 + 1, "six lines of Python (and an import of os)"
    assert DEFAULT_URL in code
    env: dict[str, Any] = {**_environment(serve), "T": token(company="acme", user="tour-python")}
    done = subprocess.run([sys.executable, "-c", code.replace(DEFAULT_URL, serve)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert "('Risks come first in every report', 'Risks come first in every report')" in lines[0]
    assert lines[1] in ("stopped_using", "purge_complete")


def _block(heading: str, language: str) -> str:
    """The first `language` block of the README section under `heading`."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(heading):]
    found = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert found, f"the README's {heading!r} has a {language} block"
    return found.group(1)


def test_the_mcp_configuration_runs_as_written(serve: str) -> None:  # noqa: F811
    """The stdio configuration, with only its two placeholders filled in: the SDK's client starts the
    command with exactly that environment and finds the eight tools and the person's memory."""
    engram = json.loads(_block("### Connecting an MCP client", "json"))["mcpServers"]["engram"]
    assert engram["command"] == "/path/to/.venv/bin/engram" and engram["env"]["ENGRAM_URL"] == DEFAULT_URL
    assert engram["env"]["ENGRAM_TOKEN"] == "<the person's token>"
    bearer = token(company="acme", user="tour-mcp")
    env = {**engram["env"], "ENGRAM_URL": serve, "ENGRAM_TOKEN": bearer}
    command = str(Path(sys.executable).parent / "engram")  # the .venv this suite runs from

    async def steps() -> tuple[set[str], str]:
        params = StdioServerParameters(command=command, args=engram["args"], env=env)
        async with McpClient(params, client_info=Implementation(name="readme", version="1")) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            said = await client.call_tool("remember", {"text": "The standup moved to 9:30"})
            assert not said.is_error, said.content
            found = await client.call_tool("recall", {"query": "when is the standup"})
            assert not found.is_error and found.content[0].type == "text", found.content
            return names, found.content[0].text

    names, recalled = anyio.run(steps)
    assert names == {"recall", "remember", "list_memories", "get_memory", "memory_history", "correct_memory",
                     "forget_memory", "forget_status"}
    assert "The standup moved to 9:30" in json.loads(recalled)["items"][0]["text"]


def test_the_page_link_signs_the_person_in(serve: str) -> None:  # noqa: F811
    """The shell line that prints a person's link, run as written: the link signs Alice in with a
    session cookie, drops the token from the address, and her page opens."""
    line = _block("## The person's page", "sh")
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + line], cwd=ROOT, env=_environment(serve),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    link = done.stdout.strip()
    assert link.startswith(DEFAULT_URL + "/memory?token=")
    with httpx.Client(base_url=serve) as browser:
        signed = browser.get(link.removeprefix(DEFAULT_URL))
        assert signed.status_code == 303 and "token=" not in signed.headers["location"]
        assert browser.cookies, "a session cookie"
        page = browser.get(signed.headers["location"])
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "alice" in page.text


def test_the_two_commands_are_the_ones_make_and_ci_run() -> None:
    """The README's first block: `make serve` runs `engram serve` from .venv, and `.ci/run` runs the
    same `make test` (which this suite is)."""
    block = _block("## The two commands", "sh")
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make serve", "make test"]
    dry = subprocess.run(["make", "-n", "serve"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and ".venv/bin/engram serve" in dry.stdout, dry.stdout + dry.stderr
    recipe = re.search(r"^test: .*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M)  # not run: it is this suite
    assert recipe and "-m pytest -q tests" in recipe.group(1)
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")
