"""Hindsight, the semantic index. Hindsight ranks; Engram decides.

Banks are decided here and nowhere else: one per (company, person) for general memories and one per
(company, team, source, person) for restricted ones, named by a hash so no client input ever names
one. Each memory is one document (`document_id` = memory id) holding its current confirmed text.
Retains are synchronous, so no task payload with text lingers in Hindsight.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import httpx2 as httpx  # httpcore 1.0.9 leaks a connection cancelled between connect and send (ADR 0036)
import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg import sql

from engram.domain.hints import SemanticHints, SemanticIndexUnavailable
from engram.domain.scope import GENERAL, Scope
from engram.hindsight_guard import tokens

from .hard_deadline import DeadlinePassed, io_loop, run_within

TOKEN_TTL = 120.0
# Recall's bound on Hindsight's answer and on the hints read from it, chosen by measurement (ADR 0026).
MAX_TOKENS = 1024
MOST_HINTS = 50
ANSWER_LIMIT = 4 << 20  # bytes of one recall answer; more is a misbehaving server, not an answer


class HindsightUnavailable(Exception):
    """Down, slow or answering errors; the caller falls back or retries. `outage`: no answer came at
    all (no connection, a timeout, a broken connection), as when Hindsight is stopped or hung, rather
    than an answer about this one request."""

    def __init__(self, reason: str = "", *, outage: bool = False) -> None:
        super().__init__(reason)
        self.outage = outage


class HindsightRefused(HindsightUnavailable):
    """The request certainly did nothing: Hindsight refused it (4xx), or it never reached Hindsight
    (no connection). After a timeout or a 5xx, by contrast, a retain may still land."""


def bank_for(scope: Scope) -> str:
    if scope.visibility == GENERAL:
        key = f"g\x00{scope.company}\x00{scope.person}"
        prefix = "g"
    else:
        key = f"r\x00{scope.company}\x00{scope.team}\x00{scope.source_id}\x00{scope.person}"
        prefix = "r"
    return f"engram-{prefix}-" + hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Hint:
    """One recall result, stripped of Hindsight's text. A fact names its document; an observation
    names the documents of its source facts (None where Hindsight did not say which)."""

    kind: str
    score: float
    document_id: str | None = None
    source_document_ids: tuple[str | None, ...] = ()
    source_fact_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unit:
    """One memory unit of a bank: a fact names its document; an observation names its source facts."""

    id: str
    kind: str  # world, experience or observation
    document_id: str | None
    source_fact_ids: tuple[str, ...]
    text: str = field(repr=False)

    @classmethod
    def of(cls, item: dict[str, Any]) -> Unit:
        """From one row of Hindsight's memory-unit listing."""
        return cls(str(item["id"]), str(item.get("fact_type") or ""), item.get("document_id"),
                   tuple(str(s) for s in item.get("source_memory_ids") or []), str(item.get("text") or ""))


class HindsightClient:
    """Every request carries a service token naming the one bank it touches (see `hindsight_guard`)."""

    def __init__(self, base_url: str, *, signing_key: Ed25519PrivateKey | None = None, timeout: float = 30.0) -> None:
        self.root = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.root + "/v1/default/banks", timeout=timeout)
        self.timeout = timeout
        self.signing_key = signing_key
        self._banks: set[str] = set()
        self._tokens: dict[str, tuple[str, float]] = {}
        self._async: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = None

    def _auth(self, bank: str) -> dict[str, str]:
        if self.signing_key is None:
            return {}
        now = time.time()
        cached = self._tokens.get(bank)
        if cached is None or cached[1] <= now:
            token = tokens.sign(self.signing_key, [bank], ttl=TOKEN_TTL, now=now)
            if len(self._tokens) > 10_000:
                self._tokens.clear()
            cached = self._tokens[bank] = (token, now + TOKEN_TTL / 2)
        return {"Authorization": f"Bearer {cached[0]}"}

    def _call(self, method: str, bank: str, path: str = "", **kwargs: Any) -> httpx.Response:
        try:
            r = self.http.request(method, f"/{bank}{path}", headers=self._auth(bank), **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            raise HindsightRefused(type(e).__name__, outage=True) from None  # nothing was sent
        except httpx.HTTPError as e:
            raise HindsightUnavailable(type(e).__name__, outage=isinstance(e, httpx.TransportError)) from None
        if r.status_code >= 500:
            raise HindsightUnavailable(f"hindsight answered {r.status_code}")
        return r

    def healthy(self, timeout: float = 2.0) -> bool:
        """Hindsight answers its `GET /health` (no bank, no token) within `timeout` seconds."""
        try:
            return self.http.get(self.root + "/health", timeout=timeout).status_code == 200
        except httpx.HTTPError:
            return False

    def ensure_bank(self, bank: str) -> None:
        if bank in self._banks:
            return
        r = self._call("PUT", bank, json={})
        if r.status_code >= 400:
            raise HindsightRefused(f"bank could not be created ({r.status_code})")
        self._banks.add(bank)

    def retain(self, bank: str, document_id: str, content: str, timestamp: datetime | None) -> None:
        self.ensure_bank(bank)
        item: dict[str, Any] = {"content": content, "document_id": document_id, "update_mode": "replace"}
        if timestamp is not None:
            item["timestamp"] = timestamp.isoformat()
        r = self._call("POST", bank, "/memories", json={"items": [item], "async": False})
        if r.status_code >= 400:
            raise HindsightRefused(f"retain refused ({r.status_code})")

    def delete(self, bank: str, document_id: str) -> None:
        r = self._call("DELETE", bank, f"/documents/{document_id}")
        if r.status_code >= 400 and r.status_code != 404:
            raise HindsightUnavailable(f"delete refused ({r.status_code})")

    def exists(self, bank: str, document_id: str) -> bool:
        return self.document(bank, document_id) is not None

    def document(self, bank: str, document_id: str, *, deadline: float | None = None) -> dict[str, Any] | None:
        """The document's record (ids, hash of its text, times, counts; no text is stored), or None."""
        r = self._call("GET", bank, f"/documents/{document_id}", **({} if deadline is None else {"timeout": deadline}))
        if r.status_code == 404:
            return None
        if r.status_code >= 400:
            raise HindsightUnavailable(f"document lookup refused ({r.status_code})")
        body = _json(r)
        return body if isinstance(body, dict) else {}

    def document_facts(self, bank: str, document_id: str) -> list[tuple[str, str]]:
        """(fact id, fact text) of a document's facts. The text is Hindsight's, used only in-process
        to look for leftovers after a delete; it is never stored or logged."""
        r = self._call("GET", bank, "/memories/list", params={"document_id": document_id, "limit": 1000})
        if r.status_code == 404:
            return []
        if r.status_code >= 400:
            raise HindsightUnavailable(f"fact listing refused ({r.status_code})")
        return [(str(i["id"]), str(i.get("text") or "")) for i in r.json().get("items") or []]

    def units(self, bank: str, *, deadline: float, most: int = 5000, page: int = 500) -> list[Unit]:
        """The bank's live facts and observations, newest first, at most `most`, all within `deadline`
        seconds. The text is Hindsight's, used only in-process; it is never stored or logged."""
        started = time.monotonic()
        out: list[Unit] = []
        while len(out) < most:
            left = deadline - (time.monotonic() - started)
            if left <= 0:
                raise HindsightUnavailable("deadline passed", outage=True)
            limit = min(page, most - len(out))
            r = self._call("GET", bank, "/memories/list", params={"limit": limit, "offset": len(out)}, timeout=left)
            if r.status_code == 404:
                return []  # no bank yet: nothing synced for this scope
            if r.status_code >= 400:
                raise HindsightUnavailable(f"memory listing refused ({r.status_code})")
            body = _json(r)
            items = (body.get("items") if isinstance(body, dict) else None) or []
            out.extend(Unit.of(i) for i in items if isinstance(i, dict) and i.get("id"))
            if len(items) < limit:
                break
        return out

    def recall(self, bank: str, query: str, *, deadline: float, budget: str = "low", max_tokens: int | None = None,
               most: int | None = None) -> list[Hint]:
        """Hints for `query` from one bank, best first; see `recall_banks`."""
        return self.recall_banks([bank], query, deadline=deadline, budget=budget, max_tokens=max_tokens,
                                 most=most)[0]

    def recall_banks(self, banks: list[str], query: str, *, deadline: float, budget: str = "low",
                     max_tokens: int | None = None, most: int | None = None) -> list[list[Hint]]:
        """Hints from each bank (asked at once), best first, at most `most` each. The whole call
        (connect, request, answer and its whole body) ends within `deadline` seconds, or raises
        `HindsightUnavailable`; so does any bank failing. `max_tokens` bounds Hindsight's answer
        (its default, 4096 tokens of fact text, when None)."""
        try:
            answers = run_within(self.asking(banks, query, budget=budget, max_tokens=max_tokens), deadline)
        except DeadlinePassed:
            raise HindsightUnavailable("deadline passed", outage=True) from None
        except BaseExceptionGroup as group:  # the first bank that failed says why; the others were cancelled
            failure = next((e for e in _leaves(group) if isinstance(e, HindsightUnavailable)), None)
            raise failure or HindsightUnavailable("recall failed") from None
        return [_hints(status, content, most) for status, content in answers]

    def asking(self, banks: list[str], query: str, *, budget: str = "low",
               max_tokens: int | None = None) -> Callable[[], Awaitable[list[tuple[int, bytes]]]]:
        """The work of `recall_banks` for the I/O loop: each bank's status and answer, asked at once.
        Signed here, on the calling thread; cancelled on the loop at any point, it leaves no
        connection behind (ADR 0036)."""
        body: dict[str, Any] = {"query": query, "budget": budget,
                                "include": {"entities": None, "source_facts": {"max_tokens": -1}}}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        requests = [(f"/{bank}/memories/recall", self._auth(bank)) for bank in banks]

        async def ask_all() -> list[tuple[int, bytes]]:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._post(path, headers, body)) for path, headers in requests]
            return [t.result() for t in tasks]

        return ask_all

    async def _post(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, bytes]:
        """Status and body of one POST on the I/O loop, the body read whole but never past ANSWER_LIMIT."""
        try:
            async with self._async_http().stream("POST", path, headers=headers, json=body) as r:
                content = bytearray()
                async for chunk in r.aiter_bytes():
                    content += chunk
                    if len(content) > ANSWER_LIMIT:
                        raise HindsightUnavailable("answer too large")
                return r.status_code, bytes(content)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            raise HindsightRefused(type(e).__name__, outage=True) from None
        except httpx.HTTPError as e:
            raise HindsightUnavailable(type(e).__name__, outage=isinstance(e, httpx.TransportError)) from None

    def _async_http(self) -> httpx.AsyncClient:
        """This client's connection pool on the I/O loop (made there, used only there)."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            self._async = (loop, httpx.AsyncClient(base_url=self.http.base_url, timeout=self.timeout,
                                                   limits=httpx.Limits(max_connections=64,
                                                                       max_keepalive_connections=16)))
        return self._async[1]

    def warm(self) -> None:
        """Make the connection pool now, not in the first recall's deadline (its TLS context alone
        takes tens of milliseconds)."""

        async def make() -> None:
            self._async_http()

        asyncio.run_coroutine_threadsafe(make(), io_loop())

    def close(self) -> None:
        self.http.close()
        if self._async is not None:
            loop, http = self._async
            self._async = None
            if not loop.is_closed():
                asyncio.run_coroutine_threadsafe(http.aclose(), loop)


def _leaves(group: BaseExceptionGroup) -> Iterator[BaseException]:
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _hints(status: int, content: bytes, most: int | None) -> list[Hint]:
    """Hindsight's recall answer as hints, best first, at most `most`; its text is dropped here."""
    if status == 404:
        return []  # no bank yet: nothing synced for this scope
    if status >= 500:
        raise HindsightUnavailable(f"hindsight answered {status}")
    if status >= 400:
        raise HindsightUnavailable(f"recall refused ({status})")
    try:
        answer = json.loads(content)
    except ValueError:
        raise HindsightUnavailable(f"hindsight answered {status} without JSON") from None
    try:
        sources = answer.get("source_facts") or {}
        hints = []
        for res in answer.get("results") or []:
            score = float((res.get("scores") or {}).get("final") or 0.0)
            kind = str(res.get("type") or "")
            if kind == "observation":
                facts = tuple(str(f) for f in res.get("source_fact_ids") or [])
                docs = tuple((sources.get(f) or {}).get("document_id") for f in facts)
                hints.append(Hint(kind, score, source_document_ids=docs or (None,), source_fact_ids=facts))
            else:
                hints.append(Hint(kind, score, document_id=res.get("document_id")))
    except (AttributeError, TypeError, ValueError):  # not Hindsight's shape: no hint from it is trusted
        raise HindsightUnavailable("hindsight answered an unexpected shape") from None
    hints.sort(key=lambda h: -h.score)  # stable: Hindsight's own order among equal scores
    return hints if most is None else hints[:most]


# Hindsight 1.1.0's tables that hold a document's text or words derived from it (facts, chunks,
# entities, observations and their history, operation payloads, LLM traces).
TEXT_TABLES = ("memory_units", "documents", "chunks", "entities", "unit_entities", "memory_links",
               "entity_cooccurrences", "observation_sources", "observation_history", "invalidated_memory_units",
               "async_operations", "llm_requests", "audit_log")


class HindsightDatabase:
    """Hindsight's own PostgreSQL, when the operator gives Engram access to it
    (`ENGRAM_HINDSIGHT_DATABASE_URL`; the role needs MAINTAIN on these tables, e.g. `pg_maintain`).
    A deleted row stays readable in the table's dead tuples until VACUUM, and in the planner's
    statistics (`pg_stats`) until the next ANALYZE; this runs both."""

    def __init__(self, url: str, *, connect_timeout: float = 5.0) -> None:
        self.url = url
        self.connect_timeout = connect_timeout

    def vacuum(self) -> list[str]:
        """VACUUM (ANALYZE) each text table that exists in Hindsight's schema; returns their names."""
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=int(self.connect_timeout)) as conn:
                rows = conn.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s) "
                    "ORDER BY c.relname", (list(TEXT_TABLES),)).fetchall()
                tables = [str(r[0]) for r in rows]
                for table in tables:
                    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
        except psycopg.Error as e:  # the class only: a database message can quote the data
            raise HindsightUnavailable(f"hindsight database: {type(e).__name__}") from None
        if "memory_units" not in tables:
            raise HindsightUnavailable("hindsight database: its tables were not found (wrong database or schema?)")
        return tables


class SemanticIndex:
    """Recall hints from Hindsight within a deadline that bounds the whole call (every bank asked at
    once). Facts map to memories by document id; observations through their source facts' document
    ids (see `domain.hints` for how they count). Hindsight's answer is bounded by `max_tokens` of
    fact text, and at most `most` hints, the best, are read (ADR 0026)."""

    def __init__(self, client: HindsightClient, deadline_ms: float, *, max_tokens: int | None = MAX_TOKENS,
                 most: int | None = MOST_HINTS) -> None:
        self.client = client
        self.deadline = deadline_ms / 1000
        self.max_tokens = max_tokens
        self.most = most
        client.warm()

    def hints(self, scopes: list[Scope], query: str) -> SemanticHints:
        try:
            answers = self.client.recall_banks([bank_for(scope) for scope in scopes], query, deadline=self.deadline,
                                               max_tokens=self.max_tokens, most=self.most)
        except HindsightUnavailable as e:
            raise SemanticIndexUnavailable(str(e)) from None
        ranked = sorted((h for hints in answers for h in hints), key=lambda h: -h.score)
        out = SemanticHints()
        for h in ranked if self.most is None else ranked[:self.most]:
            if h.kind == "observation":
                out.add_observation(h.score, frozenset(memory_id_of(d) for d in h.source_document_ids))
            elif (memory_id := memory_id_of(h.document_id)) is not None:
                out.add_fact(memory_id, h.score)
        return out

    def close(self) -> None:
        self.client.close()


def _json(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        raise HindsightUnavailable(f"hindsight answered {r.status_code} without JSON") from None


def memory_id_of(document_id: str | None) -> str | None:
    try:
        return str(UUID(document_id)) if document_id else None
    except ValueError:
        return None
