"""The TypeScript client's own tests (clients/typescript, `npm test`: node's test runner against a real
`engram serve` it starts from this repository's .venv), run as part of the suite. `make typescript`
installs Node where missing and the client's development packages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def test_the_typescript_client_against_a_real_service() -> None:
    if shutil.which("npm") is None or not (CLIENT / "node_modules").is_dir():
        pytest.skip("no Node or no clients/typescript/node_modules: `make typescript` installs them")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_BIN"] = str(Path(sys.executable).parent / "engram")
    done = subprocess.run(["npm", "test"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=900)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-6000:]
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.M)
    assert passed and int(passed[1]) >= 12 and "# fail 0" in done.stdout, said[-3000:]
