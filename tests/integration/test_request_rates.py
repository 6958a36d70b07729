"""Request rates through HTTP: a person past ENGRAM_RATE_PERSON gets 429 `rate_limited` with
`Retry-After` while a colleague's requests go on; the company's rate counts what the people's let
through; an unauthenticated request is refused before it counts."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.helpers import auth


@pytest.fixture
def settings(settings: Any) -> Any:
    return settings.replace(rate_person=5, rate_company=12, heavy_reads=1)  # bursts of 10 and 24; one slot


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
    again = client.get("/v1/settings", headers=auth(user="p6"))
    assert again.status_code == 429 and "ENGRAM_RATE_COMPANY" in again.json()["detail"]
    assert client.get("/v1/settings", headers=auth(company="beta")).status_code == 200


def test_a_request_without_a_valid_token_is_refused_before_it_counts(client) -> None:
    for _ in range(30):
        assert client.get("/v1/settings", headers={"Authorization": "Bearer nonsense"}).status_code == 401
    assert client.get("/v1/settings", headers=auth()).status_code == 200


def test_heavy_reads_go_one_at_a_time_per_person_in_a_few_slots(engram, client) -> None:
    """While alice's export runs: her second export waits for it, bob's large recall waits for the
    slot, and bob's ordinary recall is not held up at all; all are answered once it is done."""
    import threading

    inside, release = threading.Event(), threading.Event()
    export = engram.memories._export

    def slow_export(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        assert release.wait(30)
        return export(*args, **kwargs)

    engram.memories._export = slow_export
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
