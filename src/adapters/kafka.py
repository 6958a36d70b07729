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
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, cast
from uuid import UUID

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.partitioner import murmur2
from eventsourcing.persistence import Notification, Tracking

from .keystore import prefetched
from .migrations import migrate
from .outage import BROKER_ERRORS, DATABASE_ERRORS, Outage, drop_broken_connections, pause

log = logging.getLogger("engram.kafka")

EVENTS_TOPIC = "engram.events"
TOMBSTONES_TOPIC = "engram.tombstones"
WATERMARK = "engram-watermark"
# Every worker transaction that applied events notifies this channel at its commit: the process
# waiting for a write to become visible (PartitionSettle) looks at the positions at once.
APPLIED_CHANNEL = "engram_partitions_applied"
PROBE_TIMEOUT = 5.0  # seconds a liveness question to the broker may take

def partition_for(aggregate_id: Any, partitions: int) -> int:
    """The partition of an aggregate's events; the API uses it to wait for its own writes."""
    return (murmur2(str(aggregate_id).encode()) & 0x7FFFFFFF) % partitions


async def ensure_topics(bootstrap: str, partitions: int, timeout_ms: int = 10_000) -> bool:
    """Create the topics if missing; True when the events topic had to be created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        await admin.start()  # fails at once when nothing listens: callers retry, nobody waits here
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


async def _stop_quietly(*clients: Any) -> None:
    """Close clients of a broker that may be gone; their errors say nothing new."""
    for client in clients:
        if client is not None:
            try:
                await client.stop()
            except Exception:  # noqa: BLE001
                pass


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
                await _stop_quietly(producer, checker)
                producer = checker = None
                await pause(stop, broker.failed(e))
        await _stop_quietly(producer, checker)

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
            await _stop_quietly(producer, checker)
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


# While a worker applies a batch: notification id -> (partition, offset) of the record it came from,
# so a projection can cite the topic's records in its evidence (a forget's `kafka` copy).
CONSUMED: ContextVar[Mapping[int, tuple[int, int]] | None] = ContextVar("engram_consumed", default=None)


def consumed_at(notification_id: int) -> tuple[int, int] | None:
    """The (partition, offset) of the record being applied, when it came from the events topic."""
    consumed = CONSUMED.get()
    return None if consumed is None else consumed.get(notification_id)


class ProjectorWorker:
    """A consumer-group member: per partition, applies a batch and its tracking in one database
    transaction, then commits the offset. Duplicates and re-deliveries are dropped by the tracking."""

    # A worker that dies without leaving the group loses its partitions after this long (Kafka's
    # default broker accepts 6 s as the shortest session).
    SESSION_TIMEOUT_MS = 6_000
    HEARTBEAT_INTERVAL_MS = 1_000

    def __init__(self, projections: Sequence[Any], datastore: Any, decode: Callable[[Notification], Any],
                 bootstrap: str, partitions: int, group: str | None = None, keys: Any = None,
                 alive: Callable[[], None] | None = None) -> None:
        self.keys = keys
        self.projections = sorted(projections, key=lambda p: p.name)
        self.datastore, self.decode = datastore, decode
        self.bootstrap, self.partitions = bootstrap, partitions
        self.group = group or "engram-projectors-" + "+".join(p.name for p in self.projections)
        self.alive = alive or (lambda: None)  # called once per loop turn: a health check sees the loop run
        self.applied = 0
        self._epochs: dict[int, int] = {}
        self.ready = threading.Event()  # set once the group has given this worker partitions

    def apply(self, batches: Sequence[tuple[int, Sequence[Any]]]) -> int:
        """Apply what one poll brought, (partition, its messages) each, to every projection in one
        database transaction: one lock of the tracking rows, one set-based batch a projection, one commit."""
        decoded = {partition: [decode_message(msg) for msg in messages] for partition, messages in batches}
        upto = {partition: max(nid for _, nid in d) for partition, d in decoded.items()}
        notes = [note for d in decoded.values() for note, _ in d if note is not None]
        CONSUMED.set({nid: (partition, msg.offset) for partition, messages in batches
                      for (_, nid), msg in zip(decoded[partition], messages, strict=True)})
        with prefetched(self.keys, notes), self.datastore.transaction(commit=True) as curs:
            items = {partition: [(None if note is None else self.decode(note), Tracking("engram", nid))
                                 for note, nid in d] for partition, d in decoded.items()}
            applied = int(self.projections[0].apply_partitions(curs, self.projections, items, upto))
            curs.execute(f"NOTIFY {APPLIED_CHANNEL}")  # delivered at the commit, never before
            return applied

    async def _join(self) -> AIOKafkaConsumer:
        await ensure_topics(self.bootstrap, self.partitions)
        consumer = AIOKafkaConsumer(EVENTS_TOPIC, bootstrap_servers=self.bootstrap, group_id=self.group,
                                    enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=500,
                                    session_timeout_ms=self.SESSION_TIMEOUT_MS,
                                    heartbeat_interval_ms=self.HEARTBEAT_INTERVAL_MS,
                                    fetch_max_wait_ms=25)  # low lag even where the broker does not wake fetches
        try:
            await consumer.start()
        except BaseException:
            await _stop_quietly(consumer)
            raise
        return consumer

    async def run(self, stop: threading.Event, after_apply: Callable[[], None] | None = None) -> None:
        """Project until `stop`; database and broker outages are waited out, never fatal."""
        broker, stream = Outage(log, "worker: broker"), Outage(log, "worker: consumer")
        applying = Outage(log, "worker: database")
        consumer: AIOKafkaConsumer | None = None
        last_probe = 0.0
        try:
            while not stop.is_set():
                self.alive()
                if consumer is None:
                    try:
                        consumer = await self._join()
                    except BROKER_ERRORS as e:
                        await pause(stop, broker.failed(e))
                        continue
                    broker.ok()
                try:
                    batches = await consumer.getmany(timeout_ms=300)
                    if consumer.assignment():
                        self.ready.set()
                    ready = [(tp, messages) for tp, messages in batches.items()
                             if messages and not await self._rewound(consumer, tp, messages)]
                    if ready:
                        try:
                            self.applied += await asyncio.to_thread(self.apply, [(tp.partition, m) for tp, m in ready])
                        except Exception as e:  # noqa: BLE001 - an outage, a deadlock victim: nothing was kept
                            for tp, messages in ready:  # read them all again
                                consumer.seek(tp, messages[0].offset)
                            delay = applying.failed(e)
                            await asyncio.to_thread(drop_broken_connections, self.datastore)
                            await pause(stop, delay)
                            continue
                        applying.ok()
                        if after_apply is not None:
                            after_apply()
                        # only after the database commit
                        await consumer.commit({tp: messages[-1].offset + 1 for tp, messages in ready})
                    stream.ok()
                    if time.monotonic() - last_probe > 2.0:
                        last_probe = time.monotonic()
                        await self._probe(consumer, broker)
                except BROKER_ERRORS as e:  # a rebalance or a broker away; the consumer reconnects itself
                    await pause(stop, stream.failed(e))
        finally:
            await _stop_quietly(consumer)

    @staticmethod
    async def _probe(consumer: AIOKafkaConsumer, broker: Outage) -> None:
        """The consumer reconnects by itself and says nothing; ask the broker, to log when it goes and comes."""
        try:
            await asyncio.wait_for(consumer.topics(), PROBE_TIMEOUT)
        except BROKER_ERRORS as e:
            broker.failed(e)
        else:
            broker.ok()

    async def _rewound(self, consumer: AIOKafkaConsumer, tp: TopicPartition, messages: Sequence[Any]) -> bool:
        """True when the partition must be read again from its beginning: the relay re-published into
        a fresh broker (a newer epoch than this worker saw there)."""
        newest = max(epoch_of(m) for m in messages)
        seen = self._epochs.get(tp.partition)
        self._epochs[tp.partition] = max(newest, seen or 0)
        if seen is not None and newest > seen:
            await consumer.seek_to_beginning(tp)
            return True
        return False
