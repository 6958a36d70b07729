"""Distributed mode's relay: publishes the stored (still sealed) events to Kafka with acks=all, from its
tracked position, and re-publishes from the safe position when the broker lost them."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from eventsourcing.persistence import Notification

from .kafka import (
    EVENTS_TOPIC,
    PROBE_TIMEOUT,
    WATERMARK,
    ensure_topics,
    partition_for,
    stop_quietly,
)
from .migrations import migrate
from .outage import BROKER_ERRORS, DATABASE_ERRORS, Outage, drop_broken_connections, pause

log = logging.getLogger("engram.kafka")


class Relay:
    """Reads the notification log from its tracked position and publishes with acks=all.

    Survives a broker that loses everything: when a partition holds fewer messages than this relay
    put there, it rewinds to the safe position (the lowest position any projector has applied on
    any partition) and publishes again; projectors drop what they already have.
    """

    def __init__(self, recorder: Any, datastore: Any, bootstrap: str, partitions: int, projections: Sequence[str],
                 poll_interval: float = 0.5, batch: int = 500, alive: Callable[[], None] | None = None) -> None:
        self.recorder, self.datastore = recorder, datastore
        self.bootstrap, self.partitions = bootstrap, partitions
        self.projections = list(projections)
        self.poll_interval, self.batch = poll_interval, batch
        self.alive = alive or (lambda: None)  # called once per loop turn: a health check sees the loop run
        self.published = 0
        self._expected: dict[int, int] = {}
        self._wake = threading.Event()

    def ensure_schema(self) -> None:
        """The relay's table and row come from the numbered migrations: apply any still pending (none
        once the process that started this relay has opened Engram)."""
        with self.datastore.long_running(), self.datastore.get_connection() as conn:
            migrate(conn)

    def _state(self) -> tuple[int, int]:
        """(position, epoch): what this relay has published and the broker generation it published into."""
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT position, epoch FROM engram_relay WHERE relay = 'main'").fetchone()
        return int(row["position"]), int(row["epoch"])

    def position(self) -> int:
        return self._state()[0]

    def epoch(self) -> int:
        return self._state()[1]

    def _store(self, position: int) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_relay SET position = %s WHERE relay = 'main'", (position,))

    def _rewind(self) -> int:
        """The broker lost what it had: start a new epoch at the safe position. Workers that see a
        newer epoch on a partition read it again from the beginning and drop what they already have."""
        safe = self.safe_position()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("UPDATE engram_relay SET position = %s, epoch = epoch + 1 WHERE relay = 'main'", (safe,))
        self._expected = {}
        return safe

    def safe_position(self) -> int:
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT projection, partition, notification_id FROM engram_partition_tracking "
                "WHERE projection = ANY(%s)", (self.projections,),
            ).fetchall()
        have = {(r["projection"], r["partition"]): int(r["notification_id"]) for r in rows}
        return min(have.get((p, n), 0) for p in self.projections for n in range(self.partitions))

    def _listen(self, stop: threading.Event) -> None:
        """LISTEN/NOTIFY wakes the relay early; the poll interval is the fallback."""
        while not stop.is_set():
            try:
                with self.datastore.get_connection() as conn:
                    conn.execute(f'LISTEN "{self.recorder.channel_name}"')
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=self.poll_interval, stop_after=1):
                            self._wake.set()
            except Exception:  # noqa: BLE001
                stop.wait(self.poll_interval)

    async def run(self, stop: threading.Event) -> None:
        """Publish until `stop`; database and broker outages are waited out, never fatal."""
        database, broker = Outage(log, "relay: database"), Outage(log, "relay: broker")
        schema = False
        listener: threading.Thread | None = None
        producer: AIOKafkaProducer | None = None
        checker: AIOKafkaConsumer | None = None
        last_check = 0.0
        while not stop.is_set():
            self.alive()
            try:
                if not schema:
                    await asyncio.to_thread(self.ensure_schema)
                    schema = True
                if listener is None:
                    listener = threading.Thread(target=self._listen, args=(stop,), daemon=True)
                    listener.start()
                if producer is None:
                    producer, checker = await self._connect()
                if time.monotonic() - last_check > 1.0:
                    last_check = time.monotonic()
                    await self._check_broker(checker)
                published = await self._publish_batch(producer)
                database.ok()
                broker.ok()
                if not published:
                    await asyncio.to_thread(self._wake.wait, self.poll_interval)
                    self._wake.clear()
            except DATABASE_ERRORS as e:
                delay = database.failed(e)
                await asyncio.to_thread(drop_broken_connections, self.datastore)
                await pause(stop, delay)
            except BROKER_ERRORS as e:
                await stop_quietly(producer, checker)
                producer = checker = None
                await pause(stop, broker.failed(e))
        await stop_quietly(producer, checker)

    async def _connect(self) -> tuple[AIOKafkaProducer, AIOKafkaConsumer]:
        created = await ensure_topics(self.bootstrap, self.partitions)
        if created and await asyncio.to_thread(self.position) > 0:
            safe = await asyncio.to_thread(self._rewind)
            log.warning("events topic was missing; re-publishing from %d", safe)
            await asyncio.to_thread(self._tombstones_lost)
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", request_timeout_ms=10_000,
                                    linger_ms=2)
        checker = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        try:
            await producer.start()
            await checker.start()
        except BaseException:
            await stop_quietly(producer, checker)
            raise
        return producer, checker

    def _tombstones_lost(self) -> None:
        """A broker that lost events lost tombstones too: every process's publisher sends them all again."""
        from .tombstones import TombstoneOutbox

        republished = TombstoneOutbox.republish_all(self.datastore)
        log.warning("the broker lost its data: %d tombstone(s) will be published again", republished)

    async def _check_broker(self, checker: AIOKafkaConsumer | None) -> None:
        """The broker answers (a broker error otherwise: the caller reconnects) and still holds all
        this relay published (otherwise re-publish from the safe position)."""
        if checker is None:
            return
        topics = await asyncio.wait_for(checker.topics(), PROBE_TIMEOUT)
        lost: list[int] = []
        if EVENTS_TOPIC not in topics:
            lost = list(range(self.partitions))
        elif self._expected:
            tps = [TopicPartition(EVENTS_TOPIC, p) for p in range(self.partitions)]
            ends = await asyncio.wait_for(checker.end_offsets(tps), PROBE_TIMEOUT)
            lost = [tp.partition for tp in tps if ends.get(tp, 0) < self._expected.get(tp.partition, 0)]
        if lost:
            await ensure_topics(self.bootstrap, self.partitions)
            safe = await asyncio.to_thread(self._rewind)
            log.warning("broker lost published events (partitions %s); re-publishing from %d", lost, safe)
            await asyncio.to_thread(self._tombstones_lost)

    def _next_batch(self) -> tuple[int, list[Notification]]:
        """The epoch and the events after the position, read in one trip to a worker thread."""
        position, epoch = self._state()
        return epoch, self.recorder.select_notifications(position, self.batch, None, (), inclusive_of_start=False)

    async def _publish_batch(self, producer: AIOKafkaProducer) -> int:
        number, notes = await asyncio.to_thread(self._next_batch)
        if not notes:
            return 0
        epoch = str(number).encode()
        futures: list[Any] = []
        try:
            for n in notes:
                futures.append(await producer.send(
                    EVENTS_TOPIC, key=str(n.originator_id).encode(), value=n.state,
                    partition=partition_for(n.originator_id, self.partitions),
                    headers=[("topic", n.topic.encode()), ("version", str(n.originator_version).encode()),
                             ("notification_id", str(n.id).encode()), ("epoch", epoch)],
                ))
            last = notes[-1].id
            for p in range(self.partitions):
                futures.append(await producer.send(EVENTS_TOPIC, key=None, value=b"", partition=p,
                                                   headers=[(WATERMARK, str(last).encode()), ("epoch", epoch)]))
        finally:
            acked = await asyncio.gather(*futures, return_exceptions=True)  # acks=all: the broker has them
        failed = next((md for md in acked if isinstance(md, BaseException)), None)
        if failed is not None:
            raise failed
        first_in_batch: dict[int, int] = {}
        for md in cast(list[Any], acked):  # no exception among them (raised above)
            first_in_batch[md.partition] = min(first_in_batch.get(md.partition, md.offset), md.offset)
        # Some brokers (tansu) report the end offset as the last batch's base + 1, so expect at least that.
        for partition, offset in first_in_batch.items():
            self._expected[partition] = max(self._expected.get(partition, 0), offset + 1)
        await asyncio.to_thread(self._store, last)
        self.published += len(notes)
        return len(notes)
