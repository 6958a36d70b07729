"""`Client` and `AsyncClient`: the calls of `calls.py` as methods, sent over one httpx connection pool.

Each method is written once (in `calls.py`) and becomes a method of both clients through `endpoint`:
`Client.recall(...)` answers a `RecallOut`, `AsyncClient.recall(...)` a coroutine of one, both with
the same keyword arguments.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, Literal, ParamSpec, TypeVar, overload

import httpx

from engram.contract.responses import MemoryOut

from . import calls
from .calls import Call
from .retry import RetryPolicy, Tries

P = ParamSpec("P")
T = TypeVar("T")
Http = TypeVar("Http", httpx.Client, httpx.AsyncClient)

# Generous for an export; a stalled write answers within 5 s (202, visible: false), an outage with a 503.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
REQUEST_ID = "X-Request-Id"


class endpoint(Generic[P, T]):
    """A call of `calls.py` as a method: on a `Client` it answers `T`, on an `AsyncClient` an awaitable `T`."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__  # help(Client.recall) tells what the call does
        signature = inspect.signature(build)  # and what it answers: the model, not the request description
        self.signature = signature.replace(
            return_annotation=str(signature.return_annotation).removeprefix("Call[").removesuffix("]"))

    @overload
    def __get__(self, client: None, owner: type[Any]) -> endpoint[P, T]: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: Client | AsyncClient | None, owner: type[Any]) -> Any:
        if client is None:
            return self
        build = self.build
        if isinstance(client, AsyncClient):
            send_async = client._send

            @functools.wraps(build)
            async def coroutine(*args: Any, **kwargs: Any) -> Any:
                return await send_async(build(*args, **kwargs))

            coroutine.__signature__ = self.signature  # type: ignore[attr-defined]
            return coroutine
        send = client._send

        @functools.wraps(build)
        def method(*args: Any, **kwargs: Any) -> Any:
            return send(build(*args, **kwargs))

        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


class _Calls:
    """The API's calls, as methods of both clients (keyword arguments: the request body's fields)."""

    remember = endpoint(calls.remember)
    receive = endpoint(calls.receive)
    receipt = endpoint(calls.receipt)
    recall = endpoint(calls.recall)
    memories = endpoint(calls.memories)
    memory = endpoint(calls.memory)
    history = endpoint(calls.history)
    links = endpoint(calls.links)
    correct = endpoint(calls.correct)
    forget = endpoint(calls.forget)
    forget_many = endpoint(calls.forget_many)
    forget_status = endpoint(calls.forget_status)
    forgets = endpoint(calls.forgets)
    forget_me = endpoint(calls.forget_me)
    revoke_source = endpoint(calls.revoke_source)
    candidates = endpoint(calls.candidates)
    confirm = endpoint(calls.confirm)
    reject = endpoint(calls.reject)
    insights = endpoint(calls.insights)
    confirm_insight = endpoint(calls.confirm_insight)
    reject_insight = endpoint(calls.reject_insight)
    settings = endpoint(calls.settings)
    export = endpoint(calls.export)
    admin_status = endpoint(calls.admin_status)


class _Transport(Generic[Http]):
    """What both clients hold: the pool, the bearer token, the retry policy."""

    def __init__(self, base_url: str, token: str | None = None, *, api_key: str | None = None,
                 person: str | None = None, timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
                 max_retries: int = 3, backoff: float = 0.5, max_backoff: float = 10.0,
                 headers: Mapping[str, str] | None = None) -> None:
        """`base_url` is where `engram serve` answers (`http://127.0.0.1:8080`); then either `token`, a
        bearer token (`engram token ...`), or a bot's `api_key` (`POST /v1/admin/bots/{bot}/keys`) with
        the `person` it acts for. Idempotent calls are sent again up to `max_retries` times on a 503 or a
        lost connection, after `backoff` seconds doubling each time, at most `max_backoff` (also the
        cap on a `Retry-After`)."""
        if (token is None) == (api_key is None):
            raise TypeError("give either token= or api_key= (with person=)")
        if api_key is not None and not (isinstance(person, str) and person.strip()):
            raise TypeError("an api_key acts for a person: give person= (their id)")
        if token is not None and person is not None:
            raise TypeError("person= goes with api_key=; a token names its person itself")
        identity = {"Authorization": f"Bearer {token if token is not None else api_key}"}
        if person is not None:
            identity["X-Engram-Person"] = person
        self.retry = RetryPolicy(max_retries, backoff, max_backoff)
        self._http: Http = self._open(base_url=base_url.rstrip("/"), timeout=timeout,
                                      headers={**(headers or {}), **identity, "Accept": "application/json"})

    def _open(self, **options: Any) -> Http:
        raise NotImplementedError

    @property
    def is_closed(self) -> bool:
        return self._http.is_closed

    def _request(self, call: Call[Any], request_id: str) -> Any:
        return self._http.request(call.method, call.path, json=call.json, params=call.params or None,
                                  headers={REQUEST_ID: request_id})


class Client(_Calls, _Transport[httpx.Client]):
    """The Engram API over HTTP, synchronous. Use it as `with Client(url, token) as engram: ...` so
    the connection pool is closed at the end (or call `close()`)."""

    def _open(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def _send(self, call: Call[T]) -> T:
        tries = Tries(call, self.retry)
        while (wait := tries.after(self._try(call, tries.request_id))) is not None:
            time.sleep(wait)
        return tries.result()

    def _try(self, call: Call[Any], request_id: str) -> httpx.Response | httpx.TransportError:
        try:
            return self._request(call, request_id)
        except httpx.TransportError as error:
            return error

    def iter_memories(self, *, q: str | None = None, page_size: int = 50,
                      status: Literal["confirmed", "forgotten", "all"] | None = None,
                      tags: Sequence[str] | None = None) -> Iterator[MemoryOut]:
        """Every memory `memories(q=...)` lists, page after page (following `next_cursor`)."""
        cursor = None
        while True:
            page = self.memories(q=q, limit=page_size, cursor=cursor, status=status, tags=tags)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class AsyncClient(_Calls, _Transport[httpx.AsyncClient]):
    """The Engram API over HTTP for asyncio: every method is a coroutine. Use it as
    `async with AsyncClient(url, token) as engram: ...` (or call `aclose()`)."""

    def _open(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def _send(self, call: Call[T]) -> T:
        tries = Tries(call, self.retry)
        while (wait := tries.after(await self._try(call, tries.request_id))) is not None:
            await asyncio.sleep(wait)
        return tries.result()

    async def _try(self, call: Call[Any], request_id: str) -> httpx.Response | httpx.TransportError:
        try:
            return await self._request(call, request_id)
        except httpx.TransportError as error:
            return error

    async def iter_memories(self, *, q: str | None = None, page_size: int = 50,
                            status: Literal["confirmed", "forgotten", "all"] | None = None,
                            tags: Sequence[str] | None = None) -> AsyncIterator[MemoryOut]:
        """Every memory `memories(q=...)` lists, page after page (following `next_cursor`)."""
        cursor = None
        while True:
            page = await self.memories(q=q, limit=page_size, cursor=cursor, status=status, tags=tags)
            for memory in page.items:
                yield memory
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()
