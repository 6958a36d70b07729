"""Tombstones: content-free records of every forget, expiry, revocation and payload clearing, kept
where a database restore cannot roll them back.

Embedded default: `tombstones.jsonl` in ENGRAM_DATA_DIR, beside (not inside) the PostgreSQL cluster,
appended and fsynced before the command returns. Distributed: the compacted, never-expiring Kafka
topic `engram.tombstones`, keyed by aggregate id, written with acks=all before the command returns.
The fence is the set of aggregate ids with a tombstone: keys for them are never handed out or made.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol


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
    """The compacted tombstone topic; a private event loop thread runs the async client."""

    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.bootstrap, self.partitions = bootstrap, partitions
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="engram-tombstones")
        self._thread.start()
        self._producer: Any = None

    def _run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _send(self, tombstone: dict[str, Any]) -> None:
        from aiokafka import AIOKafkaProducer

        from .kafka import TOMBSTONES_TOPIC, ensure_topics

        if self._producer is None:
            await ensure_topics(self.bootstrap, self.partitions)
            self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
            await self._producer.start()
        key = f"{tombstone['kind']}:{tombstone['aggregate_id']}:{tombstone.get('source_id') or ''}"
        try:
            await self._producer.send_and_wait(TOMBSTONES_TOPIC, key=key.encode(),
                                               value=json.dumps(tombstone, sort_keys=True, default=str).encode())
        except Exception:
            await self._producer.stop()
            self._producer = None
            raise

    def record(self, tombstone: dict[str, Any]) -> None:
        self._run(self._send(tombstone))

    async def _read_all(self) -> list[dict[str, Any]]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from .kafka import TOMBSTONES_TOPIC, ensure_topics

        await ensure_topics(self.bootstrap, self.partitions)
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
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
        if self._producer is not None:
            self._run(self._producer.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)


class Fence:
    """Aggregate ids that were forgotten, expired or cleared: no key is ever served or made for them."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._ids: set[str] = set()
        self.refresh()

    def refresh(self) -> None:
        self._ids = {str(t["aggregate_id"]) for t in self.journal.all() if t.get("kind") != "revoke"}

    def __contains__(self, aggregate_id: object) -> bool:
        return str(aggregate_id) in self._ids

    def record(self, tombstone: dict[str, Any]) -> None:
        self.journal.record(tombstone)
        if tombstone.get("kind") != "revoke":
            self._ids.add(str(tombstone["aggregate_id"]))
