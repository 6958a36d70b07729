"""Request rates per person and per company (ENGRAM_RATE_PERSON, ENGRAM_RATE_COMPANY; ADR 0058).

Each is r requests a second with bursts of twice that: at most 2r in any two seconds, counted by
`limits`' sliding window (constant memory a key) in this process. The person's window is asked first,
and a request it refuses costs the company's nothing: one person's burst uses at most their own rate
of the company's, so it cannot make a colleague's request fail while the company's rate is above the
person's. Past either: 429 `rate_limited` with `Retry-After`. With several serving processes or
replicas each counts its own requests.

`Admission` asks them ahead of routing, and gives each person a bounded number of turns (ADR 0061).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.domain.bot_keys import parse_key
from engram.domain.errors import DomainError, RateLimited
from engram.domain.scope import Caller

from .middleware import no_body
from .problems import problem


def _window(per_second: int) -> RateLimitItem | None:
    return RateLimitItemPerSecond(2 * per_second, 2) if per_second > 0 else None


class RequestRates:
    def __init__(self, per_person: int, per_company: int) -> None:
        self.person, self.company = _window(per_person), _window(per_company)
        self.limiter = SlidingWindowCounterRateLimiter(MemoryStorage())

    def admit(self, caller: Caller) -> None:
        """Count this request against the person's rate, then the company's; 429 past either."""
        if self.person is not None and not self.limiter.hit(self.person, "person", caller.company, caller.person):
            raise RateLimited("this person sent more requests than ENGRAM_RATE_PERSON allows; retry after "
                              "the time in Retry-After", self._retry_after(self.person, "person", caller))
        if self.company is not None and not self.limiter.hit(self.company, "company", caller.company):
            raise RateLimited("this company sent more requests than ENGRAM_RATE_COMPANY allows; retry after "
                              "the time in Retry-After", self._retry_after(self.company, "company", caller))

    def _retry_after(self, item: RateLimitItem, kind: str, caller: Caller) -> int:
        ids = (kind, caller.company, caller.person) if kind == "person" else (kind, caller.company)
        reset = self.limiter.get_window_stats(item, *ids).reset_time
        return max(1, math.ceil(reset - time.time()))


# -- ahead of routing (ADR 0061) -------------------------------------------------------------------

WAITING = 256  # a person's requests waiting for a turn (each a coroutine); past it: answered at once
HELD = 32  # a person's refusals held before their 429; past it: answered at once
TURN_WAIT = 10.0  # seconds a request waits for its person's turn before it is refused
UNBOUNDED = ("/mcp",)  # streams that stay open as long as a session does: rates only, no turn


class Turns:
    """At most `size` requests of one person being worked on at once; the rest wait, first come first
    served, without using the processor. One person's burst then takes `size` of the process's turns,
    never all. A turn ends when the answer starts: a write waiting for its visibility (ADR 0039) or an
    answer being streamed holds none."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._people: dict[tuple[str, str], tuple[asyncio.Semaphore, list[int]]] = {}

    async def take(self, key: tuple[str, str]) -> bool:
        """Wait for one of the person's turns; False when their queue is full or the wait ran out."""
        semaphore, counts = self._people.setdefault(key, (asyncio.Semaphore(self.size), [0]))
        counts[0] += 1
        if counts[0] > self.size + WAITING:
            self._leave(key, counts)
            return False
        try:
            await asyncio.wait_for(semaphore.acquire(), TURN_WAIT)
        except TimeoutError:
            self._leave(key, counts)
            return False
        except BaseException:  # cancelled (the client went away): its place is given up
            self._leave(key, counts)
            raise
        return True

    def give(self, key: tuple[str, str]) -> None:
        semaphore, counts = self._people[key]
        semaphore.release()
        self._leave(key, counts)

    def _leave(self, key: tuple[str, str], counts: list[int]) -> None:
        counts[0] -= 1
        if counts[0] == 0:
            self._people.pop(key, None)


class Admission:
    """Pure ASGI, before routing: a request with a valid bearer token (not a bot key) is counted against
    its person's and company's rates and waits for its person's turn here. A refusal is held
    `refusal_delay` seconds first. The verified caller goes on in the scope, for `caller_of`. Requests
    it cannot place (no token, a bot key, a page's cookie, a bad token) pass to the routes, which count
    them or answer 401."""

    def __init__(self, app: ASGIApp, rates: RequestRates, verify: Callable[[str], Caller], turns: Turns | None,
                 refusal_delay: float) -> None:
        self.app, self.rates, self.verify, self.turns, self.refusal_delay = app, rates, verify, turns, refusal_delay
        self._held: dict[tuple[str, str], int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = self._caller(scope) if scope["type"] == "http" else None
        if caller is None:
            await self.app(scope, receive, send)
            return
        try:
            self.rates.admit(caller)
        except RateLimited as refused:
            await self._refuse(caller, refused, scope, send)
            return
        scope.setdefault("state", {})[ADMITTED] = caller
        if self.turns is None or scope["path"].startswith(UNBOUNDED):
            await self.app(scope, receive, send)
            return
        key = (caller.company, caller.person)
        if not await self.turns.take(key):
            await _answer(RateLimited(f"this person has more than ENGRAM_PERSON_IN_FLIGHT={self.turns.size} requests "
                                      "being answered and others waiting; send fewer at once", 1), scope, send)
            return
        turns, done = self.turns, False

        def give_back() -> None:
            nonlocal done
            if not done:
                done = True
                turns.give(key)

        async def answering(message: Message) -> None:
            if message["type"] == "http.response.start":
                give_back()  # worked out: the rest is sending (or waiting to be visible), no turn needed
            await send(message)

        try:
            await self.app(scope, receive, answering)
        finally:
            give_back()

    def _caller(self, scope: Scope) -> Caller | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                token = token.strip()
                if scheme.lower() != "bearer" or not token or parse_key(token) is not None:
                    return None
                try:
                    return self.verify(token)
                except DomainError:
                    return None  # the route answers 401 with its reason
        return None

    async def _refuse(self, caller: Caller, refused: RateLimited, scope: Scope, send: Send) -> None:
        key = (caller.company, caller.person)
        held = self._held.get(key, 0)
        if self.refusal_delay and held < HELD:
            self._held[key] = held + 1
            try:
                await asyncio.sleep(self.refusal_delay)
            finally:
                self._held[key] -= 1
                if not self._held[key]:
                    del self._held[key]
            refused = RateLimited(refused.detail, max(1, refused.retry_after - math.floor(self.refusal_delay)))
        await _answer(refused, scope, send)


ADMITTED = "engram.admitted"  # the scope's state: the caller Admission verified and counted


async def _answer(refused: RateLimited, scope: Scope, send: Send) -> None:
    response = problem(429, refused.code, "Too many requests", refused.detail)
    response.headers["Retry-After"] = str(refused.retry_after)
    await response(scope, no_body, send)
