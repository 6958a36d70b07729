"""Daily model budgets per company and per person, by UTC day: reserve before a call, settle once after.

These are operational counters (a rate limiter), not a record of the business; the usage ledger
beside them keeps model, attempts, tokens and accepted-proposal counts, never prompts or outputs.
Their tables come from the numbered migrations (adapters/schema).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID, uuid4

from eventsourcing.postgres import PostgresDatastore

EXHAUSTED = "budget_exhausted"
PAUSED = "budget_paused"
TOO_LARGE = "larger_than_daily_budget"


@dataclass(frozen=True)
class Limits:
    company_tokens: int
    company_calls: int
    person_tokens: int | None = None
    person_calls: int | None = None


class DailyBudgetSettings(Protocol):
    @property
    def daily_tokens(self) -> int: ...
    @property
    def daily_calls(self) -> int: ...
    @property
    def person_daily_tokens(self) -> int | None: ...
    @property
    def person_daily_calls(self) -> int | None: ...


# Unset, a person's daily budget is this share of the company's (rounded up): one member's batch can
# never spend the company's whole day (ADR 0058). Set ENGRAM_PERSON_DAILY_* to the company's for none.
PERSON_SHARE = 4


def _share(company: int, person: int | None) -> int:
    return person if person is not None else -(-company // PERSON_SHARE)


def daily_limits(settings: DailyBudgetSettings) -> Limits:
    """The configured daily budgets (`ENGRAM_DAILY_*`, `ENGRAM_PERSON_DAILY_*`), shared by every model call
    Engram makes."""
    return Limits(settings.daily_tokens, settings.daily_calls, _share(settings.daily_tokens, settings.person_daily_tokens),
                  _share(settings.daily_calls, settings.person_daily_calls))


@dataclass(frozen=True)
class Reservation:
    reservation_id: UUID
    tokens: int


@dataclass(frozen=True)
class Refusal:
    reason: str


class BudgetLedger:
    def __init__(self, datastore: PostgresDatastore) -> None:
        self.datastore = datastore

    def reserve(self, company: str, person: str, day: date, tokens: int, limits: Limits,
                at: datetime) -> Reservation | Refusal:
        """Atomically take room for one call of at most `tokens`, or say why not."""
        if limits.company_tokens == 0 or limits.company_calls == 0 or limits.person_tokens == 0 \
                or limits.person_calls == 0:
            return Refusal(PAUSED)
        if tokens > limits.company_tokens or (limits.person_tokens is not None and tokens > limits.person_tokens):
            return Refusal(TOO_LARGE)
        rows = [("", limits.company_tokens, limits.company_calls), (person, limits.person_tokens, limits.person_calls)]
        with self.datastore.transaction(commit=True) as curs:
            for who, _t, _c in rows:  # company row first, then the person's: one lock order, no deadlock
                curs.execute(
                    "INSERT INTO engram_budget_days (company, person, day) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    (company, who, day),
                )
            for who, token_limit, call_limit in rows:
                curs.execute(
                    "SELECT tokens, calls FROM engram_budget_days WHERE company = %s AND person = %s AND day = %s "
                    "FOR UPDATE",
                    (company, who, day),
                )
                row = curs.fetchone()
                assert row is not None
                if token_limit is not None and row["tokens"] + tokens > token_limit:
                    return Refusal(EXHAUSTED)
                if call_limit is not None and row["calls"] + 1 > call_limit:
                    return Refusal(EXHAUSTED)
            for who, _t, _c in rows:
                curs.execute(
                    "UPDATE engram_budget_days SET tokens = tokens + %s, calls = calls + 1 "
                    "WHERE company = %s AND person = %s AND day = %s",
                    (tokens, company, who, day),
                )
            reservation = Reservation(uuid4(), tokens)
            curs.execute(
                "INSERT INTO engram_budget_reservations (reservation_id, company, person, day, tokens_reserved, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s)",
                (reservation.reservation_id, company, person, day, tokens, at),
            )
        return reservation

    def settle(self, reservation_id: UUID, used_tokens: int | None, at: datetime) -> int | None:
        """Charge what the call really used, exactly once. Unknown usage keeps the reservation.

        Returns the tokens charged, or None when it had been settled already.
        """
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "UPDATE engram_budget_reservations SET settled = true, settled_at = %s, "
                "tokens_charged = coalesce(%s, tokens_reserved) WHERE reservation_id = %s AND NOT settled "
                "RETURNING company, person, day, tokens_reserved, tokens_charged",
                (at, used_tokens, reservation_id),
            )
            row = curs.fetchone()
            if row is None:
                return None
            delta = row["tokens_charged"] - row["tokens_reserved"]
            if delta:
                curs.execute(
                    "UPDATE engram_budget_days SET tokens = tokens + %s WHERE company = %s AND day = %s "
                    "AND person IN ('', %s)",
                    (delta, row["company"], row["day"], row["person"]),
                )
            return int(row["tokens_charged"])

    def record_usage(self, **entry: Any) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                "INSERT INTO engram_usage_ledger (entry_id, company, person, day, extractor, model, attempts, "
                "tokens_reserved, prompt_tokens, completion_tokens, tokens_charged, proposals, accepted, outcome, at) "
                "VALUES (%(entry_id)s, %(company)s, %(person)s, %(day)s, %(extractor)s, %(model)s, %(attempts)s, "
                "%(tokens_reserved)s, %(prompt_tokens)s, %(completion_tokens)s, %(tokens_charged)s, %(proposals)s, "
                "%(accepted)s, %(outcome)s, %(at)s)",
                {"entry_id": uuid4(), **entry},
            )

    def today(self, company: str, day: date) -> dict[str, int]:
        """The company's use that day: tokens charged, calls made, and calls that failed (each charged
        only what the provider reported, nothing when it reported nothing)."""
        used = self.days(company, day, day)[0]
        return {"tokens": used["tokens"], "calls": used["calls"], "failed_calls": used["failed_calls"]}

    def days(self, company: str, first: date, last: date) -> list[dict[str, Any]]:
        """The company's use on each day from `first` to `last`, oldest first, days without use as zeros."""
        with self.datastore.get_connection() as conn:
            used = {r["day"]: r for r in conn.execute(
                "SELECT day, tokens, calls FROM engram_budget_days WHERE company = %s AND person = '' "
                "AND day BETWEEN %s AND %s", (company, first, last)).fetchall()}
            failed = {r["day"]: int(r["n"]) for r in conn.execute(
                "SELECT day, count(*) AS n FROM engram_usage_ledger WHERE company = %s AND day BETWEEN %s AND %s "
                "AND outcome IN ('error', 'malformed') GROUP BY day", (company, first, last)).fetchall()}
        out = []
        for offset in range((last - first).days + 1):
            day = first + timedelta(days=offset)
            row = used.get(day)
            out.append({"day": day.isoformat(), "tokens": int(row["tokens"]) if row else 0,
                        "calls": int(row["calls"]) if row else 0, "failed_calls": failed.get(day, 0)})
        return out

    def spent_today(self, day: date, limits: Limits) -> dict[str, int]:
        """Every company's use that day, for /metrics: calls and tokens charged in all, and how many
        companies have spent their daily calls or tokens (their model work waits for the next UTC day)."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(tokens), 0) AS tokens, "
                "count(*) FILTER (WHERE calls >= %s OR tokens >= %s) AS spent "
                "FROM engram_budget_days WHERE person = '' AND day = %s",
                (limits.company_calls, limits.company_tokens, day)).fetchone()
        if row is None:  # an aggregate always answers one row
            return {"calls": 0, "tokens": 0, "companies_spent": 0}
        return {"calls": int(row["calls"]), "tokens": int(row["tokens"]), "companies_spent": int(row["spent"])}

    def failures(self) -> dict[str, int]:
        """Model calls that failed, every company and day, by purpose (extraction, insights): counts for /metrics."""
        with self.datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT CASE WHEN extractor LIKE 'insight-%' THEN 'insights' ELSE 'extraction' END AS purpose, "
                "count(*) AS n FROM engram_usage_ledger WHERE outcome IN ('error', 'malformed') GROUP BY 1").fetchall()
        return {"extraction": 0, "insights": 0, **{r["purpose"]: int(r["n"]) for r in rows}}
