"""The installed `engram` on the embedded default: a backup taken while serving, a restore refused while
`engram serve` runs, and, once it is stopped, a restore after which the forgotten memory stays forgotten."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from .test_serve import _free_port
from tests.support.helpers import SECRET, auth, remember_body, wait_until_ready

ENGRAM = str(Path(sys.executable).parent / "engram")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    return {**env, "ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_TOKEN_SECRET": SECRET}


class Server:
    def __init__(self, data_dir: Path) -> None:
        port = _free_port()
        self.proc = subprocess.Popen([ENGRAM, "serve", "--port", str(port)], env=_env(data_dir),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"
        wait_until_ready(self.proc, self.url,
                         lambda: self.proc.stdout.read().decode() if self.proc.stdout else "serve exited")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def _engram(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=_env(data_dir), capture_output=True, text=True, timeout=180)


def test_backup_and_restore_with_the_embedded_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = Server(data)
    try:
        with httpx.Client(base_url=server.url, headers=auth(), timeout=30) as http:
            memory_id = http.post("/v1/memories", json=remember_body("The spare key is under the blue pot")).json()["id"]
            taken = _engram(["backup", str(tmp_path / "nightly")], data)  # while serving: a dump needs no stop
            assert taken.returncode == 0, taken.stderr
            forget_id = http.post(f"/v1/memories/{memory_id}/forget").json()["forget_id"]
            backups = {c["copy"]: c for c in http.get(f"/v1/forgets/{forget_id}").json()["copies"]}["backups"]
            assert backups["state"] == "pending" and "1 backup taken before the forget" in backups["evidence"]

            refused = _engram(["restore", str(tmp_path / "nightly")], data)
            assert refused.returncode == 2 and "stop every one of them first" in refused.stderr
            assert http.get(f"/v1/memories/{memory_id}").json()["status"] == "forgotten"  # nothing was restored
    finally:
        assert server.stop() in (0, 128 + signal.SIGTERM)

    restored = _engram(["restore", str(tmp_path / "nightly")], data)
    assert restored.returncode == 0, restored.stderr
    assert "1 events appended" in restored.stdout  # the backup predates the forget: the fence re-applied it
    assert (tmp_path / "data-tombstones" / "backups.jsonl").exists() and not list(data.rglob("backups.jsonl"))

    server = Server(data)
    try:
        with httpx.Client(base_url=server.url, headers=auth(), timeout=30) as http:
            got = http.get(f"/v1/memories/{memory_id}")
            assert got.status_code == 404 or (got.json()["status"] == "forgotten" and got.json()["text"] is None)
            assert http.post("/v1/recall", json={"query": "spare key blue pot"}).json()["items"] == []
            assert http.get(f"/v1/forgets/{forget_id}").json()["status"] == "stopped_using"  # the backup is kept
    finally:
        assert server.stop() in (0, 128 + signal.SIGTERM)
