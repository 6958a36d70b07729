"""ADR 0030's procedure for the embedded default, run as written against a real `engram serve`: a new key
file, a rotation refused while the service still wraps with the old key, a restart, the rotation beside
the serving process while recalls go on, and a start with the new key alone."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from .test_serve import ENGRAM, Server, _env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def engram(args: list[str], data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(ENGRAM + args, env=_env(data), capture_output=True, text=True, timeout=300)


def bearer(data: Path) -> dict[str, str]:
    token = engram(["token", "--company", "acme", "--user", "alice"], data)
    assert token.returncode == 0, token.stderr
    return {"Authorization": f"Bearer {token.stdout.strip()}"}


def remember(url: str, headers: dict[str, str], text: str, message_id: str) -> httpx.Response:
    return httpx.post(url + "/v1/memories", headers=headers, timeout=30, json={
        "text": text, "explicit": True, "source": {"kind": "chat", "id": "chat-1", "message_id": message_id}})


def recall(url: str, headers: dict[str, str], query: str) -> httpx.Response:
    return httpx.post(url + "/v1/recall", headers=headers, json={"query": query, "limit": 50}, timeout=30)


def test_the_embedded_procedure_beside_a_running_service(tmp_path: Path) -> None:
    data = tmp_path / "engram-data"
    server = Server(data)
    try:
        headers = bearer(data)
        ids = {}
        for i in range(30):
            r = remember(server.url, headers, f"I sailed to island number {i}", f"m-{i}")
            assert r.status_code == 201, r.text
            ids[i] = r.json()["id"]
        assert httpx.post(f"{server.url}/v1/memories/{ids[0]}/forget", headers=headers).status_code == 202
        old = (data / "master.key").read_text()

        new_key = engram(["keys", "new"], data)
        assert new_key.returncode == 0, new_key.stderr
        refused = engram(["keys", "rotate"], data)  # the service still wraps with the old key
        assert refused.returncode == 2
        assert "1 running Engram process(es)" in refused.stderr and "Traceback" not in refused.stderr
        status = engram(["keys", "status"], data)
        assert status.returncode == 1 and "remaining under other master keys: 29 data keys" in status.stdout
    finally:
        assert server.stop() in (0, 128 + signal.SIGTERM)

    server = Server(data)  # step 4: restarted, it wraps with the new key and reads either
    try:
        assert recall(server.url, headers, "sailed island").status_code == 401  # the development secret changed
        headers = bearer(data)
        answers: list[tuple[int, int]] = []
        done = threading.Event()

        def recall_meanwhile() -> None:
            while not done.is_set():
                r = recall(server.url, headers, "sailed island")
                answers.append((r.status_code, len(r.json().get("items", [])) if r.status_code == 200 else -1))

        reader = threading.Thread(target=recall_meanwhile)
        reader.start()
        try:
            rotated = engram(["keys", "rotate", "--batch-size", "3"], data)
        finally:
            done.set()
            reader.join(60)
        assert rotated.returncode == 0, rotated.stderr
        assert "re-wrapped 29 data keys and the derivation root" in rotated.stdout
        assert answers and set(answers) == {(200, 29)}  # every recall meanwhile answered, with every memory

        status = engram(["keys", "status"], data)
        assert status.returncode == 0 and "remaining under other master keys: 0 data keys" in status.stdout
        for text in (old, (data / "master.key").read_text()):
            assert text.strip().rstrip("=") not in new_key.stdout + rotated.stdout + status.stdout + status.stderr
        again = remember(server.url, headers, "I sailed to island number 5", "m-5")
        assert again.status_code == 200 and again.json()["id"] == ids[5]
    finally:
        assert server.stop() in (0, 128 + signal.SIGTERM)

    (data / "master.key.previous").unlink()  # step 8: the previous key retired
    server = Server(data)
    try:
        r = recall(server.url, headers, "sailed island")
        assert r.status_code == 200
        assert sorted(item["text"] for item in r.json()["items"]) == sorted(
            f"I sailed to island number {i}" for i in range(1, 30))
        assert httpx.get(f"{server.url}/v1/memories/{ids[0]}", headers=headers).json()["text"] is None
    finally:
        assert server.stop() in (0, 128 + signal.SIGTERM)
