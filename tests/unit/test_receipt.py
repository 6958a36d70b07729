"""The receipt's rules: one end state, idempotent ids, and the time rule, without any server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.domain.instant import InvalidTime
from engram.domain.receipt import FAILED, IGNORED, PROCESSED, QUEUED, Receipt, candidate_uuid, receipt_uuid

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def receive(**changes: object) -> Receipt:
    fields = {"company": "acme", "person": "alice", "receipt_id": "r-1", "author": "user", "kind": "message",
              "text": "I prefer tea.", "occurred_at": NOW, "source": {"kind": "chat", "id": "c-1"},
              "visibility": "general", "team": None, "ignored_because": None, "at": NOW}
    return Receipt.receive(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_receipt_reaches_one_end_state_and_stays_there() -> None:
    r = receive()
    assert r.state == QUEUED
    r.processed(["c-1"], proposals=1, extractor="rules", at=NOW)
    r.fail("late", at=NOW)
    r.ignore("late", at=NOW)
    assert (r.state, r.candidate_ids) == (PROCESSED, ["c-1"])
    failed = receive()
    failed.fail("model_error", at=NOW)
    failed.processed(["c-2"], proposals=1, extractor="rules", at=NOW)
    assert failed.state == FAILED and failed.candidate_ids == []


def test_an_ignored_receipt_keeps_its_reason_and_is_never_mined() -> None:
    r = receive(ignored_because="learning_paused", text=None)
    assert (r.state, r.reason, r.text) == (IGNORED, "learning_paused", None)
    r.extracted([{"quote": "x", "text": "x"}], "rules", "none", at=NOW)
    assert r.proposals is None


def test_clearing_the_payload_happens_once() -> None:
    r = receive()
    r.clear_payload("processed", at=NOW)
    r.clear_payload("processed", at=NOW)
    assert r.cleared and len(r.collect_events()) == 2  # Received and one PayloadCleared


def test_ids_are_deterministic_so_retries_never_duplicate() -> None:
    assert receipt_uuid("acme", "alice", "r-1") == receipt_uuid("acme", "alice", "r-1")
    assert receipt_uuid("acme", "alice", "r-1") != receipt_uuid("globex", "alice", "r-1")
    rid = receipt_uuid("acme", "alice", "r-1")
    assert candidate_uuid(rid, "tea", "likes tea") == candidate_uuid(rid, "tea", "likes tea")
    assert candidate_uuid(rid, "tea", "likes tea") != candidate_uuid(rid, "tea", "likes green tea")


def test_a_receipt_time_obeys_the_time_rule() -> None:
    with pytest.raises(InvalidTime):
        receive(occurred_at=datetime.fromisoformat("0001-01-01T00:00:00+14:00"))
    with pytest.raises(InvalidTime):
        receive(occurred_at=datetime(2026, 1, 1))
