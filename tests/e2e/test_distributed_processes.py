"""The distributed deployment as separate processes: API, relay and two workers over a real broker."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.broker import TansuBroker, distributed_env, tansu_binary, topic_bytes
from tests.support.helpers import auth, wait_until_ready

ENGRAM = str(Path(sys.executable).parent / "engram")
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(tansu_binary() is None, reason="no Kafka-protocol broker installed")]


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.e2e
def test_remember_recall_correct_forget_across_processes(database, tmp_path: Path) -> None:
    broker = TansuBroker().start()
    env = distributed_env(database, broker, tmp_path)
    port = _port()
    procs = [subprocess.Popen([ENGRAM, *cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for cmd in (["relay"], ["worker", "--projections", "recall,review"], ["worker", "--projections",
                                                                                   "governance,inbox,insights,links"],
                         ["serve", "--port", str(port)])]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(procs[-1], url, lambda: "serve exited")
        text = "I keep the spare office key with reception, puffin-3301"
        with httpx.Client(base_url=url, timeout=60) as c:
            m = c.post("/v1/memories", headers=auth(), json={
                "text": text, "source": {"kind": "chat", "id": "chat-1", "message_id": "m-1"}}).json()
            found = c.post("/v1/recall", headers=auth(), json={"query": "office key"}).json()["items"]
            assert [i["id"] for i in found] == [m["id"]], [
                p.stderr.read().decode()[-2000:] for p in procs if p.poll() is not None and p.stderr]
            r = c.post(f"/v1/memories/{m['id']}/correct", headers=auth(entry="web"),
                       json={"text": "The spare office key is in the red box, puffin-3301"})
            assert r.status_code == 200
            items = c.post("/v1/recall", headers=auth(), json={"query": "office key"}).json()["items"]
            assert [(i["revision"], i["text"][:21]) for i in items] == [(2, "The spare office key ")]
            assert c.post(f"/v1/memories/{m['id']}/forget", headers=auth()).status_code == 202
            assert c.post("/v1/recall", headers=auth(), json={"query": "office key"}).json()["items"] == []
            assert c.get(f"/v1/memories/{m['id']}", headers=auth()).json()["text"] is None

        blob = topic_bytes(broker.bootstrap)
        assert b"_sealed" in blob and b"puffin" not in blob and b"office" not in blob
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        broker.stop()
    errors = [p.stderr.read().decode() for p in procs if p.stderr]
    assert not any("Traceback" in e for e in errors), errors
