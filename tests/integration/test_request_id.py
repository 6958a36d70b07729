"""X-Request-Id on every answer: the caller's own when it is sane, else a new one; on problems, 404s,
405s, 413s refused before routing, 500s, 503s and /mcp too; and the id of the request being served is
what the code running for it (in a worker thread) sees."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from engram.adapters.logs import request_id

from tests.support.helpers import auth, remember_body

NEW = re.compile(r"[0-9a-f]{32}")


def test_the_callers_own_id_is_echoed(client: Any) -> None:
    for headers in ({"X-Request-Id": "call-42.retry_1"}, {"x-request-id": "call-42.retry_1", **auth()}):
        assert client.get("/livez", headers=headers).headers["x-request-id"] == "call-42.retry_1"
    r = client.get("/v1/memories", headers={"X-Request-Id": "A1b2-C3d4"})  # no token: a problem
    assert r.status_code == 401 and r.headers["x-request-id"] == "A1b2-C3d4"
    sane = "x" * 128
    assert client.get("/livez", headers={"X-Request-Id": sane}).headers["x-request-id"] == sane


@pytest.mark.parametrize("given", ["x" * 129, "has space", "semi;colon", "quote\"d", "", "tab\tin", "caf\u00e9"])
def test_an_id_that_is_not_sane_is_replaced(client: Any, given: str) -> None:
    r = client.get("/livez", headers={"X-Request-Id": given.encode("latin-1")})
    assert r.status_code == 200 and NEW.fullmatch(r.headers["x-request-id"]), r.headers["x-request-id"]


def test_two_ids_are_replaced_and_each_answer_gets_its_own(client: Any) -> None:
    r = client.get("/livez", headers=[("X-Request-Id", "one"), ("X-Request-Id", "two")])
    assert NEW.fullmatch(r.headers["x-request-id"])
    given = {client.get("/livez").headers["x-request-id"] for _ in range(5)}
    assert len(given) == 5 and all(NEW.fullmatch(g) for g in given)


def test_every_kind_of_answer_carries_one(client: Any, engram: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "404 unmatched": client.get("/no/such/route"),
        "404 problem": client.get("/v1/memories/00000000-0000-0000-0000-000000000000", headers=auth()),
        "405": client.delete("/v1/recall", headers=auth()),
        "413 before routing": client.post("/v1/memories", headers=auth(), content=b"x" * (1024 * 1024 + 1)),
        "400": client.post("/v1/memories", headers={**auth(), "Content-Type": "application/json"}, content=b"{"),
        "422": client.post("/v1/recall", headers=auth(), json={"query": "x", "limit": -1}),
        "415": client.post("/v1/recall", headers={**auth(), "Content-Type": "text/plain"}, content=b"x"),
        "201": client.post("/v1/memories", headers=auth(), json=remember_body("I prefer tea")),
        "mcp 401": client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        "openapi": client.get("/openapi.json"),
        "metrics": client.get("/metrics"),
    }

    seen: list[str | None] = []

    def broken(*_: Any, **__: Any) -> Any:
        seen.append(request_id.get())  # in the route's worker thread
        raise RuntimeError("not for the log")

    monkeypatch.setattr(engram.memories, "list_memories", broken)
    answers["500"] = client.get("/v1/memories", headers={**auth(), "X-Request-Id": "the-500"})
    monkeypatch.undo()
    engram.operations.availability.lost(None)
    answers["503"] = client.get("/v1/memories", headers=auth())
    expected = {"404 unmatched": 404, "404 problem": 404, "405": 405, "413 before routing": 413, "400": 400,
                "422": 422, "415": 415, "201": 201, "mcp 401": 401, "openapi": 200, "metrics": 200, "500": 500, "503": 503}
    assert {name: r.status_code for name, r in answers.items()} == expected
    for name, r in answers.items():
        assert NEW.fullmatch(r.headers.get("x-request-id", "")) or name == "500", (name, r.headers)
    assert answers["500"].headers["x-request-id"] == "the-500" and seen == ["the-500"]
    assert answers["500"].json()["code"] == "internal_error"


def test_the_request_line_is_logged_with_the_id_route_status_and_duration(client: Any,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="engram.http"):
        r = client.get("/v1/memories/11111111-2222-3333-4444-555555555555", headers={**auth(), "X-Request-Id": "r-7"})
    assert r.status_code == 404
    [line] = [rec for rec in caplog.records if rec.name == "engram.http"]
    assert (line.levelno, line.method, line.route, line.status) == (  # type: ignore[attr-defined]
        logging.INFO, "GET", "/v1/memories/{memory_id}", 404)
    assert line.duration_ms >= 0 and "11111111" not in line.getMessage()  # type: ignore[attr-defined]


def test_every_line_written_while_serving_a_request_carries_its_id(client: Any, engram: Any, log_stream: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from engram.adapters import logs

    logs.configure("json", "info", stream=log_stream)

    def broken(*_: Any, **__: Any) -> Any:
        logging.getLogger("engram.memories").warning("about to fail")  # in the route's worker thread
        raise RuntimeError("not for the log")

    monkeypatch.setattr(engram.memories, "list_memories", broken)
    r = client.get("/v1/memories", headers={**auth(), "X-Request-Id": "req-500"})
    logging.getLogger("engram.elsewhere").warning("after the request")
    assert r.status_code == 500
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    by_message = {line["message"]: line for line in lines}
    assert by_message["about to fail"]["request_id"] == "req-500"
    assert by_message["unhandled error: RuntimeError"]["request_id"] == "req-500"
    [request] = [line for line in lines if line["logger"] == "engram.http"]
    assert (request["request_id"], request["route"], request["status"]) == ("req-500", "/v1/memories", 500)
    assert "request_id" not in by_message["after the request"]
    assert "not for the log" not in log_stream.getvalue()
