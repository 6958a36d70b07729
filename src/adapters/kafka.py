"""Distributed mode's topics and messages: their names, the partition of an aggregate's events, creating
the topics, and reading a message back.

Every message of `engram.events` is one stored event, keyed by aggregate id, value = the sealed
state, headers = event topic, version and notification id. After each batch the relay
(`kafka_relay`) also sends a watermark to every partition ("published up to N"), so a worker
(`kafka_worker`) can move a partition's position past ids that went to other partitions; that is
what makes the safe re-publish point exact.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.partitioner import murmur2
from eventsourcing.persistence import Notification

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


async def stop_quietly(*clients: Any) -> None:
    """Close clients of a broker that may be gone; their errors say nothing new."""
    for client in clients:
        if client is not None:
            try:
                await client.stop()
            except Exception:  # noqa: BLE001
                pass
