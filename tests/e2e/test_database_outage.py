"""PostgreSQL taken away under a running `engram serve` (embedded default) and brought back with the
wheel's own pg_ctl; and restarts after a crash that left a stale postmaster.pid."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_serve import ENGRAM, _env, _free_port, _run
from tests.support.deployment import pg_ctl, postgres_running, postmaster, start_postgres, stop_leftover
from tests.support.helpers import wait_until_ready

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ANSWER_WITHIN = 5.0  # the contract: a 503 within 5 s of receiving the call
RESUME_WITHIN = 30.0  # the contract: service resumes within 30 s of the database answering again


class LoggedServer:
    """`engram serve` with its output in a file (a pipe nobody reads would block it when logs pile up)."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(self.port)], env=_env(data_dir),
                                         stdout=out, stderr=subprocess.STDOUT)
        wait_until_ready(self.proc, self.url, self.output)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def token(data: Path, **claims: str) -> dict[str, str]:
    args = ["token"] + [f"--{k}={v}" for k, v in claims.items()]
    return {"Authorization": "Bearer " + _run(args, data).strip()}


def remember(url: str, headers: dict[str, str], text: str, message_id: str) -> httpx.Response:
    return httpx.post(url + "/v1/memories", headers=headers, timeout=10, json={
        "text": text, "explicit": True, "source": {"kind": "chat", "id": "chat-1", "message_id": message_id}})


def test_calls_get_503_quickly_while_postgres_is_stopped_and_service_resumes_when_it_is_back(
        tmp_path: Path) -> None:
    data, log = tmp_path / "engram-data", tmp_path / "serve.log"
    pgdata = data / "pg"
    server = LoggedServer(data, log)
    figures: dict[str, Any] = {}
    try:
        alice = token(data, company="acme", user="alice")
        admin = token(data, company="acme", user="root", role="admin")
        ids = []
        for i in range(3):
            r = remember(server.url, alice, f"I prefer agenda item {i} first", f"m-{i}")
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])

        socket_dir = postmaster(pgdata)[4]
        pg_ctl(pgdata, "-m", "fast", "-w", "stop")

        calls: list[tuple[str, str, dict[str, str], Any]] = [
            ("POST", "/v1/memories", alice, {"text": "I prefer tea", "explicit": True,
                                            "source": {"kind": "chat", "id": "chat-1", "message_id": "m-9"}}),
            ("GET", "/v1/memories", alice, None),
            ("GET", f"/v1/memories/{ids[0]}", alice, None),
            ("POST", "/v1/recall", alice, {"query": "agenda"}),
            ("GET", "/v1/candidates", alice, None),
            ("PUT", "/v1/settings", alice, {"learning_paused": True, "use_paused": False}),
            ("GET", "/v1/admin/directory", admin, None),
            ("GET", "/v1/admin/status", admin, None),
            ("POST", "/v1/memories", alice, {"text": "I prefer coffee", "explicit": True,
                                            "source": {"kind": "chat", "id": "chat-1", "message_id": "m-10"}}),
        ]
        took = []
        for method, path, headers, body in calls:
            started = time.monotonic()
            r = httpx.request(method, server.url + path, headers=headers, json=body, timeout=ANSWER_WITHIN)
            took.append(time.monotonic() - started)
            assert r.status_code == 503, (method, path, r.status_code, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["code"] == "unavailable"
            assert int(r.headers["retry-after"]) > 0
            assert "agenda" not in r.text and "tea" not in r.text
        figures["503_first_s"], figures["503_max_s"] = round(took[0], 3), round(max(took), 3)

        for path in ("/livez", "/healthz"):
            assert httpx.get(server.url + path, timeout=ANSWER_WITHIN).status_code == 200
        metrics = httpx.get(server.url + "/metrics", timeout=ANSWER_WITHIN)  # what it can: not a 503
        assert metrics.status_code == 200 and "\nengram_database_up 0.0\n" in metrics.text
        assert 'engram_http_requests_total{method="POST",route="/v1/recall",status="503"} 1.0' in metrics.text
        r = httpx.get(server.url + "/readyz", timeout=ANSWER_WITHIN)
        assert r.status_code == 503 and "retry-after" in r.headers

        start_postgres(pgdata, socket_dir)
        back = time.monotonic()
        ready = served = None
        while time.monotonic() - back < RESUME_WITHIN and served is None:
            if ready is None and httpx.get(server.url + "/readyz", timeout=ANSWER_WITHIN).status_code == 200:
                ready = time.monotonic() - back
            if httpx.get(server.url + "/v1/memories", headers=alice, timeout=ANSWER_WITHIN).status_code == 200:
                served = time.monotonic() - back
            else:
                time.sleep(0.2)
        assert served is not None, "service did not resume within 30 s of the database answering again"
        figures["ready_after_s"], figures["served_after_s"] = ready, round(served, 3)

        listed = httpx.get(server.url + "/v1/memories", headers=alice, timeout=10).json()["items"]
        assert set(ids) <= {m["id"] for m in listed}
        for memory_id in ids:
            assert httpx.get(server.url + f"/v1/memories/{memory_id}", headers=alice, timeout=10).status_code == 200
        r = remember(server.url, alice, "I prefer tea", "m-9")
        assert r.status_code == 201, r.text
        recalled = httpx.post(server.url + "/v1/recall", headers=alice, json={"query": "agenda"}, timeout=10)
        assert len(recalled.json()["items"]) == 3
    finally:
        code = server.stop()
        leftover = stop_leftover(pgdata)
    print("outage figures:", figures)
    output = server.output()
    assert code in (0, 128 + signal.SIGTERM), output
    assert output.count("database lost") == 1, output
    assert output.count("database back") == 1, output
    assert "Traceback" not in output, output
    assert "agenda" not in output and "tea" not in output
    assert not leftover, "the PostgreSQL started by pg_ctl outlived engram serve"


@pytest.mark.parametrize("crash", ["serve", "postgres_and_serve", "stale_pid_reused"])
def test_serve_starts_cleanly_after_a_crash(tmp_path: Path, crash: str) -> None:
    data, log = tmp_path / "engram-data", tmp_path / "serve.log"
    pgdata = data / "pg"
    server = LoggedServer(data, log)
    alice = token(data, company="acme", user="alice")
    r = remember(server.url, alice, "I prefer the late train", "m-1")
    assert r.status_code == 201, r.text
    memory_id = r.json()["id"]

    postmaster_pid = int(postmaster(pgdata)[0])
    if crash != "serve":
        os.kill(postmaster_pid, signal.SIGKILL)
    server.proc.kill()
    server.proc.wait(timeout=30)
    bystander = None
    if crash == "stale_pid_reused":  # the crashed postmaster's pid now belongs to an unrelated process
        bystander = subprocess.Popen(["sleep", "300"])
        lines = postmaster(pgdata)
        (pgdata / "postmaster.pid").write_text("\n".join([str(bystander.pid), *lines[1:]]) + "\n")
    if crash != "serve":
        assert (pgdata / "postmaster.pid").exists()

    leftover = False
    try:
        server = LoggedServer(data, log)
        try:
            r = httpx.get(server.url + f"/v1/memories/{memory_id}", headers=alice, timeout=10)
            assert r.status_code == 200 and r.json()["text"] == "I prefer the late train"
            assert remember(server.url, alice, "I prefer aisle seats", "m-2").status_code == 201
        finally:
            assert server.stop() in (0, 128 + signal.SIGTERM)
        if bystander is not None:
            assert bystander.poll() is None, "the unrelated process holding the old pid was killed"
        leftover = postgres_running(pgdata)
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()
        stop_leftover(pgdata)
    assert not leftover
    assert "Traceback" not in server.output(), server.output()
