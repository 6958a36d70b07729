"""`engram serve` on the embedded default: starts PostgreSQL, stops it on exit, finds its data again."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.deployment import postgres_running
from tests.support.helpers import wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
ENGRAM = [str(Path(sys.executable).parent / "engram")]  # the installed console script


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(data_dir)
    return env


def _run(args: list[str], data_dir: Path) -> str:
    return subprocess.run(ENGRAM + args, env=_env(data_dir), check=True, capture_output=True, text=True,
                          timeout=120).stdout


class Server:
    def __init__(self, data_dir: Path) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(self.port)], env=_env(data_dir),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until_ready(self.proc, self.url,
                         lambda: self.proc.stdout.read().decode() if self.proc.stdout else "serve exited")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.mark.e2e
def test_serve_keeps_data_across_restarts(tmp_path: Path) -> None:
    data = tmp_path / "engram-data"
    server = Server(data)
    try:
        token = _run(["token", "--company", "acme", "--user", "alice"], data).strip()
        headers = {"Authorization": f"Bearer {token}"}
        r = httpx.post(server.url + "/v1/memories", headers=headers, json={
            "text": "I prefer standups at 9:30", "explicit": True,
            "source": {"kind": "chat", "id": "chat-1", "message_id": "m-1"}})
        assert r.status_code == 201, r.text
        memory_id = r.json()["id"]
        # the in-process worker learns from a receipt in the background
        r = httpx.post(server.url + "/v1/receipts", headers=headers, json={
            "receipt_id": "r-1", "author": "user", "text": "Great. I prefer decaf after 3pm.",
            "source": {"kind": "chat", "id": "chat-1", "message_id": "m-2"}})
        assert r.status_code == 202 and r.json()["state"] == "queued"
        deadline = time.monotonic() + 30
        found: list = []
        while not found and time.monotonic() < deadline:
            found = httpx.get(server.url + "/v1/candidates", headers=headers).json()["items"]
            time.sleep(0.2)
        assert [c["evidence"][0]["quote"] for c in found] == ["I prefer decaf after 3pm."]
    finally:
        code = server.stop()
    assert code in (0, 128 + signal.SIGTERM)
    assert not postgres_running(data / "pg"), "embedded PostgreSQL still running after serve exited"
    assert (data / "master.key").stat().st_mode & 0o077 == 0

    status = _run(["projections", "status"], data)
    assert "recall" in status and "lag 0" in status
    # its 2 memory events of the 5 stored (the directory's and the settings' are not read)
    assert "applied 2 events, up to position 5" in _run(["projections", "rebuild", "recall"], data)

    server = Server(data)
    try:
        items = httpx.post(server.url + "/v1/recall", headers=headers, json={"query": "standups"}).json()["items"]
        assert [(i["id"], i["text"]) for i in items] == [(memory_id, "I prefer standups at 9:30")]
    finally:
        server.stop()
    assert not postgres_running(data / "pg")


@pytest.mark.e2e
def test_receipts_answered_before_the_views_survive_a_kill_and_are_learned_after_it(tmp_path: Path) -> None:
    """A receipt answers after its commit, before the views apply it (ADR 0063). Killed outright right after
    the answers, the server has left every acknowledged receipt in the events: after a restart the views
    catch up, the worker learns from each one, and each says `done` with its candidate."""
    data = tmp_path / "engram-data"
    server = Server(data)
    token = _run(["token", "--company", "acme", "--user", "alice"], data).strip()
    headers = {"Authorization": f"Bearer {token}"}
    foods = ["figs", "kiwis", "dates", "plums", "pears", "limes", "grapes", "melons", "mangoes", "apricots"]
    sent = []
    try:
        for batch in range(3):
            messages = [{"receipt_id": f"r-{batch}-{i}", "author": "user", "text": f"I prefer {food} for breakfast.",
                         "source": {"kind": "chat", "id": f"chat-{batch}", "message_id": f"m-{batch}-{i}"}}
                        for i, food in enumerate(foods)]
            r = httpx.post(server.url + "/v1/receipts", headers=headers, json={"messages": messages})
            assert r.status_code == 202 and {i["state"] for i in r.json()["items"]} == {"queued"}, r.text
            sent += [m["receipt_id"] for m in messages]
    finally:
        server.proc.kill()  # no shutdown: nothing flushed, the background catch-up cut wherever it was
        server.proc.wait(timeout=30)

    server = Server(data)  # (the embedded PostgreSQL outlived the kill; this start takes it over)
    try:
        deadline = time.monotonic() + 60
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = {rid: httpx.get(f"{server.url}/v1/receipts/{rid}", headers=headers).json()["state"] for rid in sent}
            if set(states.values()) == {"done"}:
                break
            time.sleep(0.5)
        assert set(states.values()) == {"done"}, states
        candidates = httpx.get(server.url + "/v1/candidates?limit=100", headers=headers).json()["items"]
        assert len(candidates) == len(foods)  # the same preference in three chats is one candidate each
        assert {c["text"] for c in candidates} == {f"I prefer {food} for breakfast" for food in foods}
        status = _run(["projections", "status"], data)
        assert "lag 0" in status, status
    finally:
        server.stop()
