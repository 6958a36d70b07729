"""Background learning: receipts become candidates with exact evidence, within daily budgets."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.adapters.budget import BudgetLedger, Limits, Refusal, Reservation
from engram.api.bootstrap import Engram
from engram.api.http import create_app
from engram.domain.clock import FixedClock

from tests.support.helpers import SECRET, auth, is_problem, remember_body

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def make(settings, database) -> Iterator[Any]:
    systems: list[Engram] = []

    def _make(clock: FixedClock | None = None, **overrides: Any) -> tuple[Engram, TestClient, FixedClock]:
        clock = clock or FixedClock(T0)
        system = Engram.open(settings.replace(**overrides), database=database, clock=clock, background=False)
        systems.append(system)
        client = TestClient(create_app(system, SECRET))
        return system, client, clock

    yield _make
    for s in systems:
        s.close()


def receipt(rid: str, text: str, author: str = "user", chat: str = "chat-42", **extra: Any) -> dict[str, Any]:
    return {"receipt_id": rid, "author": author, "text": text, "occurred_at": "2026-11-02T09:00:00+08:00",
            "source": {"kind": "chat", "id": chat, "message_id": "m-" + rid}, "visibility": "general",
            "team": None, **extra}


def candidates(client: TestClient, **who: Any) -> list[dict[str, Any]]:
    return client.get("/v1/candidates", headers=auth(**who)).json()["items"]


def test_receipt_becomes_candidate_with_exact_evidence(make) -> None:
    system, client, _ = make()
    en = "Thanks! I prefer weekly reports as short bullet points. What's next?"
    zh = "好的。以后开会请提前十分钟提醒我。谢谢"
    for rid, text in (("r-1", en), ("r-2", zh)):
        r = client.post("/v1/receipts", json=receipt(rid, text), headers=auth())
        assert r.status_code == 202 and r.json() == {"receipt_id": rid, "state": "queued"}
    assert system.learning.work() == 2
    found = {c["text"]: c for c in candidates(client)}
    assert set(found) == {"I prefer weekly reports as short bullet points", "以后开会请提前十分钟提醒我"}
    ev = found["I prefer weekly reports as short bullet points"]["evidence"][0]
    assert ev["quote"] == "I prefer weekly reports as short bullet points." and ev["quote"] in en
    assert ev["source"] == {"kind": "chat", "id": "chat-42", "message_id": "m-r-1"}
    assert datetime.fromisoformat(ev["occurred_at"]) == datetime(2026, 11, 2, 1, 0, tzinfo=UTC)
    assert found["以后开会请提前十分钟提醒我"]["evidence"][0]["quote"] in zh
    status = client.get("/v1/receipts/r-1", headers=auth()).json()
    assert status["state"] == "done" and len(status["candidate_ids"]) == 1

    # re-delivery adds nothing, before or after processing
    again = client.post("/v1/receipts", json=receipt("r-1", en), headers=auth())
    assert again.status_code == 202 and again.json()["state"] == "done"
    assert system.learning.work() == 0
    assert len(candidates(client)) == 2
    # unreviewed candidates never reach recall
    assert client.post("/v1/recall", json={"query": "weekly reports"}, headers=auth()).json()["items"] == []


def test_only_the_persons_own_words_are_mined(make) -> None:
    system, client, _ = make()
    r = client.post("/v1/receipts", json=receipt("a-1", "I prefer to answer in French.", author="assistant"),
                    headers=auth())
    assert r.json() == {"receipt_id": "a-1", "state": "ignored", "reason": "not_user_text"}
    r = client.post("/v1/receipts", json=receipt("s-1", "I prefer this: my password is hunter2-orchid"), headers=auth())
    assert r.json()["state"] == "ignored" and r.json()["reason"] == "secret_refused"
    system.learning.work()
    assert candidates(client) == []
    # No text of an ignored receipt is stored at all, sealed or not; each has a key only to seal its
    # source (ADR 0019), so what it sealed is its source and nothing else.
    stored = [n for n in system.store.recorder.select_notifications(start=1, limit=1000)
              if n.topic.endswith("Receipt.Received")]
    assert len(stored) == 2
    for n in stored:
        assert b"French" not in n.state and b"hunter2" not in n.state and b"chat-42" not in n.state
        event = system.store.mapper.to_domain_event(n)
        assert event.text is None and event.source["id"] == "chat-42"


def test_controls_and_capture_stops(make) -> None:
    system, client, _ = make()
    client.post("/v1/receipts", json=receipt("r-1", "I like green tea."), headers=auth())
    system.learning.work()
    client.put("/v1/settings", json={"learning_paused": True, "use_paused": False}, headers=auth())
    r = client.post("/v1/receipts", json=receipt("r-2", "I like black coffee."), headers=auth())
    assert r.json() == {"receipt_id": "r-2", "state": "ignored", "reason": "learning_paused"}
    client.put("/v1/settings", json={"learning_paused": False, "use_paused": False}, headers=auth())
    r = client.post("/v1/receipts", json=receipt("r-3", "May I run this tool?", kind="authorization_request"),
                    headers=auth())
    assert r.json()["state"] == "ignored"
    r = client.post("/v1/receipts", json=receipt("r-4", "I like oolong."), headers=auth())
    assert r.json() == {"receipt_id": "r-4", "state": "ignored", "reason": "capture_stopped"}
    r = client.post("/v1/receipts", json=receipt("r-5", "I like jasmine.", chat="chat-other"), headers=auth())
    assert r.json()["state"] == "queued"
    system.learning.work()
    assert sorted(c["text"] for c in candidates(client)) == ["I like green tea", "I like jasmine"]



def test_a_receipt_answers_after_its_commit_and_the_worker_finds_it(make) -> None:
    """Receipts are eventually visible (API.md): the request does not wait for the views (ADR 0063), yet
    its state is read from its own events, and a worker's turn first brings the views up to date. A stop
    of capture is the exception: the next message in that chat must find it at once (test above)."""
    system, client, _ = make()  # no background loop: nothing applies the events but a wait for them
    r = client.post("/v1/receipts", json={"messages": [receipt("q-1", "I like figs."), receipt("q-2", "I like kiwis.")]},
                    headers=auth())
    assert r.status_code == 202 and [i["state"] for i in r.json()["items"]] == ["queued", "queued"]
    rid = system.learning.ledger.store.recorder.max_notification_id()
    assert system.learning.inbox.backlog() == {}  # stored, not yet in the inbox view
    assert client.get("/v1/receipts/q-1", headers=auth()).json()["state"] == "queued"  # its own events say so
    stop = receipt("q-stop", "May I run this tool?", kind="authorization_request")
    client.post("/v1/receipts", json=stop, headers=auth())
    assert system.learning.inbox.backlog() == {"ignored": 1, "queued": 2}  # waited for: q-1 and q-2 came along
    assert rid < system.learning.ledger.store.recorder.max_notification_id()
    client.post("/v1/receipts", json=receipt("q-3", "I like dates."), headers=auth())
    assert system.learning.work() == 2  # q-1 and q-2; q-3 came after capture stopped in this chat
    assert sorted(c["text"] for c in candidates(client)) == ["I like figs", "I like kiwis"]


def test_a_batch_across_chats_ignores_only_the_stopped_chats_messages(make) -> None:
    """The chats where capture stopped are looked up once for a whole batch; each message is judged by
    its own chat, whatever its place in the batch, and another person's stop is not this person's."""
    system, client, _ = make()
    client.post("/v1/receipts", json=receipt("r-stop", "May I run this tool?", kind="authorization_request"), headers=auth())
    client.post("/v1/receipts", json=receipt("r-stop-b", "May I run this tool?", chat="chat-b", kind="authorization_request"),
                headers=auth(user="bob"))
    batch = [receipt("b-1", "I like oolong."), receipt("b-2", "I like jasmine.", chat="chat-other"),
             receipt("b-3", "I like rooibos.", chat="chat-b"), receipt("b-4", "I like sencha.")]
    states = {i["receipt_id"]: (i["state"], i.get("reason"))
              for i in client.post("/v1/receipts", json={"messages": batch}, headers=auth()).json()["items"]}
    assert states == {"b-1": ("ignored", "capture_stopped"), "b-2": ("queued", None), "b-3": ("queued", None),
                      "b-4": ("ignored", "capture_stopped")}

def test_llm_proposals_are_validated_on_the_server(make, llm) -> None:
    text = "Morning. I prefer window seats on long flights, and my password is tulip-4471."
    llm.proposals[text] = [
        {"text": "Prefers window seats on long flights", "quote": "I prefer window seats on long flights"},
        {"text": "Prefers aisle seats", "quote": "I prefer aisle seats"},  # not in the message
        {"text": "Password is tulip-4471", "quote": "my password is tulip-4471"},  # a secret
    ]
    system, client, _ = make(llm_base_url=llm.url, llm_model="test-model")
    # the message itself holds a secret, so it is never even stored: try one without
    clean = "Morning. I prefer window seats on long flights, and my token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 leaked."
    llm.proposals[clean] = llm.proposals[text] + [
        {"text": "Token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "quote": "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}]
    assert client.post("/v1/receipts", json=receipt("r-1", clean), headers=auth()).json()["reason"] == "secret_refused"
    benign = "Morning. I prefer window seats on long flights, and I hate middle seats."
    llm.proposals[benign] = [
        {"text": "Prefers window seats on long flights", "quote": "I prefer window seats on long flights"},
        {"text": "Prefers aisle seats", "quote": "I prefer aisle seats"},
        {"text": "Password is tulip-4471", "quote": "I hate middle seats"},
    ]
    client.post("/v1/receipts", json=receipt("r-2", benign, visibility="general"), headers=auth())
    assert system.learning.work() == 1
    found = candidates(client)
    assert [c["text"] for c in found] == ["Prefers window seats on long flights"]
    assert found[0]["visibility"] == "general" and found[0]["source"]["id"] == "chat-42"
    assert len(llm.calls) == 1 and llm.calls[0]["response_format"]["type"] == "json_schema"
    with system.store.datastore.transaction() as curs:
        curs.execute("SELECT model, attempts, prompt_tokens, completion_tokens, tokens_charged, proposals, accepted "
                     "FROM engram_usage_ledger")
        assert [tuple(r.values()) for r in curs.fetchall()] == [("test-model", 1, 40, 10, 50, 3, 1)]


def test_concurrent_reservations_against_caps(engram) -> None:
    ledger = BudgetLedger(engram.store.datastore)
    day = date(2026, 11, 2)

    def race(limits: Limits, tokens: int, n: int = 12) -> list[Reservation | Refusal]:
        results: list[Reservation | Refusal] = []
        barrier = threading.Barrier(n)

        def one(i: int) -> None:
            barrier.wait()
            results.append(ledger.reserve("acme", f"p{i % 3}", day, tokens, limits, T0))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "deadlock"
        return results

    admitted = [r for r in race(Limits(company_tokens=10**9, company_calls=3), 10) if isinstance(r, Reservation)]
    assert len(admitted) == 3
    day = date(2026, 11, 3)
    results = race(Limits(company_tokens=550, company_calls=1000), 100)
    admitted = [r for r in results if isinstance(r, Reservation)]
    assert len(admitted) == 5 and {r.reason for r in results if isinstance(r, Refusal)} == {"budget_exhausted"}
    assert ledger.today("acme", day) == {"tokens": 500, "calls": 5, "failed_calls": 0}
    # settling frees exactly the unused room: 5 x 60 unused = 300 -> exactly 3 more calls of 100 fit (with 50 left)
    for r in admitted:
        assert ledger.settle(r.reservation_id, 40, T0) == 40
        assert ledger.settle(r.reservation_id, 40, T0) is None  # exactly once
    assert ledger.today("acme", day) == {"tokens": 200, "calls": 5, "failed_calls": 0}
    more = [r for r in race(Limits(company_tokens=550, company_calls=1000), 100) if isinstance(r, Reservation)]
    assert len(more) == 3
    # unknown usage keeps the conservative reservation
    ledger.settle(more[0].reservation_id, None, T0)
    assert ledger.today("acme", day)["tokens"] == 500


def test_twelve_receipts_against_a_call_cap_of_three(make, llm) -> None:
    system, client, clock = make(llm_base_url=llm.url, daily_calls=3)
    for i in range(12):
        text = f"I prefer meeting room number {i}."
        llm.proposals[text] = [{"text": f"Prefers room {i}", "quote": text}]
        client.post("/v1/receipts", json=receipt(f"r-{i}", text), headers=auth(user=f"u{i % 4}"))
    workers = [threading.Thread(target=system.learning.work, kwargs={"limit": 3}) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    # a worker whose claim met another's rows takes fewer than its limit (the next interval's turn takes
    # the rest, as here): what is checked is that no concurrency spends past the cap
    system.learning.work(limit=20)
    assert len(llm.calls) == 3
    answers = [client.get(f"/v1/receipts/r-{i}", headers=auth(user=f"u{i % 4}")).json() for i in range(12)]
    assert [a["state"] for a in answers].count("done") == 3
    waiting = [a for a in answers if a["state"] != "done"]  # said to wait for the budget, not silently queued
    assert len(waiting) == 9 and all(a["state"] == "deferred" and a["reason"] == "budget" for a in waiting), waiting
    metrics = client.get("/metrics").text
    assert 'engram_model_budget_used_today{kind="calls"} 3.0' in metrics
    assert 'engram_model_budget_daily_limit{kind="calls"} 3.0' in metrics
    assert "\nengram_model_budget_spent_companies 1.0\n" in metrics
    # deferred to the next UTC day without using a retry; same day: nothing more
    clock.advance(hours=2)
    assert system.learning.work(limit=20) == 0 and len(llm.calls) == 3
    clock.advance(hours=14)  # 2026-11-03 01:00 UTC
    assert system.learning.work(limit=20) == 3 and len(llm.calls) == 6


def test_one_members_batch_cannot_spend_the_companys_day_by_default(make, llm) -> None:
    """Unset ENGRAM_PERSON_DAILY_CALLS: a person may use a quarter of the company's calls (here 2 of 8)."""
    system, client, _ = make(llm_base_url=llm.url, daily_calls=8)
    for i in range(10):
        text = f"I prefer meeting room number {i}."
        llm.proposals[text] = [{"text": f"Prefers room {i}", "quote": text}]
        client.post("/v1/receipts", json=receipt(f"r-{i}", text), headers=auth(user="u1"))
    system.learning.work(limit=20)
    assert len(llm.calls) == 2
    waiting = [client.get(f"/v1/receipts/r-{i}", headers=auth(user="u1")).json() for i in range(10)]
    assert sum(1 for a in waiting if a["state"] == "deferred" and a["reason"] == "budget") == 8
    colleague = "I prefer the window desk."
    llm.proposals[colleague] = [{"text": "Prefers the window desk", "quote": colleague}]
    client.post("/v1/receipts", json=receipt("r-colleague", colleague), headers=auth(user="u2"))
    system.learning.work(limit=20)
    assert client.get("/v1/receipts/r-colleague", headers=auth(user="u2")).json()["state"] == "done"
    assert len(llm.calls) == 3 and system.learning.budget.today("acme", T0.date())["calls"] == 3


def test_a_candidates_valid_time_is_resolved_against_the_messages_time_where_that_is_certain(make) -> None:
    system, client, _ = make()
    said = "2026-11-02T09:00:00+08:00"  # a Monday morning in Shanghai
    for rid, text, when in (("r-1", "Next Thursday we have the quarterly offsite in Potsdam.", said),
                            ("r-2", "我上个月搬到了杭州。", said),
                            ("r-3", "I prefer aisle seats.", said),
                            ("r-4", "Next Friday I'm on the night shift.", None)):
        client.post("/v1/receipts", json=receipt(rid, text, occurred_at=when), headers=auth())
    assert system.learning.work() == 4
    found = {c["text"]: c for c in candidates(client)}
    spans = {t: (c["valid_from"], c["valid_to"], c["time_uncertain"]) for t, c in found.items()}
    assert spans == {
        "Next Thursday we have the quarterly offsite in Potsdam": (
            "2026-11-02T01:00:00Z", "2026-11-12T16:00:00Z", False),  # until the Friday after the later Thursday
        "我上个月搬到了杭州": ("2026-09-30T16:00:00Z", None, False),
        "I prefer aisle seats": (None, None, True),
        "Next Friday I'm on the night shift": (None, None, True),  # when it was said is unknown
    }
    page = client.get("/memory", headers=auth()).text  # the card says it in plain words
    assert ('True from <time datetime="2026-11-02T01:00:00+00:00">2026-11-02 01:00 UTC</time> until '
            '<time datetime="2026-11-12T16:00:00+00:00">') in page
    assert 'True since <time datetime="2026-09-30T16:00:00+00:00">' in page


def test_where_configured_the_rules_learn_while_the_model_budget_is_spent_and_the_receipt_says_so(make, llm) -> None:
    system, client, _ = make(llm_base_url=llm.url, daily_calls=1, budget_fallback="rules")
    for i in range(3):
        text = f"I prefer meeting room {i} on Mondays."
        llm.proposals[text] = [{"text": f"Prefers room {i} on Mondays", "quote": text}]
        client.post("/v1/receipts", json=receipt(f"r-{i}", text), headers=auth())
    assert system.learning.work() == 3 and len(llm.calls) == 1  # one model call, then the rules, uncharged
    answers = [client.get(f"/v1/receipts/r-{i}", headers=auth()).json() for i in range(3)]
    assert [(a["state"], a.get("reason"), a["extractor"]) for a in answers] == [
        ("done", None, "llm"), ("done", "budget", "rules"), ("done", "budget", "rules")]
    assert sorted(c["text"] for c in candidates(client)) == [
        "I prefer meeting room 1 on Mondays", "I prefer meeting room 2 on Mondays", "Prefers room 0 on Mondays"]
    assert system.learning.budget.today("acme", T0.date())["calls"] == 1


def test_learning_by_rules_is_never_charged_or_stopped_by_the_model_budget(make) -> None:
    system, client, _ = make(daily_calls=1, daily_tokens=10)  # no model configured: the rule extractor
    for i in range(5):
        client.post("/v1/receipts", json=receipt(f"r-{i}", f"I prefer meeting room {i} on Mondays."), headers=auth())
    assert system.learning.work() == 5
    assert [client.get(f"/v1/receipts/r-{i}", headers=auth()).json()["state"] for i in range(5)] == ["done"] * 5
    assert len(candidates(client)) == 5
    assert system.learning.budget.today("acme", T0.date()) == {"tokens": 0, "calls": 0, "failed_calls": 0}
    metrics = client.get("/metrics").text
    assert 'engram_model_budget_used_today{kind="calls"} 0.0' in metrics
    assert "\nengram_model_budget_spent_companies 0.0\n" in metrics


def test_a_failed_call_is_charged_only_what_the_provider_reported_and_retries(make, llm) -> None:
    system, client, clock = make(llm_base_url=llm.url)
    text = "I prefer tea in the afternoon."
    llm.proposals[text] = [{"text": "Prefers afternoon tea", "quote": text}]
    llm.failures = [500]
    client.post("/v1/receipts", json=receipt("r-1", text), headers=auth())
    assert system.learning.work() == 0
    charged = system.learning.budget.today("acme", T0.date())
    # the provider reported no usage for the failed call: no tokens charged; the call counts, and shows
    assert charged == {"tokens": 0, "calls": 1, "failed_calls": 1}
    status = client.get("/v1/admin/status", headers=auth(user="root", role="admin")).json()
    assert status["budget_today"]["failed_calls"] == 1
    days = status["budget_days"]  # the last 14 days, today last: only today has any use
    assert len(days) == 14 and days[-1] == {"day": T0.date().isoformat(), "tokens": 0, "calls": 1, "failed_calls": 1}
    assert days[0]["day"] == (T0.date() - timedelta(days=13)).isoformat()
    assert all(d["calls"] == 0 and d["failed_calls"] == 0 for d in days[:-1])
    metrics = client.get("/metrics").text
    assert "\nengram_model_call_failures_total 1.0\n" in metrics and "\nengram_extraction_failures_total 1.0\n" in metrics
    assert system.learning.work() == 0  # backing off
    clock.advance(minutes=5)
    assert system.learning.work() == 1
    assert [c["text"] for c in candidates(client)] == ["Prefers afternoon tea"]
    assert system.learning.budget.today("acme", T0.date()) == {"tokens": 50, "calls": 2, "failed_calls": 1}
    clock.advance(days=1)  # yesterday's use stays in the history, a day earlier
    days = client.get("/v1/admin/status", headers=auth(user="root", role="admin")).json()["budget_days"]
    assert days[-2] == {"day": T0.date().isoformat(), "tokens": 50, "calls": 2, "failed_calls": 1}
    assert days[-1]["calls"] == 0


def test_a_crash_between_steps_neither_loses_nor_doubles(make, llm) -> None:
    system, client, clock = make(llm_base_url=llm.url)
    text = "I prefer short emails. From now on, cc my assistant."
    llm.proposals[text] = [{"text": "Prefers short emails", "quote": "I prefer short emails."},
                           {"text": "CC the assistant", "quote": "From now on, cc my assistant."}]
    client.post("/v1/receipts", json=receipt("r-1", text), headers=auth())
    real = system.memories.propose
    calls = {"n": 0}

    def crash_on_second(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker died")
        return real(*args, **kwargs)

    system.memories.propose = crash_on_second  # type: ignore[method-assign]
    assert system.learning.work() == 0
    system.memories.propose = real  # type: ignore[method-assign]
    assert len(candidates(client)) == 1
    assert system.learning.work() == 0  # the lease has not lapsed yet
    clock.advance(minutes=3)  # recovery: the lapsed lease is picked up again
    assert system.learning.work() == 1
    assert sorted(c["text"] for c in candidates(client)) == ["CC the assistant", "Prefers short emails"]
    assert len(llm.calls) == 1  # the extraction was recorded; no second model call


def test_zero_limit_pauses_and_keeps_the_queue(make, llm) -> None:
    system, client, clock = make(llm_base_url=llm.url, daily_calls=0)
    client.post("/v1/receipts", json=receipt("r-1", "I like plums."), headers=auth())
    assert system.learning.work() == 0 and llm.calls == []
    answer = client.get("/v1/receipts/r-1", headers=auth()).json()
    assert (answer["state"], answer["reason"], answer["attempts"]) == ("deferred", "budget", 0)
    # explicit saves, review, correct, forget and export work with no budget at all
    r = client.post("/v1/memories", json=remember_body("I like damsons"), headers=auth())
    assert r.status_code == 201
    mid = r.json()["id"]
    assert client.post(f"/v1/memories/{mid}/correct", json={"text": "I like greengages"}, headers=auth()).status_code == 200
    assert client.get("/v1/export", headers=auth()).status_code == 200
    assert client.post(f"/v1/memories/{mid}/forget", headers=auth()).status_code == 202


def test_a_request_larger_than_the_whole_allowance_fails_alone(make, llm) -> None:
    system, client, _ = make(llm_base_url=llm.url, daily_tokens=1000, person_daily_tokens=1000)
    long_text = "I prefer " + "very " * 400 + "long walks."
    short = "I prefer figs."
    llm.proposals[short] = [{"text": "Prefers figs", "quote": short}]
    client.post("/v1/receipts", json=receipt("r-big", long_text), headers=auth())
    client.post("/v1/receipts", json=receipt("r-small", short), headers=auth())
    system.learning.work()
    big = client.get("/v1/receipts/r-big", headers=auth()).json()
    assert big == {"receipt_id": "r-big", "state": "failed", "reason": "larger_than_daily_budget", "attempts": 0,
                   "last_error": "larger_than_daily_budget", "candidate_ids": []}
    assert [c["text"] for c in candidates(client)] == ["Prefers figs"]
    assert len(llm.calls) == 1


def test_explicit_save_racing_a_budget_rejection_succeeds(make, llm) -> None:
    system, client, _ = make(llm_base_url=llm.url, daily_calls=1)
    for i in range(6):
        client.post("/v1/receipts", json=receipt(f"r-{i}", f"I prefer plan {i}."), headers=auth())
    results: list[int] = []
    worker = threading.Thread(target=lambda: system.learning.work(limit=6))
    saver = threading.Thread(target=lambda: results.extend(
        client.post("/v1/memories", json=remember_body(f"I like option {i}"), headers=auth()).status_code
        for i in range(5)))
    worker.start()
    saver.start()
    worker.join(timeout=60)
    saver.join(timeout=60)
    assert results == [201] * 5 and len(llm.calls) == 1


def test_payload_is_cleared_a_day_after_processing_and_on_forget(make) -> None:
    system, client, clock = make()
    client.post("/v1/receipts", json=receipt("r-1", "I like quinces."), headers=auth())
    client.post("/v1/receipts", json=receipt("r-2", "I like medlars."), headers=auth())
    system.learning.work()
    by_text = {c["text"]: c["id"] for c in candidates(client)}
    from engram.domain.receipt import receipt_uuid

    r1, r2 = receipt_uuid("acme", "alice", "r-1"), receipt_uuid("acme", "alice", "r-2")
    assert system.store.keys.get(r1) is not None and system.store.keys.get(r2) is not None
    # forgetting a memory learned from r-2 clears r-2's text at once
    client.post(f"/v1/candidates/{by_text['I like medlars']}/confirm", json={}, headers=auth())
    forget_id = client.post(f"/v1/memories/{by_text['I like medlars']}/forget", headers=auth()).json()["forget_id"]
    assert system.store.keys.get(r2) is None
    copies = {c["copy"]: c for c in client.get(f"/v1/forgets/{forget_id}", headers=auth()).json()["copies"]}
    assert copies["inbox"]["state"] == "purged" and str(r2) in copies["inbox"]["evidence"]
    assert [type(e).__name__ for e in system.store.events.get(r2)][-1] == "PayloadCleared"
    assert system.learning.clear_processed_payloads() == 0  # r-1 is not a day old yet
    clock.advance(days=1, seconds=1)
    assert system.learning.clear_processed_payloads() == 1
    assert system.store.keys.get(r1) is None
    events = [type(e).__name__ for e in system.store.events.get(r1)]
    assert events == ["Received", "Extracted", "Processed", "PayloadCleared"]
    assert all(getattr(e, "text", None) is None for e in system.store.events.get(r1))


def test_restricted_receipts_need_a_scope_the_person_holds(make) -> None:
    system, client, _ = make()
    r = client.post("/v1/receipts", json=receipt("r-1", "I like tea.", visibility="restricted"), headers=auth())
    assert r.status_code == 422 and r.json()["code"] == "invalid_scope"
    assert system.learning.work() == 0


def test_a_whole_conversation_in_one_call(make) -> None:
    system, client, _ = make()
    conversation = [receipt("c-1", "Where do you want the summary?", author="assistant"),
                    receipt("c-2", "I prefer summaries in the team channel."),
                    receipt("c-3", "Thanks!"),
                    receipt("c-2", "I prefer summaries in the team channel.")]  # the same message twice
    r = client.post("/v1/receipts", json={"messages": conversation}, headers=auth())
    assert r.status_code == 202, r.text
    assert r.json() == {"items": [{"receipt_id": "c-1", "state": "ignored", "reason": "not_user_text"},
                                  {"receipt_id": "c-2", "state": "queued"}, {"receipt_id": "c-3", "state": "queued"},
                                  {"receipt_id": "c-2", "state": "queued"}]}
    before = client.get("/v1/receipts/c-2", headers=auth()).json()
    assert before == {"receipt_id": "c-2", "state": "queued", "attempts": 0, "last_error": None, "candidate_ids": []}
    assert system.learning.work() == 2
    after = client.get("/v1/receipts/c-2", headers=auth()).json()
    assert after["state"] == "done" and after["attempts"] == 0 and len(after["candidate_ids"]) == 1
    # sent again: nothing new, each answered as it stands
    again = client.post("/v1/receipts", json={"messages": conversation[:2]}, headers=auth()).json()
    assert [i["state"] for i in again["items"]] == ["ignored", "done"]

    # one bad message refuses the whole batch, and nothing of it is stored
    bad = [receipt("d-1", "I like tea."), {**receipt("d-2", "x"), "visibility": "restricted", "team": "t-none"}]
    is_problem(client.post("/v1/receipts", json={"messages": bad}, headers=auth()), 422, "invalid_scope")
    is_problem(client.get("/v1/receipts/d-1", headers=auth()), 404, "not_found")
    too_many = [receipt(f"e-{i}", "hi") for i in range(101)]
    is_problem(client.post("/v1/receipts", json={"messages": too_many}, headers=auth()), 422, "validation_error")
    is_problem(client.post("/v1/receipts", json={"messages": []}, headers=auth()), 422, "validation_error")


def test_a_batch_that_loses_a_race_for_one_receipt_still_stores_every_other(engram) -> None:
    """Another request stores one receipt of the batch between the batch's look-up and its save: the batch's
    save is refused whole, and each receipt is then stored once, by one request or the other."""
    from engram.domain.scope import Caller

    who = Caller("acme", "alice", "bot", bot="b-1")
    engram.governance.put_directory(Caller("acme", "root", "admin"), {"bots": {"b-1": {}}})
    learning = engram.learning

    def message(rid: str) -> dict[str, Any]:
        return {"receipt_id": rid, "author": "user", "kind": "message", "text": f"note {rid} about the heron",
                "occurred_at": None, "source": {"kind": "chat", "id": "chat-42", "message_id": rid},
                "visibility": "general", "team": None}

    looked_up = engram.ledger.get_many

    def raced(ids: Any, kind: Any) -> Any:
        found = looked_up(ids, kind)
        engram.ledger.get_many = looked_up
        learning.receive_many(who, [message("r-2")])  # the other request, just after the look-up
        return found

    engram.ledger.get_many = raced
    try:
        answer = learning.receive_many(who, [message(r) for r in ("r-1", "r-2", "r-3")])
    finally:
        engram.ledger.get_many = looked_up
    assert [i.receipt_id for i in answer.items] == ["r-1", "r-2", "r-3"]
    assert [learning.status(who, r).state for r in ("r-1", "r-2", "r-3")] == ["queued"] * 3


def test_the_queue_takes_turns_across_people_and_companies(make) -> None:
    """One person's batch of a hundred does not make a colleague's, or another company's, one message wait."""
    system, client, _ = make()
    batch = [receipt(f"a-{i}", f"I prefer meeting room {i} on Mondays.") for i in range(100)]
    assert client.post("/v1/receipts", json={"messages": batch}, headers=auth()).status_code == 202
    assert client.post("/v1/receipts", json=receipt("b-1", "I prefer tea."), headers=auth(user="bob")).status_code == 202
    assert client.post("/v1/receipts", json=receipt("c-1", "I prefer coffee."),
                       headers=auth(company="beta", user="carol")).status_code == 202
    system.ledger.caught_up()  # receipts are eventually visible: a worker's turn begins with this
    inbox = system.learning.inbox
    now = datetime.now(UTC)
    first = inbox.claim(now, now + timedelta(minutes=5), 3)
    claimed = {(r["person"], r["receipt_id"]) for r in (inbox.get(u) for u in first) if r is not None}
    assert claimed == {("alice", "a-0"), ("bob", "b-1"), ("carol", "c-1")}, claimed  # each one's oldest, in turns
    second = inbox.claim(now, now + timedelta(minutes=5), 2)
    assert [inbox.get(u)["receipt_id"] for u in second] == ["a-1", "a-2"]  # then alice's, oldest first
