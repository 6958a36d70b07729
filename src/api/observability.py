"""Around everything the app does (its error handlers, the body limit, /mcp): each HTTP request gets
an id (the caller's `X-Request-Id` when it is sane, else a new one) that its answer carries, that every
log line written while serving it carries, and one log line at `info` when it is answered (id,
method, route template, status, duration); and it is counted in /metrics. The route is the path
template (`/v1/memories/{memory_id}`), never the path: no id and no query reaches a label or a log line.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from fastapi import FastAPI
from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.adapters.logs import request_id
from engram.service.operations import Operations

from .metrics import METHODS, Metrics

HEADER = "X-Request-Id"
UNMATCHED = "unmatched"  # every path no route knows, under one label
CLIENT_CLOSED = 499  # the caller went away before an answer was sent
_SANE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an HTTP token, bounded

log = logging.getLogger("engram.http")


def request_id_of(scope: Scope) -> str:
    """The caller's id when it is one header of printable token characters, at most 128; else a new one."""
    given = [v for k, v in scope.get("headers", ()) if k == b"x-request-id"]
    if len(given) == 1:
        value = given[0].decode("latin-1")
        if _SANE.fullmatch(value):
            return value
    return uuid.uuid4().hex


def route_of(app: FastAPI, entry: Scope, scope: Scope) -> str:
    """The route template the request went to (routing leaves it in the scope), or, for one answered
    before routing (413), the one it would have gone to; a mount's own routes under its path."""
    route = scope.get("route")
    if route is None:
        for candidate in app.router.routes:
            match, _ = candidate.matches(dict(entry))
            if match is not Match.NONE:
                route = candidate
                if match is Match.FULL:
                    break
        if route is None:
            return UNMATCHED
        scope = entry
    mounted = scope.get("root_path", "")[len(entry.get("root_path", "")):]
    if isinstance(route, Mount):  # a mount answered itself (static files, its own 404)
        return (mounted or route.path) + "/{path}"
    path = getattr(route, "path", None)
    return mounted + path if isinstance(path, str) else UNMATCHED


class Observed:
    def __init__(self, app: ASGIApp, owner: FastAPI) -> None:
        self.app, self.owner = app, owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id_of(scope)
        token = request_id.set(rid)
        entry = dict(scope)
        status = CLIENT_CLOSED
        header = (HEADER.lower().encode(), rid.encode())

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != header[0]]
                message = {**message, "headers": [*headers, header]}
            await send(message)

        try:
            await self.app(scope, receive, answer)
        except Exception:
            if status == CLIENT_CLOSED:  # the error handler sends a 500 before raising again
                status = 500
            raise
        finally:
            seconds = time.perf_counter() - started
            self._record(scope["method"], route_of(self.owner, entry, scope), status, seconds)
            request_id.reset(token)

    def _record(self, method: str, route: str, status: int, seconds: float) -> None:
        metrics: Metrics | None = getattr(self.owner.state, "metrics", None)
        method = method if method in METHODS else "other"
        if metrics is not None:
            metrics.observe(method, route, status, seconds)
        ms = round(seconds * 1000, 1)
        log.info("%s %s %d %.1f ms", method, route, status, ms,
                 extra={"method": method, "route": route, "status": status, "duration_ms": ms})


class ObservedApp(FastAPI):
    """The API's app, with `Observed` outside everything else, the error handlers too: a 500 and a
    413 refused before routing carry their request id and are counted like any answer."""

    def build_middleware_stack(self) -> ASGIApp:
        return Observed(super().build_middleware_stack(), self)


def install(app: FastAPI, operations: Operations) -> None:
    """/metrics reads this app's registry: its requests and the deployment's readings."""
    app.state.metrics = Metrics(operations)

