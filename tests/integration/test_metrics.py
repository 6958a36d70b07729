"""/metrics: Prometheus text with HELP and TYPE for every family, requests counted under their route
template and status, no label holding an id or a company's name, and an answer while the database is away."""

from __future__ import annotations

import re
from typing import Any

from tests.support.helpers import auth, remember_body

FAMILIES = ("engram_http_requests_total", "engram_http_request_duration_seconds", "engram_recall_degraded_total",
            "engram_receipt_processing_failures_total", "engram_inbox_receipts", "engram_purge_pending",
            "engram_tombstones_unpublished", "engram_projection_lag", "engram_quarantined_events",
            "engram_model_call_failures_total", "engram_extraction_failures_total", "engram_insight_backlog",
            "engram_events_total", "engram_database_up")
SUFFIXES = ("_bucket", "_count", "_sum")


def families(text: str) -> dict[str, list[str]]:
    """Family -> its sample lines; fails unless every family has HELP then TYPE before its samples."""
    found: dict[str, list[str]] = {}
    helped = current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped = line.split()[2]
        elif line.startswith("# TYPE "):
            current = line.split()[2]
            assert current == helped, f"TYPE without HELP: {line}"
            assert current not in found, f"family twice: {current}"
            found[current] = []
        elif line:
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
            assert name and current and name.group(0) in (current, *(current + s for s in SUFFIXES)), line
            found[current].append(line)
    return found


def value(text: str, sample: str) -> float:
    """The value of one sample line, given as it is written before the value (name and labels)."""
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {sample}")


def test_every_family_has_help_and_type_and_the_expected_ones_are_there(client: Any) -> None:
    assert client.get("/livez").status_code == 200
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = families(r.text)
    assert set(FAMILIES) <= set(found), set(FAMILIES) - set(found)
    assert value(r.text, "engram_database_up") == 1
    assert value(r.text, "engram_model_call_failures_total") == value(r.text, "engram_extraction_failures_total") == 0
    assert "process_resident_memory_bytes" in found  # the process's own


def test_a_request_counts_under_its_route_template_and_status(client: Any) -> None:
    memory_id = client.post("/v1/memories", json=remember_body("I prefer tea"), headers=auth()).json()["id"]
    for _ in range(2):
        assert client.get(f"/v1/memories/{memory_id}", headers=auth()).status_code == 200
    assert client.get("/v1/memories/mem_nonexistent", headers=auth()).status_code == 404
    assert client.get(f"/v1/no/such/{memory_id}").status_code == 404
    assert client.delete("/v1/recall").status_code == 405
    text = client.get("/metrics").text
    route = 'method="GET",route="/v1/memories/{memory_id}"'
    assert value(text, f"engram_http_request_duration_seconds_count{{{route},status=\"200\"}}") == 2
    assert value(text, f"engram_http_requests_total{{{route},status=\"200\"}}") == 2
    assert value(text, f'engram_http_request_duration_seconds_bucket{{le="+Inf",{route},status="200"}}') == 2
    assert value(text, f"engram_http_requests_total{{{route},status=\"404\"}}") == 1
    assert value(text, 'engram_http_requests_total{method="POST",route="/v1/memories",status="201"}') == 1
    assert value(text, 'engram_http_requests_total{method="GET",route="unmatched",status="404"}') == 1
    assert value(text, 'engram_http_requests_total{method="DELETE",route="/v1/recall",status="405"}') == 1
    assert memory_id not in text and "nonexistent" not in text and "/no/such" not in text


def test_no_label_holds_a_company_a_person_or_an_id(client: Any) -> None:
    ids = []
    for company, person in (("zebracorp", "quentin"), ("yakindustries", "ottoline")):
        who = auth(company=company, user=person)
        r = client.post("/v1/memories", json=remember_body("Lunch is at noon on Fridays"), headers=who)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
        r = client.post("/v1/receipts", headers=who, json={
            "receipt_id": f"rcpt-{person}", "author": "user", "text": "I prefer the window seat",
            "source": {"kind": "chat", "id": f"chat-{person}", "message_id": f"m-{person}"}})
        assert r.status_code in (200, 201, 202), r.text
        assert client.post("/v1/recall", json={"query": "lunch fridays"}, headers=who).status_code == 200
        assert client.post(f"/v1/memories/{ids[-1]}/forget", headers=who).status_code in (200, 202)
    text = client.get("/metrics").text
    assert value(text, 'engram_inbox_receipts{state="queued"}') == 2
    for secret in ("zebracorp", "yakindustries", "quentin", "ottoline", "rcpt-", "chat-", "Lunch", "window", *ids):
        assert secret not in text, secret
    labels = re.findall(r'(\w+)="([^"]*)"', text)
    names = {name for name, _ in labels}
    assert {"method", "route", "status", "state", "projection"} <= names
    # every label value is a method, a route template, a status, or a state, kind or name from the code
    assert all(not re.search(r"[0-9a-f]{8}-|mem_", v) for _, v in labels), labels


def test_metrics_answers_while_the_database_is_away(client: Any, engram: Any) -> None:
    assert client.get("/readyz").status_code == 200
    engram.operations.availability.lost(None)  # as the first failed call would: every database call fails at once
    r = client.get("/metrics")
    assert r.status_code == 200
    found = families(r.text)
    assert value(r.text, "engram_database_up") == 0
    assert "engram_http_requests_total" in found and "engram_recall_degraded_total" in found
    assert "engram_inbox_receipts" not in found  # what it could not read is left out, not shown as 0
