"""API.md "Consistency" at the edge: a write answers once its effect is visible, or, when the
projectors are stalled, after the visibility timeout with 202, the stored object and `"visible": false`.

The wait happens here, on the event loop, after the route's thread is back in the pool: a stalled
projector costs each waiting write a coroutine, not a thread that reads need.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, cast

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.adapters.tombstones import TombstonesUnavailable
from engram.service.pending_writes import collecting
from engram.service.ports import Settler

from . import problems

if TYPE_CHECKING:
    from engram.adapters.partition_settle import PartitionSettle

READS = frozenset({"GET", "HEAD", "OPTIONS"})


class AwaitVisibility:
    """ASGI middleware around every `/v1/` write: collects what the request stored (Ledger.save
    fills the collector) and holds its successful answer until the projectors have applied it."""

    def __init__(self, app: ASGIApp, settler: Settler) -> None:
        self.app, self.settler = app, settler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READS or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        arrived = time.monotonic()  # the timeout counts the write itself too
        held: list[Message] = []
        with collecting() as pending:

            async def answer(message: Message) -> None:
                if message["type"] == "http.response.start":
                    if pending and 200 <= message["status"] < 300:
                        held.append(message)  # the route is done: everything it stored is collected
                        return
                elif held and message["type"] == "http.response.body":
                    held.append(message)
                    if message.get("more_body", False):
                        return
                    settle = cast("PartitionSettle", self.settler)  # only a deferring settler is awaited here
                    left = settle.timeout - (time.monotonic() - arrived)
                    visible = await settle.visible(pending.recordings, max(left, 0.05))  # one look, at least
                    for m in held if visible else _not_visible_yet(held):
                        await send(m)
                    return
                await send(message)

            await self.app(scope, receive, answer)


def _not_visible_yet(held: list[Message]) -> list[Message]:
    """The same answer as 202 with `"visible": false` (stored, not yet seen by every reader)."""
    start, body = held[0], b"".join(m.get("body", b"") for m in held[1:])
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict):
        body = json.dumps({**document, "visible": False}, ensure_ascii=False, separators=(",", ":")).encode()
    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    return [{**start, "status": 202, "headers": headers}, {"type": "http.response.body", "body": body}]


def install(app: FastAPI, settler: Settler) -> None:
    """Wait for visibility on writes; refuse (503 + Retry-After) what cannot get its tombstone."""
    if settler.defers:
        app.add_middleware(AwaitVisibility, settler=settler)

    @app.exception_handler(TombstonesUnavailable)
    async def tombstones_unavailable(_: Request, exc: TombstonesUnavailable) -> JSONResponse:
        response = problems.problem(exc.status, exc.code, exc.title, exc.detail)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
