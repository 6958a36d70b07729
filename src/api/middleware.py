"""What every request passes before a route: the body limit (pure ASGI) and the route class that
refuses non-JSON bodies and answers with exactly the keys the service returned."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import problems

MAX_BODY_BYTES = 1024 * 1024


class BodyLimit:
    """Pure ASGI: no request body larger than `limit` bytes gets past here, however it is sent.

    A declared Content-Length over the limit is answered at once, without reading any of the body.
    Otherwise (a chunked body, or one within its declared length) the bytes actually received are
    counted while the body is taken in, before authentication and parsing; as soon as the count
    passes the limit the answer is 413 and the connection is closed without reading the rest.
    The body is at most `limit` bytes here, which the application would hold in full anyway.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = transfer = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                length = value.strip()
            elif name == b"transfer-encoding":
                transfer = value
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(scope, send)
            return
        if transfer is None and (length is None or length == b"0"):
            await self.app(scope, receive, send)  # no body
            return
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, send)
                return
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(parts)
        del parts
        replayed = False

        async def replay() -> Message:
            nonlocal replayed, body
            if not replayed:
                replayed = True
                message, body = {"type": "http.request", "body": body, "more_body": False}, b""
                return message
            return await receive()  # after the body: only http.disconnect

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        response = problems.problem(413, "body_too_large", "Body too large",
                                    f"request bodies are limited to {self.limit} bytes")
        response.headers["Connection"] = "close"  # the server stops reading and closes
        await response(scope, no_body, send)


class NoSniff:
    """Pure ASGI: every answer says `X-Content-Type-Options: nosniff`, so no browser reads an export, a
    JSON answer or a problem as HTML or script, whatever text a person's memory holds."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


async def no_body() -> Message:
    return {"type": "http.disconnect"}


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class JsonRoute(APIRoute):
    """Every route of the API.

    In: a route that reads a JSON body answers 415 to a non-empty body declared as anything else,
    before authentication (the body is within the limit already). A body sent without any
    Content-Type is read as JSON: see tests/integration/test_http_edge.py for why.

    Out: the answer is validated by the route's response model and carries exactly the keys the
    service returned (`response_model_exclude_unset`): a key the service leaves out stays out and a
    null it returns stays null, whatever defaults the model declares.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            content_type = request.headers.get("content-type")
            if content_type and not _is_json(content_type) and await request.body():
                return problems.problem(415, "unsupported_media_type", "Unsupported media type",
                                        "send the request body as application/json")
            return await handler(request)

        return checked


def written(answer: BaseModel, status_code: int = 200) -> Response:
    """A typed answer the service built, written as it is (the fields it set) with a status the route
    chooses: remember's 200, 201 or 202 and a receipt's one state or batch. FastAPI passes a model of
    the route's own class through unvalidated, but validates an instance again against a union (a
    remember's or a receipt's), which cost as much as building it."""
    return Response(answer.model_dump_json(by_alias=True, exclude_unset=True), status_code=status_code,
                    media_type="application/json")
