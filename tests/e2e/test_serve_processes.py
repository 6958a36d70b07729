"""`engram serve --processes 2` on the embedded default (ADR 0037): two serving processes on one port
under the one that keeps PostgreSQL and the background loops. A caller reads its own writes whichever
process answers, /metrics counts every process's requests, a killed serving process is replaced
while the other answers (and, lost while PostgreSQL is down, once it is back), and SIGTERM stops them
all and PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.broker import free_port
from tests.support.deployment import pg_ctl, postgres_running, postmaster, start_postgres, stop_leftover
from tests.support.helpers import remember_body, wait_until_ready

ENGRAM = [str(Path(sys.executable).parent / "engram")]
SECRET = "processes-secret-" + "p" * 32
REMEMBERED = re.compile(r'engram_http_requests_total\{method="POST",route="/v1/memories",status="201"\} ([0-9.e+]+)')
DEGRADED = re.compile(r"^engram_recall_degraded_total ([0-9.e+]+)$", re.M)


def _counts(url: str) -> tuple[float, float]:
    """Remembers answered and recalls degraded, as one scrape of /metrics says."""
    text = httpx.get(url + "/metrics").text
    [degraded] = DEGRADED.findall(text)  # one family, however many processes count it
    return sum(float(n) for n in REMEMBERED.findall(text)), float(degraded)


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    return {**env, "ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_TOKEN_SECRET": SECRET, **extra}


@contextlib.contextmanager
def socket_bound(port: int) -> Iterator[None]:
    with socket.create_server(("127.0.0.1", port)):
        yield


def _serving(main: psutil.Process) -> list[psutil.Process]:
    """The serving processes: the main's spawned children (PostgreSQL's are not its children). A child
    that has just ended (a zombie until the main process reaps it, or gone) is not serving."""
    serving = []
    for child in main.children():
        try:
            command = " ".join(child.cmdline())
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
        if "multiprocessing" in command and "spawn_main" in command:
            serving.append(child)
    return serving


def _wait_for(check, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.e2e
def test_two_serving_processes_answer_as_one_service(tmp_path: Path) -> None:
    from engram.api.identity import issue_token

    data = tmp_path / "data"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as sink:  # a file, not a pipe: nobody reads while it serves
        proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(port), "--processes", "2"],
                                # Hindsight is never there: every recall is degraded (and still answers from SQL)
                                env=_env(data, ENGRAM_TOMBSTONE_DIR=str(tmp_path / "tombstones"),
                                         ENGRAM_HINDSIGHT_URL=f"http://127.0.0.1:{free_port()}"),
                                stdout=sink, stderr=subprocess.STDOUT)
    output = log_file.read_text
    try:
        wait_until_ready(proc, url, output)
        main = psutil.Process(proc.pid)
        _wait_for(lambda: len(_serving(main)) == 2)
        token = issue_token(SECRET, company="acme", user="alice", role="user", bot=None, entry="api",
                            ttl=timedelta(hours=1))
        headers = {"Authorization": f"Bearer {token}"}

        def remember_then_recall(_: int) -> bool:
            word = "zq" + uuid.uuid4().hex[:10]
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:  # a connection of its own
                r = client.post("/v1/memories", json=remember_body(f"The code name of the launch is {word}"))
                assert r.status_code == 201, r.text
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:  # so maybe the other process
                items = client.post("/v1/recall", json={"query": word, "limit": 100}).json()["items"]
            # found by its words at once, whichever process answers; the other code names, alike in meaning
            # once embedded, come with it, and until it is embedded itself before it (ADR 0040, "Known")
            return sum(word in i["text"] for i in items) == 1

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert all(pool.map(remember_then_recall, range(40)))
        for _ in range(4):  # whichever process answers /metrics counts both processes' requests and tallies
            assert _counts(url) == (40, 40)

        # one serving process killed: the other answers meanwhile, and another takes its place
        first, second = _serving(main)
        first.kill()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            assert all(pool.map(remember_then_recall, range(8)))
        _wait_for(lambda: len(_serving(main)) == 2 and first.pid not in {p.pid for p in _serving(main)})
        second.kill()  # the first one's replacement answers now
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            assert all(pool.map(remember_then_recall, range(8)))
        _wait_for(lambda: len(_serving(main)) == 2)
        assert _counts(url) == (56, 56)  # the killed processes' counts stay in the sum
        children = _serving(main)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    log = output()
    assert code in (0, 128 + signal.SIGTERM), log
    assert "2 serving processes on http://127.0.0.1" in log and "ended (exit code -9)" in log
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert not postgres_running(data / "pg")


@pytest.mark.e2e
def test_a_serving_process_lost_while_postgresql_is_down_is_replaced_when_it_is_back(tmp_path: Path) -> None:
    """Its replacements cannot start while the database is down: they are tried again later, with a
    growing delay and a one-line reason, not given up on (which would end the whole service), and the
    service is whole again once PostgreSQL answers."""
    from engram.api.identity import issue_token

    data = tmp_path / "data"
    pgdata = data / "pg"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as sink:
        proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(port), "--processes", "2"],
                                env=_env(data, ENGRAM_TOMBSTONE_DIR=str(tmp_path / "tombstones")),
                                stdout=sink, stderr=subprocess.STDOUT)
    output = log_file.read_text
    leftover = False
    try:
        wait_until_ready(proc, url, output)
        main = psutil.Process(proc.pid)
        _wait_for(lambda: len(_serving(main)) == 2)
        headers = {"Authorization": "Bearer " + issue_token(
            SECRET, company="acme", user="alice", role="user", bot=None, entry="api", ttl=timedelta(hours=1))}
        assert httpx.post(url + "/v1/memories", headers=headers, json=remember_body("I prefer tea"),
                          timeout=30).status_code == 201
        # the service has served: its processes have lived longer than a start that fails (QUICK, 10 s)
        _wait_for(lambda: time.time() - min(p.create_time() for p in _serving(main)) > 11, timeout=30)

        socket_dir = postmaster(pgdata)[4]
        pg_ctl(pgdata, "-m", "fast", "-w", "stop")
        lost = _serving(main)[0]
        lost.kill()
        _wait_for(lambda: "3 in a row in its slot" in output(), timeout=90)
        assert proc.poll() is None  # still supervising
        start_postgres(pgdata, socket_dir)

        _wait_for(lambda: len(_serving(main)) == 2 and lost.pid not in {p.pid for p in _serving(main)}
                  and output().count("Started server process") == 3, timeout=60)
        answers = set()
        for i in range(20):  # a connection each: both processes answer, the replacement among them
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:  # each a new memory
                answers.add(client.post("/v1/memories", json=remember_body(f"I prefer tea pot {i}")).status_code)
        assert answers == {201}
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        leftover = stop_leftover(pgdata)
    log = output()
    assert code in (0, 128 + signal.SIGTERM), log
    assert "cannot start: the database is not answering (OperationalError); the main process tries again later" in log
    assert "starting another in 1.0 s" in log and "starting another in 2.0 s" in log
    assert "Traceback" not in log and "tea" not in log
    assert not leftover, "the PostgreSQL started by pg_ctl outlived engram serve"


@pytest.mark.e2e
def test_a_process_count_out_of_range_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(ENGRAM + ["serve", "--processes", "0"], env=_env(tmp_path / "data"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--processes must be between 1 and 64" in done.stderr + done.stdout
    done = subprocess.run(ENGRAM + ["serve"], env=_env(tmp_path / "data", ENGRAM_SERVE_PROCESSES="65"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "ENGRAM_SERVE_PROCESSES" in done.stderr + done.stdout
    done = subprocess.run(ENGRAM + ["serve", "--processes", "2"], env=_env(tmp_path / "data",
                          ENGRAM_KAFKA_BOOTSTRAP="127.0.0.1:9"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "in distributed mode (ENGRAM_KAFKA_BOOTSTRAP) run more API replicas" in done.stderr
    # the embedded PostgreSQL allows 97 sessions; five processes with pools of 8 (and 8 overflow) might need 136
    done = subprocess.run(ENGRAM + ["serve", "--processes", "5"], env=_env(tmp_path / "data"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "5 serving processes may hold 136 database connections and the server allows 97" in done.stderr
    assert not postgres_running(tmp_path / "data" / "pg")


@pytest.mark.e2e
def test_serving_processes_stop_when_the_main_process_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to stop them: each notices its main is gone and stops itself, freeing
    the port (PostgreSQL outlives a killed main, as with one process, until the next start)."""
    data = tmp_path / "data"
    port = free_port()
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as sink:
        proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(port), "--processes", "2"],
                                env=_env(data, ENGRAM_TOMBSTONE_DIR=str(tmp_path / "tombstones")),
                                stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until_ready(proc, f"http://127.0.0.1:{port}", log_file.read_text)
        main = psutil.Process(proc.pid)
        _wait_for(lambda: len(_serving(main)) == 2)
        children = _serving(main)
        proc.kill()
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, log_file.read_text()
        assert log_file.read_text().count("ended; stopping serving process") == 2
        with socket_bound(port):  # the port is free again
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
        if postgres_running(data / "pg"):
            pg_ctl(data / "pg", "-w", "-m", "fast", "stop")


@pytest.mark.e2e
def test_ctrl_c_stops_the_serving_processes_and_postgresql_quietly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as sink:  # SIGINT as a terminal sends it (a shell's background job ignores it)
        proc = subprocess.Popen(ENGRAM + ["serve", "--port", str(port), "--processes", "2"],
                                env=_env(data, ENGRAM_TOMBSTONE_DIR=str(tmp_path / "tombstones")),
                                stdout=sink, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_until_ready(proc, f"http://127.0.0.1:{port}", log_file.read_text)
        main = psutil.Process(proc.pid)
        _wait_for(lambda: len(_serving(main)) == 2)
        children = _serving(main)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = log_file.read_text()
    assert "interrupted; stopping" in log and "Traceback" not in log
    assert not psutil.wait_procs(children, timeout=10)[1]
    assert not postgres_running(data / "pg")
