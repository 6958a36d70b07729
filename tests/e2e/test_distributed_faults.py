"""The distributed deployment as separate processes (API, relay, two workers, broker) through its
dependencies' faults: the relay's and a worker's PostgreSQL connections cut, the broker restarted
empty, a worker killed. Under a bounded write load, every acknowledged write becomes visible, the
relay and the workers that were not killed are still running, and each logs one line per change of
state rather than a traceback per retry. Figures are printed, for `pytest -s`."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker import TansuBroker, tansu_binary
from tests.support.deployment import Deployment
from tests.support.helpers import auth

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(tansu_binary() is None, reason="no Kafka-protocol broker installed")]


class Load:
    """One remember at a time, every 0.1 s, at most 600, until stopped; remembers every answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[int, float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as c:
            for i in range(600):
                if self._stop.wait(0.1):
                    return
                self.answers.append(remember(c, f"load-{i}"))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=90)

    def since(self, start: int) -> list[tuple[int, float, dict[str, Any]]]:
        return self.answers[start:]

    def acknowledged(self) -> set[str]:
        return {body["id"] for status, _, body in self.answers if status in (200, 201, 202) and "id" in body}


def remember(c: httpx.Client, tag: str) -> tuple[int, float, dict[str, Any]]:
    started = time.monotonic()
    try:
        r = c.post("/v1/memories", headers=auth(), json={
            "text": f"kestrel sighting {tag}", "source": {"kind": "chat", "id": "chat-1", "message_id": tag}})
        body = r.json() if r.headers.get("content-type", "").endswith("json") else {}
        return r.status_code, time.monotonic() - started, body
    except httpx.HTTPError:
        return 0, time.monotonic() - started, {}


def visible_ids(c: httpx.Client) -> set[str]:
    ids: set[str] = set()
    cursor = None
    for _ in range(50):
        page = c.get("/v1/memories", headers=auth(), params={"limit": 200, **({"cursor": cursor} if cursor else {})})
        page.raise_for_status()
        ids |= {item["id"] for item in page.json()["items"]}
        cursor = page.json()["next_cursor"]
        if not cursor:
            break
    return ids


def wait_until(predicate: Any, timeout: float) -> float | None:
    """Seconds until `predicate` held, or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if predicate():
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return None


@pytest.mark.e2e
def test_relay_and_workers_ride_out_database_cuts_broker_restarts_and_a_killed_worker(database, tmp_path: Path) -> None:
    broker = TansuBroker().start()
    system = Deployment(database, broker, tmp_path)
    system.start("relay", "relay", "--alive-file", str(tmp_path / "relay.alive"))
    system.start("worker-1", "worker")
    system.start("worker-2", "worker")
    system.start("api", "serve", "--port", str(system.port))
    figures: list[str] = []
    try:
        with httpx.Client(base_url=system.url, timeout=60) as c:
            assert wait_until(lambda: c.get("/healthz").status_code == 200, 60) is not None, system.log("api")
            assert wait_until(lambda: remember(c, f"warm-{time.monotonic()}")[0] == 201, 60) is not None
            load = Load(system.url)
            time.sleep(1.0)

            # 1. PostgreSQL cuts the relay's connections, then a worker's, while writes flow.
            cut = system.cut_connections("relay")
            time.sleep(0.5)
            cut += system.cut_connections("worker-1")
            time.sleep(0.5)
            cut += system.cut_connections("relay")
            assert cut > 0
            took = wait_until(lambda: remember(c, f"after-cut-{time.monotonic()}")[0] == 201, 60)
            assert took is not None
            figures.append(f"database cuts: writes visible again {took:.2f} s after the last cut")

            # 2. The broker restarts empty.
            broker.stop()
            mark = len(load.answers)
            time.sleep(4.0)
            stalled = [remember(c, f"stalled-{i}") for i in range(2)]
            broker.start()
            took = wait_until(lambda: remember(c, f"after-broker-{time.monotonic()}")[0] == 201, 90)
            assert took is not None
            figures.append(f"broker restart: stalled writes answered in "
                           f"{', '.join(f'{s:.2f}' for _, s, _ in stalled)} s; writes visible again "
                           f"{took:.2f} s after the broker came back")
            assert all(status == 202 and body["visible"] is False for status, _, body in stalled)
            assert all(status in (201, 202) for status, _, _ in load.since(mark))

            # 3. A worker is killed without leaving its group, and comes back later.
            system.procs["worker-1"].send_signal(signal.SIGKILL)
            system.procs["worker-1"].wait(timeout=10)
            killed = time.monotonic()
            took = wait_until(lambda: all(remember(c, f"after-kill-{time.monotonic()}")[0] == 201
                                          for _ in range(6)), 90)
            assert took is not None
            figures.append(f"killed worker: writes on all partitions visible again {time.monotonic() - killed:.2f} s "
                           f"after the kill")
            system.start("worker-1b", "worker")

            load.stop()
            acknowledged = load.acknowledged() | {body["id"] for _, _, body in stalled}
            took = wait_until(lambda: acknowledged <= visible_ids(c), 90)
            assert took is not None, len(acknowledged - visible_ids(c))
            statuses = [status for status, _, _ in load.answers]
            figures.append(f"{len(acknowledged)} acknowledged writes ({statuses.count(202)} as 202 visible:false, "
                           f"{sum(s not in (200, 201, 202) for s in statuses)} refused), all visible "
                           f"{took:.2f} s after the load stopped")

        assert system.running("relay") and system.running("worker-2") and system.running("api")
        assert time.time() - (tmp_path / "relay.alive").stat().st_mtime < 10
        relay_log = system.log("relay")
        # a cut pooled connection may be replaced before the relay notices; when it does notice, one line per cut
        assert relay_log.count("relay: database unavailable") == relay_log.count("relay: database available again")
        assert relay_log.count("relay: database unavailable") <= 3
        assert "relay: broker unavailable" in relay_log and "relay: broker available again" in relay_log
        for name in ("relay", "worker-1", "worker-2", "api"):
            assert "Traceback" not in system.log(name), system.log(name)[-3000:]
        print("\n" + "\n".join(figures))
    finally:
        system.stop()
        broker.stop()
