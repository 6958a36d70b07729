"""In-process projectors: woken by NOTIFY, kept honest by polling, safe to run twice."""

from __future__ import annotations

import threading
import time
from typing import Any

from engram.domain.scope import Caller
from engram.projections.runner import ProjectorRunner

ALICE = Caller("acme", "alice", "user")
SOURCE = {"kind": "chat", "id": "chat-1", "message_id": "m-1"}


def _wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _remember_without_settling(engram: Any, text: str) -> None:
    original = engram.runner.settle
    engram.runner.settle = lambda _n: None
    try:
        engram.memories.remember(ALICE, text=text, source=SOURCE, occurred_at=None, visibility="general",
                                team=None, valid_from=None, valid_to=None)
    finally:
        engram.runner.settle = original


def _recalled(engram: Any, query: str) -> list[str]:
    return [i.text for i in engram.recall.recall(ALICE, query=query, as_of=None, max_bytes=17500, limit=5).items]


def test_background_runner_applies_events_it_is_notified_of(engram) -> None:
    engram.runner.poll_interval = 30.0  # only NOTIFY can wake it in time
    engram.runner.start()
    try:
        time.sleep(0.3)
        _remember_without_settling(engram, "the staging server is called heron")
        assert _wait_until(lambda: _recalled(engram, "heron") == ["the staging server is called heron"], 10)
    finally:
        engram.runner.stop()


def test_polling_catches_up_when_no_notification_arrives(engram) -> None:
    class Deaf:
        """The real recorder, listening on a channel nobody notifies."""

        def __init__(self, recorder: Any) -> None:
            self._recorder = recorder
            self.channel_name = "engram_nobody_notifies"

        def __getattr__(self, name: str) -> Any:
            return getattr(self._recorder, name)

    runner = ProjectorRunner(Deaf(engram.store.recorder), engram.store.mapper.to_domain_event,
                             list(engram.projections.values()), poll_interval=0.2)
    runner.start()
    try:
        _remember_without_settling(engram, "the deploy window is thursday")
        assert _wait_until(lambda: _recalled(engram, "deploy window") == ["the deploy window is thursday"], 10)
    finally:
        runner.stop()


def test_two_runners_never_apply_an_event_twice(engram) -> None:
    for i in range(30):
        _remember_without_settling(engram, f"fact {i} about parallel projectors")
    twin = ProjectorRunner(engram.store.recorder, engram.store.mapper.to_domain_event,
                           list(engram.projections.values()))
    results: list[int] = []
    threads = [threading.Thread(target=lambda r=r: results.append(r.catch_up(engram.projections["recall"])))
               for r in (engram.runner, twin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 30
    with engram.store.datastore.transaction() as curs:
        curs.execute("SELECT count(*) AS n FROM engram_recall_revisions")
        assert curs.fetchone()["n"] == 30


def test_projection_status_reports_lag(engram) -> None:
    _remember_without_settling(engram, "lagging fact")
    lag = {row["projection"]: row["lag"] for row in engram.operations.status()}
    assert lag == {"recall": 1, "review": 1, "governance": 1, "inbox": 1, "insights": 1, "links": 1}
    engram.runner.catch_up_all()
    lags = {row["projection"]: row["lag"] for row in engram.operations.status()}
    assert lags == {"recall": 0, "review": 0, "governance": 0, "inbox": 0, "insights": 0, "links": 0}


def test_stopping_the_runner_wakes_its_wait(engram) -> None:
    import time

    engram.runner.poll_interval = 30.0  # a stop must not wait out the poll
    engram.runner.start()
    time.sleep(0.5)
    engram.runner.stop()  # joins for at most 5 s: still alive then means it slept through the stop
    assert not engram.runner._thread.is_alive()


def _recall_rows(engram: Any) -> dict[str, list[tuple]]:
    """The recall view's answer bookkeeping, without the sealed columns (their nonces differ per write)."""
    queries = {
        "revisions": "SELECT memory_id, revision, is_answer, answer_from, answer_to, doc_len "
                     "FROM engram_recall_revisions ORDER BY 1, 2",
        "terms": "SELECT company, person, term, memory_id, revision, tf, doc_len, visibility, team, source_blind, "
                 "answer_from, answer_to FROM engram_recall_terms ORDER BY 1, 2, 3, 4, 5",
        "stats": "SELECT company, person, answers, total_len FROM engram_recall_stats WHERE answers <> 0 "
                 "OR total_len <> 0 ORDER BY 1, 2",
        "answers": "SELECT company, person, count(*) AS answers, sum(doc_len) AS total_len "
                   "FROM engram_recall_revisions WHERE is_answer GROUP BY 1, 2 ORDER BY 1, 2",
    }
    out = {}
    with engram.store.datastore.transaction() as curs:
        for name, sql in queries.items():
            curs.execute(sql)
            out[name] = [tuple(r.values()) for r in curs.fetchall()]
    return out


def test_the_recall_view_written_as_events_arrive_is_the_one_recomputed_and_rebuilt(engram) -> None:
    """A new memory's answer is written straight from the event (no read-back); the general recomputation
    from the stored revisions, and a rebuild from the events, must arrive at the same rows."""
    from datetime import UTC, datetime
    from uuid import UUID

    from engram.domain.memory import Memory

    bob = Caller("acme", "bob", "user")
    memories = engram.memories
    plain = memories.remember(ALICE, text="the build server is called osprey", source=SOURCE, occurred_at=None,
                              visibility="general", team=None, valid_from=None, valid_to=None)
    dated = memories.remember(ALICE, text="my desk is on floor three", source={**SOURCE, "message_id": "m-2"},
                              occurred_at=datetime(2026, 3, 4, tzinfo=UTC), visibility="general", team=None,
                              valid_from=datetime(2026, 1, 1, tzinfo=UTC), valid_to=None)
    memories.correct(ALICE, dated.id, text="my desk is on floor five", valid_from=datetime(2026, 6, 1, tzinfo=UTC),
                     valid_to=None, reason=None)
    memories.correct(ALICE, plain.id, text="the build server is called kestrel", valid_from=None, valid_to=None,
                     reason=None)
    candidate = memories.propose(bob, text="bob likes green tea", quote="I like green tea", source=SOURCE,
                                 occurred_at=None)
    memories.confirm(bob, candidate.id, text="bob likes green tea with honey", acknowledge_sensitive=False)
    gone = memories.remember(bob, text="bob parks in row seven", source={**SOURCE, "message_id": "m-3"},
                             occurred_at=None, visibility="general", team=None, valid_from=None, valid_to=None)
    memories.forget(bob, gone.id)

    written = _recall_rows(engram)
    assert written["stats"] == written["answers"]  # the per-person figures add up
    assert len(written["answers"]) == 2 and written["terms"]
    answering = sorted((str(r[0]), r[1]) for r in written["revisions"] if r[2])
    # the dated memory's first span and its correction; the replaced text's correction; the confirmed candidate
    assert answering == sorted([(dated.id, 1), (dated.id, 2), (plain.id, 2), (candidate.id, 1)])

    recall = engram.projections["recall"]
    ids = [plain.id, dated.id, candidate.id]
    with engram.store.datastore.transaction(commit=True) as curs:  # recompute every answer from stored rows
        recall.begin()
        for memory_id in ids:
            recall._refresh_answers(curs, memory_id, engram.store.keys.get(memory_id))
        recall.flush(curs)
    assert _recall_rows(engram) == written

    engram.operations.rebuild("recall")
    assert _recall_rows(engram) == written
    assert engram.ledger.get(UUID(gone.id), Memory).is_forgotten
    assert [i.text for i in engram.recall.recall(ALICE, query="kestrel", as_of=None, max_bytes=17500,
                                                  limit=5).items] == ["the build server is called kestrel"]


def _store_without_settling(engram: Any, texts: list[str]) -> list[int]:
    """Remember each text, leaving the projections behind; the notification id of each."""
    ids = []
    for text in texts:
        _remember_without_settling(engram, text)
        ids.append(engram.store.recorder.max_notification_id())
    return ids


def _positions(engram: Any) -> dict[str, int]:
    return engram.runner.positions(list(engram.projections.values()))


def test_writes_waiting_together_share_one_catch_up(engram) -> None:
    """Eight writes settle at once: one thread takes the turn and applies all eight in one transaction; the
    others ask the database nothing and return when their position is published."""
    ids = _store_without_settling(engram, [f"fact {i} about the shared catch-up" for i in range(8)])
    runner = engram.runner
    asked: list[str] = []
    positions, apply_together = runner.positions, runner._apply_together
    runner.positions = lambda ps: asked.append("positions") or positions(ps)
    runner._apply_together = lambda *a, **k: asked.append("transaction") or apply_together(*a, **k)
    start = threading.Barrier(len(ids))

    def settle(n: int) -> None:
        start.wait()
        runner.settle(n)

    threads = [threading.Thread(target=settle, args=(n,)) for n in ids]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        runner.positions, runner._apply_together = positions, apply_together
    assert not any(t.is_alive() for t in threads)
    assert asked == ["positions", "transaction"]
    assert min(_positions(engram).values()) == ids[-1]


def test_every_concurrent_write_is_visible_when_it_returns(engram) -> None:
    """Read-your-writes with writes taking turns: each remember, once returned, is in every view."""
    missing: list[str] = []

    def writer(w: int) -> None:
        for i in range(5):
            memory = engram.memories.remember(
                ALICE, text=f"writer {w} noted fact {i} about turns", occurred_at=None, visibility="general",
                source={"kind": "chat", "id": "chat-1", "message_id": f"m-{w}-{i}"}, team=None, valid_from=None,
                valid_to=None)
            with engram.store.datastore.get_connection() as conn:
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM engram_memories WHERE memory_id = %(m)s) "
                    "+ (SELECT count(*) FROM engram_link_memories WHERE memory_id = %(m)s) "
                    "+ (SELECT count(*) FROM engram_insight_memories WHERE memory_id = %(m)s) AS n",
                    {"m": memory.id}).fetchone()
            if row["n"] != 3:
                missing.append(memory.id)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert missing == []
    assert len(_recalled(engram, "turns")) == 5  # recall's own limit; the rows above are all 40


def test_a_turn_that_fails_passes_on_to_the_next_waiting_write(engram) -> None:
    """The thread catching up fails (the database went away mid-turn): it raises, and a write that was
    waiting for it takes the next turn and catches up."""
    first, second = _store_without_settling(engram, ["the first of two facts", "the second of two facts"])
    runner, recorder = engram.runner, engram.store.recorder
    select, entered, release = recorder.select_notifications, threading.Event(), threading.Event()

    def failing(*a: Any, **k: Any) -> Any:
        recorder.select_notifications = select  # once
        entered.set()
        release.wait(10)
        raise RuntimeError("lost the connection")

    recorder.select_notifications = failing
    failed: list[BaseException] = []

    def lead() -> None:
        try:
            runner.settle(first)
        except RuntimeError as e:
            failed.append(e)

    leader = threading.Thread(target=lead)
    leader.start()
    assert entered.wait(10)
    waiter = threading.Thread(target=runner.settle, args=(second,))
    waiter.start()
    time.sleep(0.2)  # it waits for the turn, asking nothing
    assert waiter.is_alive()
    release.set()
    leader.join(10)
    waiter.join(30)
    assert len(failed) == 1 and not waiter.is_alive()
    assert min(_positions(engram).values()) == second


def test_a_runner_that_waited_for_another_to_apply_a_batch_decodes_none_of_it(engram) -> None:
    """Two processes' runners catching up at once: the one that reaches the tracking rows second waits for
    the first to commit, then finds its batch applied and decodes none of it (ADR 0037: with several
    serving processes each write's catch-up would otherwise unseal every event again)."""
    _store_without_settling(engram, [f"fact {i} about waiting on the rows" for i in range(6)])
    decoded: list[Any] = []
    decode = engram.store.mapper.to_domain_event
    twin = ProjectorRunner(engram.store.recorder, lambda n: decoded.append(n.id) or decode(n),
                           list(engram.projections.values()))
    projections = sorted(engram.projections.values(), key=lambda p: p.name)
    with engram.store.datastore.get_connection() as conn, conn.transaction():
        for p in projections:  # "the first process" has the rows locked, mid-batch
            conn.execute(f"SELECT 1 FROM {p.view.tracking_table_name} FOR UPDATE")
        waiting = threading.Thread(target=twin.catch_up_all)
        waiting.start()
        time.sleep(1.0)  # the twin has read the positions and the batch, and waits on the rows
        assert waiting.is_alive() and decoded == []
        head = engram.store.recorder.max_notification_id()
        for p in projections:  # and commits its batch
            conn.execute(f"UPDATE {p.view.tracking_table_name} SET notification_id = %s", (head,))
    waiting.join(30)
    assert not waiting.is_alive()
    assert decoded == []


def test_a_runner_started_without_listening_catches_up_by_polling(engram) -> None:
    """The main process of several serving processes (ADR 0037): no NOTIFY wakes its loop, polling does."""
    runner = ProjectorRunner(engram.store.recorder, engram.store.mapper.to_domain_event,
                             list(engram.projections.values()), poll_interval=0.2)
    runner.start(listen=False)
    try:
        time.sleep(0.3)
        _remember_without_settling(engram, "the release train leaves on tuesday")
        assert _wait_until(lambda: _recalled(engram, "release train") == ["the release train leaves on tuesday"], 10)
    finally:
        runner.stop()
    assert runner._thread is not None and not runner._thread.is_alive()
