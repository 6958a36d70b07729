"""The tombstone journal in distributed mode: the compacted, never-expiring Kafka topic `engram.tombstones`,
keyed by aggregate id (`tombstones.Journal`; the embedded default is `tombstones.FileJournal`).

aiokafka and the Kafka adapter are imported when the journal first connects: the embedded default never
loads them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
from typing import Any

from .outage import BROKER_ERRORS, Outage
from .tombstones import TombstonesUnavailable, tombstone_key

log = logging.getLogger("engram.tombstones")


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
        key = tombstone_key(tombstone)
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
            idle = 0
            # Until the end offset, or until three polls in a row bring nothing: some brokers (tansu
            # after a restart) report an end offset the records never reach.
            while await consumer.position(tp) < end and idle < 3:
                fetched = [m for msgs in (await consumer.getmany(tp, timeout_ms=500)).values() for m in msgs]
                idle = 0 if fetched else idle + 1
                out += [json.loads(m.value) for m in fetched if m.value]
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
