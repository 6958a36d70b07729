"""The README's five-minute tour, run as written against a running `engram serve`.

The shell block runs in bash from the repository root (curl and jq, `.venv/bin/engram token`), the
Python block with the package's client; only the service's address is changed, to the test server's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
