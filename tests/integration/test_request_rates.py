"""Request rates through HTTP: a person past ENGRAM_RATE_PERSON gets 429 `rate_limited` with
`Retry-After` while a colleague's requests go on; the company's rate counts what the people's let
through; an unauthenticated request is refused before it counts; a refusal is held before it is
answered; a person's requests beyond ENGRAM_PERSON_IN_FLIGHT wait their turn while a colleague's do not."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.helpers import auth


@pytest.fixture
def settings(settings: Any) -> Any:
    # bursts of 10 and 24; one slot; refusals answered at once (their hold has a test of its own)
    return settings.replace(rate_person=5, rate_company=12, heavy_reads=1, rate_refusal_delay=0)


def held_exports(engram: Any) -> tuple[Any, Any]:
    """Exports that wait inside the service until `release` is set; `inside` is set once one runs."""
    import threading

    inside, release = threading.Event(), threading.Event()
    export = engram.memories._export

    def slow_export(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        assert release.wait(30)
        return export(*args, **kwargs)

    engram.memories._export = slow_export
    return inside, release


def test_a_person_past_their_rate_waits_and_a_colleague_does_not(client) -> None:
    alice, bob, elsewhere = auth(), auth(user="bob"), auth(company="beta")
    answers = [client.get("/v1/settings", headers=alice) for _ in range(16)]
    statuses = [r.status_code for r in answers]
    assert statuses[:8] == [200] * 8 and 429 in statuses, statuses  # a burst of twice the rate, then refused
    refused = next(r for r in answers if r.status_code == 429)
    problem = refused.json()
    assert problem["code"] == "rate_limited" and "ENGRAM_RATE_PERSON" in problem["detail"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 2
    assert refused.headers["content-type"].startswith("application/problem+json")
    for headers in (bob, elsewhere):  # the others' requests are not refused by alice's burst
        assert [client.get("/v1/settings", headers=headers).status_code for _ in range(5)] == [200] * 5
    time.sleep(int(refused.headers["Retry-After"]) + 0.2)
    assert client.get("/v1/settings", headers=alice).status_code == 200  # and alice is served again


def test_the_company_rate_counts_only_what_the_peoples_let_through(client) -> None:
    people = [auth(user=f"p{i}") for i in range(6)]
    burst = [client.get("/v1/settings", headers=person).status_code for person in people for _ in range(4)]
    assert burst.count(200) <= 24 and 429 not in burst[:20], burst  # 24 in all: the company's burst
    # the bucket refills a token every 1/12 s: a slow machine's burst may have earned one or two back
    again = [client.get("/v1/settings", headers=auth(user=f"p{6 + i % 4}")) for i in range(8)]
    refused = [r for r in again if r.status_code == 429]
    assert refused and "ENGRAM_RATE_COMPANY" in refused[0].json()["detail"], [r.status_code for r in again]
    assert client.get("/v1/settings", headers=auth(company="beta")).status_code == 200


def test_a_request_without_a_valid_token_is_refused_before_it_counts(client) -> None:
    for _ in range(30):
        assert client.get("/v1/settings", headers={"Authorization": "Bearer nonsense"}).status_code == 401
    assert client.get("/v1/settings", headers=auth()).status_code == 200


def test_heavy_reads_go_one_at_a_time_per_person_in_a_few_slots(engram, client) -> None:
    """While alice's export runs: her second export waits for it, bob's large recall waits for the
    slot, and bob's ordinary recall is not held up at all; all are answered once it is done."""
    import threading

    inside, release = held_exports(engram)
    alice, bob = auth(), auth(user="bob")
    answers: dict[str, Any] = {}
    first = threading.Thread(target=lambda: answers.update(first=client.get("/v1/export", headers=alice)))
    first.start()
    assert inside.wait(30)
    second = threading.Thread(target=lambda: answers.update(second=client.get("/v1/export", headers=alice)))
    second.start()
    assert client.post("/v1/recall", json={"query": "tea"}, headers=bob).status_code == 200  # ordinary: not held
    large = threading.Thread(target=lambda: answers.update(large=client.post(
        "/v1/recall", json={"query": "tea", "limit": 200}, headers=bob)))
    large.start()
    time.sleep(0.5)
    assert "large" not in answers and "second" not in answers  # each waits: for the slot, for her first
    release.set()
    for t in (first, second, large):
        t.join(30)
    assert [answers[k].status_code for k in ("first", "second", "large")] == [200, 200, 200]


def test_a_refused_request_is_held_before_its_answer(database, settings) -> None:
    """A client that retries at once is slowed to one refusal a second per connection (ADR 0061)."""
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    app = create_app(Engram.open(settings.replace(rate_refusal_delay=0.4), database=database, background=False),
                     SECRET)
    with TestClient(app) as held:
        statuses, took = [], 0.0
        for _ in range(12):
            started = time.perf_counter()
            r = held.get("/v1/settings", headers=auth())
            statuses.append(r.status_code)
            if r.status_code == 429:
                took = time.perf_counter() - started
                assert int(r.headers["Retry-After"]) >= 1 and r.json()["code"] == "rate_limited"
                break
        assert statuses[-1] == 429 and took >= 0.4, (statuses, took)
        assert held.get("/v1/settings", headers=auth(user="bob")).status_code == 200
    app.state.composition_root.close()


def test_a_persons_requests_beyond_their_turns_wait_and_a_colleague_does_not(database, settings, monkeypatch) -> None:
    import threading

    from fastapi.testclient import TestClient

    from engram.api import limits
    from engram.api.bootstrap import Engram
    from engram.api.http import create_app

    from tests.support.helpers import SECRET

    monkeypatch.setattr(limits, "WAITING", 1)
    root = Engram.open(settings.replace(rate_person=0, rate_company=0, person_in_flight=1), database=database,
                       background=False)
    inside, release = held_exports(root)
    answers: dict[str, Any] = {}
    try:
        with TestClient(create_app(root, SECRET)) as client:
            first = threading.Thread(target=lambda: answers.update(first=client.get("/v1/export", headers=auth())))
            first.start()
            assert inside.wait(30)
            second = threading.Thread(target=lambda: answers.update(second=client.get("/v1/settings", headers=auth())))
            second.start()
            time.sleep(0.3)
            assert "second" not in answers  # her turn is taken: it waits, using no worker
            third = client.get("/v1/settings", headers=auth())  # one waiting already: refused at once
            assert third.status_code == 429 and "ENGRAM_PERSON_IN_FLIGHT=1" in third.json()["detail"]
            assert third.headers["Retry-After"] == "1"
            assert client.get("/v1/settings", headers=auth(user="bob")).status_code == 200  # a colleague: at once
            release.set()
            for t in (first, second):
                t.join(30)
            assert [answers[k].status_code for k in ("first", "second")] == [200, 200]
            assert client.get("/v1/settings", headers=auth()).status_code == 200  # her turns are free again
    finally:
        release.set()
        root.close()


def test_a_sign_in_link_beside_another_session_counts_once(database, settings) -> None:
    """The page asks before bob's link replaces alice's session: only the link's person is counted."""
    from fastapi.testclient import TestClient

    from engram.api.bootstrap import Engram
    from engram.api.http import create_app
    from engram.web.session import SESSION_COOKIE

    from tests.support.helpers import SECRET, token

    root = Engram.open(settings.replace(rate_person=1, rate_company=100), database=database, background=False)
    try:
        with TestClient(create_app(root, SECRET), follow_redirects=False) as client:
            client.cookies.set(SESSION_COOKIE, token(entry="web"))
            asked = client.get("/memory", params={"token": token(user="bob", entry="web")})
            assert asked.status_code == 200 and "bob" in asked.text  # the page that asks before switching
            client.cookies.clear()
            alice = [client.get("/v1/settings", headers=auth()).status_code for _ in range(2)]
            assert alice == [200, 200]  # her burst of 2 is whole: the page counted only bob
    finally:
        root.close()
