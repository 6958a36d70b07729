"""Distributed mode's projector worker: a consumer-group member that applies the events topic's
batches to the projections, each with its tracking in one database transaction."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from eventsourcing.persistence import Notification, Tracking

from .kafka import (
    APPLIED_CHANNEL,
    EVENTS_TOPIC,
    PROBE_TIMEOUT,
    decode_message,
    ensure_topics,
    epoch_of,
    stop_quietly,
)
from .keystore import prefetched
from .outage import BROKER_ERRORS, Outage, drop_broken_connections, pause

log = logging.getLogger("engram.kafka")


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
            await stop_quietly(consumer)
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
            await stop_quietly(consumer)

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
