"""Request rates per person and per company (ENGRAM_RATE_PERSON, ENGRAM_RATE_COMPANY; ADR 0058).

Each is r requests a second with bursts of twice that: at most 2r in any two seconds, counted by
`limits`' sliding window (constant memory a key) in this process. The person's window is asked first,
and a request it refuses costs the company's nothing: one person's burst uses at most their own rate
of the company's, so it cannot make a colleague's request fail while the company's rate is above the
person's. Past either: 429 `rate_limited` with `Retry-After`. With several serving processes or
replicas each counts its own requests.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from engram.domain.errors import RateLimited
from engram.domain.scope import Caller


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
