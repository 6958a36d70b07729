"""Tombstones: content-free records of every forget, expiry, revocation and payload clearing, kept
where a database restore cannot roll them back.

Embedded default: `tombstones.jsonl` in ENGRAM_DATA_DIR, beside (not inside) the PostgreSQL cluster,
appended and fsynced before the command returns. Distributed: the compacted, never-expiring Kafka
topic `engram.tombstones`, keyed by aggregate id, written with acks=all before the command returns.
The fence is the set of aggregate ids with a tombstone: keys for them are never handed out or made.
When the broker is away, a record is refused (`TombstonesUnavailable`, 503) rather than acknowledged
without its tombstone, and a process starting meanwhile loads the fence in the background.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Protocol

from engram.domain.errors import DomainError

from .outage import BROKER_ERRORS, Outage

log = logging.getLogger("engram.tombstones")


class TombstonesUnavailable(DomainError):
    """The tombstone journal cannot be reached: whatever needs a tombstone is not acknowledged."""

    code, status, title = "unavailable", 503, "Temporarily unavailable"
    retry_after = 5  # seconds; a broker restart usually takes about that


class Journal(Protocol):
    def record(self, tombstone: dict[str, Any]) -> None: ...

    def all(self) -> list[dict[str, Any]]: ...


class FileJournal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def record(self, tombstone: dict[str, Any]) -> None:
        line = json.dumps(tombstone, sort_keys=True, default=str) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a crash mid-append
        return out


class KafkaJournal:
    """The compacted tombstone topic; a private event loop thread runs the async client.

    Every call is bounded: a broker that does not answer makes `record` and `all` raise
    `TombstonesUnavailable` within seconds instead of holding the caller.
    """

    RECORD_TIMEOUT = 8.0  # the producer gives up after 5 s; this bounds connecting as well

    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.bootstrap, self.partitions = bootstrap, partitions
        self.closed = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="engram-tombstones")
        self._thread.start()
        self._producer: Any = None
        self._connecting: asyncio.Lock | None = None
        self._outage = Outage(log, "tombstone journal")

    def _run(self, coro: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TombstonesUnavailable("the tombstone journal did not answer in time; retry later") from None
        except BROKER_ERRORS as e:
            raise TombstonesUnavailable(f"the tombstone journal is unreachable ({type(e).__name__}); "
                                        "retry later") from None

    async def _connected(self) -> Any:
        from aiokafka import AIOKafkaProducer

        from .kafka import ensure_topics

        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._producer is None:
                await ensure_topics(self.bootstrap, self.partitions, timeout_ms=5_000)
                producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", request_timeout_ms=5_000)
                try:
                    await producer.start()
                except BaseException:
                    with contextlib.suppress(Exception):
                        await producer.stop()
                    raise
                self._producer = producer
            return self._producer

    async def _send(self, tombstone: dict[str, Any]) -> None:
        from .kafka import TOMBSTONES_TOPIC

        producer = await self._connected()
        key = f"{tombstone['kind']}:{tombstone['aggregate_id']}:{tombstone.get('source_id') or ''}"
        try:
            await producer.send_and_wait(TOMBSTONES_TOPIC, key=key.encode(),
                                         value=json.dumps(tombstone, sort_keys=True, default=str).encode())
        except BaseException:
            if self._producer is producer:  # the next record connects afresh (the broker may be new)
                self._producer = None
                await producer.stop()
            raise

    def record(self, tombstone: dict[str, Any]) -> None:
        try:
            self._run(self._send(tombstone), self.RECORD_TIMEOUT)
        except TombstonesUnavailable as e:
            self._outage.failed(e)
            raise
        self._outage.ok()

    async def _read_all(self) -> list[dict[str, Any]]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from .kafka import TOMBSTONES_TOPIC, ensure_topics

        await ensure_topics(self.bootstrap, self.partitions, timeout_ms=5_000)
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                    request_timeout_ms=10_000)
        try:
            await consumer.start()
            tp = TopicPartition(TOMBSTONES_TOPIC, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            out: list[dict[str, Any]] = []
            while await consumer.position(tp) < end:
                for msgs in (await consumer.getmany(tp, timeout_ms=500)).values():
                    out += [json.loads(m.value) for m in msgs if m.value]
            return out
        finally:
            await consumer.stop()

    def all(self) -> list[dict[str, Any]]:
        return self._run(self._read_all(), timeout=120)

    def close(self) -> None:
        self.closed.set()
        if self._producer is not None:
            try:
                self._run(self._producer.stop(), timeout=10)
            except TombstonesUnavailable:
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)


class Fence:
    """Aggregate ids that were forgotten, expired or cleared: no key is ever served or made for them.

    Loaded at start; when the journal is unreachable then, the process starts anyway and loads it in
    the background (its own new tombstones count at once). `engram restore --fence` always reads the
    whole journal before it changes anything.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._ids: set[str] = set()
        self._lock = threading.Lock()
        self.loaded = threading.Event()
        try:
            self.refresh()
        except TombstonesUnavailable as e:
            threading.Thread(target=self._load_when_reachable, args=(e,), name="engram-fence", daemon=True).start()

    def refresh(self) -> None:
        loaded = {str(t["aggregate_id"]) for t in self.journal.all() if t.get("kind") != "revoke"}
        with self._lock:
            self._ids = self._ids | loaded  # ids recorded meanwhile stay: tombstones are never withdrawn
        self.loaded.set()

    def _load_when_reachable(self, first: TombstonesUnavailable) -> None:
        outage = Outage(log, "tombstone journal (fence not loaded yet)", longest=10.0)
        closed = getattr(self.journal, "closed", threading.Event())
        wait = outage.failed(first)
        while not closed.wait(wait):
            try:
                self.refresh()
            except TombstonesUnavailable as e:
                wait = outage.failed(e)
                continue
            outage.ok()
            return

    def __contains__(self, aggregate_id: object) -> bool:
        return str(aggregate_id) in self._ids

    def record(self, tombstone: dict[str, Any]) -> None:
        self.journal.record(tombstone)
        if tombstone.get("kind") != "revoke":
            with self._lock:
                self._ids.add(str(tombstone["aggregate_id"]))
