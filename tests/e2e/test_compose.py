"""docker-compose.yml stays a valid distributed deployment."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_config_passes_and_names_every_service() -> None:
    compose = _compose()
    if compose is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    env = {**os.environ, "ENGRAM_MASTER_KEY": "k" * 43, "ENGRAM_TOKEN_SECRET": "s" * 32,
           "ENGRAM_HINDSIGHT_PUBLIC_KEY": "p" * 43}
    out = subprocess.run([*compose, "config"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for service in ("postgres:", "kafka:", "hindsight:", "api-1:", "api-2:", "relay:", "worker-1:", "worker-2:"):
        assert service in out.stdout
    assert out.stdout.count("healthcheck:") >= 8
    assert "hindsight_guard.extension:EngramBankGuard" in out.stdout  # Hindsight loads Engram's guard
    # without the master key the deployment refuses to start rather than generate one per replica
    for required in ("ENGRAM_MASTER_KEY", "ENGRAM_HINDSIGHT_PUBLIC_KEY"):
        bare = {k: v for k, v in env.items() if k != required}
        assert subprocess.run([*compose, "config"], cwd=ROOT, env=bare, capture_output=True).returncode != 0


def test_the_readme_names_every_variable_the_deployment_reads() -> None:
    """The compose file reads only the variables the table in docs/deployment.md names, each required or not as
    the table says; and its commands set the required ones."""
    import re

    compose = (ROOT / "docker-compose.yml").read_text()
    used: dict[str, bool] = {}  # name -> required (`${NAME:?...}`)
    for name, kind in re.findall(r"\$\{([A-Z_][A-Z0-9_]*)(:\?|:-|\?|-)?", compose):
        used[name] = used.get(name, False) or kind in (":?", "?")
    readme = (ROOT / "docs" / "deployment.md").read_text()
    section = readme[readme.index("## Distributed deployment"):]
    section = section[:section.index("\n## ", 1)]
    named: dict[str, bool] = {}
    for names, required in re.findall(r"^\| ((?:`[A-Z_0-9]+`(?:, )?)+) \| (yes|no)", section, re.M):
        for name in re.findall(r"`([A-Z_0-9]+)`", names):
            named[name] = required == "yes"
    assert used, "the compose file reads variables"
    assert named == used, f"README table {named} != compose {used}"
    for name in (n for n, required in used.items() if required):
        assert f"export {name}=" in section, f"the README's commands do not set {name}"
