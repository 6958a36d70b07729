"""When a call is sent again, and after how long: 503, 429 and lost connections, idempotent calls only."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

import httpx

from .calls import Call
from .errors import EngramError

T = TypeVar("T")

# A connection that failed or dropped, or an answer that did not come in time. Not a request the
# client itself got wrong (LocalProtocolError, UnsupportedProtocol): sending it again cannot help.
TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


RETRIED = (503, 429)  # unavailable for now; too many requests for now


def retry_after(response: httpx.Response) -> float | None:
    """The `Retry-After` header in seconds (a number of seconds or an HTTP date), if any."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """Up to `max_retries` more tries, waiting `backoff` seconds, then twice as long each time (with
    jitter), never more than `max_backoff`; a 503's or a 429's `Retry-After` is honoured up to
    `max_backoff` (a 429 `rate_limited` was refused before any work: ADR 0058, 0061)."""

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 10.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("max_retries, backoff and max_backoff must not be negative")

    def wait(self, call: Call[Any], attempt: int, outcome: httpx.Response | Exception) -> float | None:
        """Seconds to wait before sending `call` again after try number `attempt` (0 for the first),
        which ended with `outcome` (an answer or a failure); None to stop here."""
        if not call.idempotent or attempt >= self.max_retries:
            return None
        if isinstance(outcome, httpx.Response):
            if outcome.status_code not in RETRIED:
                return None
            asked = retry_after(outcome)
            if asked is not None:
                return min(asked, self.max_backoff)
        elif not isinstance(outcome, TRANSIENT):
            return None
        ceiling = min(self.backoff * 2 ** attempt, self.max_backoff)
        return random.uniform(ceiling / 2, ceiling)


class Tries(Generic[T]):
    """One call's tries, as either client sends them: after each answer or failure, how long to wait
    before the next (or None), then the result: the answer's model, its problem raised, or the failure."""

    def __init__(self, call: Call[T], policy: RetryPolicy) -> None:
        self.call, self.policy = call, policy
        self.request_id = uuid.uuid4().hex  # one id for every try of a call: the server's log ties them together
        self.attempt = 0
        self.last: httpx.Response | Exception | None = None

    def after(self, outcome: httpx.Response | Exception) -> float | None:
        self.last = outcome
        wait = self.policy.wait(self.call, self.attempt, outcome)
        self.attempt += 1
        return wait

    def result(self) -> T:
        if not isinstance(self.last, httpx.Response):
            raise self.last or RuntimeError("no try was made")
        if self.last.is_success:
            return self.call.read(self.last)
        raise EngramError.of(self.last, self.request_id, retry_after(self.last))
