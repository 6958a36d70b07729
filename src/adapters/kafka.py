"""Distributed mode: the relay publishes stored (still sealed) events to Kafka; workers project them.

Every message of `engram.events` is one stored event, keyed by aggregate id, value = the sealed
state, headers = event topic, version and notification id. After each batch the relay also sends a
watermark to every partition ("published up to N"), so a worker can move a partition's position
past ids that went to other partitions; that is what makes the safe re-publish point exact.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.partitioner import murmur2
from eventsourcing.persistence import Notification, Tracking

from .keystore import prefetched

log = logging.getLogger("engram.kafka")

EVENTS_TOPIC = "engram.events"
TOMBSTONES_TOPIC = "engram.tombstones"
WATERMARK = "engram-watermark"

RELAY_DDL = """
CREATE TABLE IF NOT EXISTS engram_relay (
    relay text PRIMARY KEY,
    position bigint NOT NULL,
    epoch int NOT NULL DEFAULT 1
);
"""


def partition_for(aggregate_id: Any, partitions: int) -> int:
    """The partition of an aggregate's events; the API uses it to wait for its own writes."""
    return (murmur2(str(aggregate_id).encode()) & 0x7FFFFFFF) % partitions


async def ensure_topics(bootstrap: str, partitions: int) -> bool:
    """Create the topics if missing; True when the events topic had to be created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = []
        if EVENTS_TOPIC not in existing:
            wanted.append(NewTopic(EVENTS_TOPIC, num_partitions=partitions, replication_factor=1))
        if TOMBSTONES_TOPIC not in existing:
            wanted.append(NewTopic(TOMBSTONES_TOPIC, num_partitions=1, replication_factor=1,
                                   topic_configs={"cleanup.policy": "compact", "retention.ms": "-1"}))
        if wanted:
            try:
                await admin.create_topics(wanted)
            except TopicAlreadyExistsError:
                pass
        return EVENTS_TOPIC not in existing
    finally:
        await admin.close()


def _headers(msg: Any) -> dict[str, str]:
    return {k: v.decode() for k, v in (msg.headers or ())}


def epoch_of(msg: Any) -> int:
    return int(_headers(msg).get("epoch", "0"))


def decode_message(msg: Any) -> tuple[Notification | None, int]:
    """A stored event (or None for a watermark) and the notification id it carries."""
    h = _headers(msg)
    if WATERMARK in h:
        return None, int(h[WATERMARK])
    nid = int(h["notification_id"])
    return Notification(id=nid, originator_id=UUID(msg.key.decode()), originator_version=int(h["version"]),
                        topic=h["topic"], state=msg.value), nid


class Relay:
    """Reads the notification log from its tracked position and publishes with acks=all.

    Survives a broker that loses everything: when a partition holds fewer messages than this relay
    put there, it rewinds to the safe position (the lowest position any projector has applied on
    any partition) and publishes again; projectors drop what they already have.
    """

    def __init__(self, recorder: Any, datastore: Any, bootstrap: str, partitions: int, projections: Sequence[str],
                 poll_interval: float = 0.5, batch: int = 500) -> None:
        self.recorder, self.datastore = recorder, datastore
        self.bootstrap, self.partitions = bootstrap, partitions
        self.projections = list(projections)
        self.poll_interval, self.batch = poll_interval, batch
        self.published = 0
        self._expected: dict[int, int] = {}
        self._wake = threading.Event()

    def create_tables(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(RELAY_DDL)
            curs.execute("INSERT INTO engram_relay (relay, position) VALUES ('main', 0) ON CONFLICT DO NOTHING")

    def position(self) -> int:
        with self.datastore.get_connection() as conn:
            return int(conn.execute("SELECT position FROM engram_relay WHERE relay = 'main'").fetchone()["position"])

    def epoch(self) -> int:
        with self.datastore.get_connection() as conn:
            return int(conn.execute("SELECT epoch FROM engram_relay WHERE relay = 'main'").fetchone()["epoch"])

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
        self.create_tables()
        listener = threading.Thread(target=self._listen, args=(stop,), daemon=True)
        listener.start()
        producer: AIOKafkaProducer | None = None
        checker: AIOKafkaConsumer | None = None
        last_check = 0.0
        while not stop.is_set():
            try:
                if producer is None:
                    created = await ensure_topics(self.bootstrap, self.partitions)
                    if created and await asyncio.to_thread(self.position) > 0:
                        safe = await asyncio.to_thread(self._rewind)
                        log.warning("events topic was missing; re-publishing from %d", safe)
                    producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                                request_timeout_ms=10_000, linger_ms=2)
                    await producer.start()
                    checker = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
                    await checker.start()
                if time.monotonic() - last_check > 1.0:
                    last_check = time.monotonic()
                    await self._check_broker(checker)
                if not await self._publish_batch(producer):
                    await asyncio.to_thread(self._wake.wait, self.poll_interval)
                    self._wake.clear()
            except (KafkaError, OSError, asyncio.TimeoutError) as e:
                log.warning("broker unavailable (%s); retrying", type(e).__name__)
                for client in (producer, checker):
                    if client is not None:
                        try:
                            await client.stop()
                        except Exception:  # noqa: BLE001
                            pass
                producer = checker = None
                await asyncio.sleep(min(self.poll_interval * 2, 2.0))
        for client in (producer, checker):
            if client is not None:
                await client.stop()

    async def _check_broker(self, checker: AIOKafkaConsumer | None) -> None:
        if checker is None or not self._expected:
            return
        tps = [TopicPartition(EVENTS_TOPIC, p) for p in range(self.partitions)]
        ends = await checker.end_offsets(tps)
        lost = [tp.partition for tp in tps if ends.get(tp, 0) < self._expected.get(tp.partition, 0)]
        if lost:
            await ensure_topics(self.bootstrap, self.partitions)
            safe = await asyncio.to_thread(self._rewind)
            log.warning("broker lost published events (partitions %s); re-publishing from %d", lost, safe)

    async def _publish_batch(self, producer: AIOKafkaProducer) -> int:
        position = await asyncio.to_thread(self.position)
        notes = await asyncio.to_thread(self.recorder.select_notifications, position, self.batch, None, (),
                                        inclusive_of_start=False)
        if not notes:
            return 0
        epoch = str(await asyncio.to_thread(self.epoch)).encode()
        futures = []
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
        first_in_batch: dict[int, int] = {}
        for f in futures:
            md = await f  # acks=all: the broker has it
            first_in_batch[md.partition] = min(first_in_batch.get(md.partition, md.offset), md.offset)
        # Some brokers (tansu) report the end offset as the last batch's base + 1, so expect at least that.
        for partition, offset in first_in_batch.items():
            self._expected[partition] = max(self._expected.get(partition, 0), offset + 1)
        await asyncio.to_thread(self._store, last)
        self.published += len(notes)
        return len(notes)


class ProjectorWorker:
    """A consumer-group member: per partition, applies a batch and its tracking in one database
    transaction, then commits the offset. Duplicates and re-deliveries are dropped by the tracking."""

    def __init__(self, projections: Sequence[Any], datastore: Any, decode: Callable[[Notification], Any],
                 bootstrap: str, partitions: int, group: str | None = None, keys: Any = None) -> None:
        self.keys = keys
        self.projections = sorted(projections, key=lambda p: p.name)
        self.datastore, self.decode = datastore, decode
        self.bootstrap, self.partitions = bootstrap, partitions
        self.group = group or "engram-projectors-" + "+".join(p.name for p in self.projections)
        self.applied = 0
        self._epochs: dict[int, int] = {}
        self.ready = threading.Event()  # set once the group has given this worker partitions

    def apply(self, partition: int, messages: Sequence[Any]) -> int:
        decoded = [decode_message(msg) for msg in messages]
        upto = max(nid for _, nid in decoded)
        notes = [note for note, _ in decoded if note is not None]
        applied = 0
        with prefetched(self.keys, notes), self.datastore.transaction(commit=True) as curs:
            items = [(None if note is None else self.decode(note), Tracking("engram", nid)) for note, nid in decoded]
            for p in self.projections:
                applied += p.apply_partition_batch(curs, partition, items, upto)
        return applied

    async def run(self, stop: threading.Event, after_apply: Callable[[], None] | None = None) -> None:
        await ensure_topics(self.bootstrap, self.partitions)
        consumer = AIOKafkaConsumer(EVENTS_TOPIC, bootstrap_servers=self.bootstrap, group_id=self.group,
                                    enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=500,
                                    fetch_max_wait_ms=25)  # low lag even where the broker does not wake fetches
        await consumer.start()
        try:
            while not stop.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=300)
                    if consumer.assignment():
                        self.ready.set()
                    for tp, messages in batches.items():
                        if not await self._apply_or_rewind(consumer, tp, messages):
                            continue
                        if after_apply is not None:
                            after_apply()
                        await consumer.commit({tp: messages[-1].offset + 1})  # only after the database commit
                except KafkaError as e:
                    log.warning("consumer error (%s); continuing", type(e).__name__)
                    await asyncio.sleep(0.5)
        finally:
            try:
                await consumer.stop()
            except Exception:  # noqa: BLE001
                pass

    async def _apply_or_rewind(self, consumer: AIOKafkaConsumer, tp: TopicPartition, messages: Sequence[Any]) -> bool:
        """Apply a partition batch. False when it must be read again (a newer relay epoch, or a database
        error such as a deadlock victim): nothing is committed then, and the partition is re-read."""
        newest = max(epoch_of(m) for m in messages)
        seen = self._epochs.get(tp.partition)
        self._epochs[tp.partition] = max(newest, seen or 0)
        if seen is not None and newest > seen:
            await consumer.seek_to_beginning(tp)  # the relay re-published into a fresh broker
            return False
        try:
            self.applied += await asyncio.to_thread(self.apply, tp.partition, messages)
        except Exception as e:  # noqa: BLE001 - rolled back; read the same batch again
            log.warning("applying partition %d failed (%s); retrying", tp.partition, type(e).__name__)
            consumer.seek(tp, messages[0].offset)
            await asyncio.sleep(0.2)
            return False
        return True


class PartitionSettle:
    """Read-your-writes when projectors run elsewhere: wait until every projection has applied the
    write's notification id on the partition its aggregate maps to."""

    def __init__(self, datastore: Any, projections: Sequence[str], partitions: int, timeout: float = 30.0) -> None:
        self.datastore, self.projections, self.partitions, self.timeout = datastore, list(projections), partitions, timeout

    def lagging(self, wanted: dict[int, int]) -> bool:
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT projection, partition, notification_id FROM engram_partition_tracking "
                "WHERE projection = ANY(%s) AND partition = ANY(%s)", (self.projections, list(wanted)),
            ).fetchall()
        have = {(r["projection"], r["partition"]): int(r["notification_id"]) for r in rows}
        return any(have.get((p, part), 0) < nid for p in self.projections for part, nid in wanted.items())

    def settle_recordings(self, recordings: Sequence[Any]) -> None:
        wanted: dict[int, int] = {}
        for r in recordings:
            part = partition_for(r.notification.originator_id, self.partitions)
            wanted[part] = max(wanted.get(part, 0), r.notification.id)
        if not wanted:
            return
        deadline = time.monotonic() + self.timeout
        pause = 0.002
        while self.lagging(wanted):
            if time.monotonic() > deadline:
                log.warning("projectors are lagging; answering before the write is visible everywhere")
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass
