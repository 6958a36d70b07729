"""Forgetting many memories at once, and a person's whole account, with one status each (ADR 0015).

Every memory is forgotten through `MemoryService.forget_loaded`, the single-memory forget, each in its own
short transactions: no request holds a giant transaction or a lock others wait for. A bulk forget is
checked whole before anything is forgotten. An account forget is recorded first (durable, migration
0005), pauses the person's use and learning at once ("stopped using": no bot gets anything, nothing new
is learned), then clears the person's receipts and forgets their memories member by member: the
request does a bounded share and the sweeper the rest; asking again continues the same one. When
nothing is left it resets the person's settings and is finished; its copies aggregate its members'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID, uuid4

from engram.contract.responses import ForgetAccepted, ForgetList, ForgetStatus
from engram.domain.access import Access
from engram.domain.errors import Conflict, DomainError, NotFound
from engram.domain.memory import Memory
from engram.domain.scope import Caller
from engram.domain.settings import PersonSettings, settings_id
from engram.domain.text import validate_id

from .cursors import decode_cursor, encode_cursor
from .memories import MemoryService
from .views import opened, row_scope

log = logging.getLogger("engram.forgetting")

MAX_BULK = 100  # ids in one bulk request, and the most memories one by-source request forgets (about 40 ms each)


class AccountForgetRecords(Protocol):
    """Where account forgets and their members are recorded (projections/purge.py `AccountForgets`)."""

    def open(self, forget_id: str, company: str, person: str, requested_by: str, by_admin: bool,
             at: datetime) -> dict[str, Any]: ...

    def get(self, forget_id: str) -> dict[str, Any] | None: ...

    def claim(self, forget_id: str, now: datetime, until: datetime) -> bool: ...

    def release(self, forget_id: str) -> None: ...

    def due(self, now: datetime, limit: int) -> list[str]: ...

    def remaining_memories(self, forget_id: str, company: str, person: str, limit: int,
                           skip: Any = ()) -> list[Any]: ...

    def remaining_receipts(self, company: str, person: str, limit: int, skip: Any = ()) -> list[Any]: ...

    def learning_in_flight(self, company: str, person: str, now: datetime) -> bool: ...

    def member(self, forget_id: str, memory_id: UUID, member_forget_id: str, earlier: bool) -> None: ...

    def receipts_cleared(self, forget_id: str, count: int) -> None: ...

    def finish(self, forget_id: str, at: datetime) -> None: ...

    def report(self, forget_id: str) -> tuple[dict[str, Any] | None, int, list[dict[str, Any]]]: ...

    def listing(self, company: str, person: str | None, requested_by: str | None,
                after: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]: ...


class SourceMemories(Protocol):
    def of_source(self, *, company: str, person: str, source_blind: str, limit: int) -> list[dict[str, Any]]: ...


class InvalidBulkForget(DomainError):
    code, status, title = "invalid_forget_request", 422, "Give 1 to 100 ids, or one source id"


@dataclass(frozen=True)
class Pace:
    """How much of an account forget one pass does: a request answers promptly, the sweeper does the rest."""

    members: int
    seconds: float


class ForgettingService:
    def __init__(self, memories: MemoryService, accounts: AccountForgetRecords, sources: SourceMemories, *,
                 request: Pace = Pace(100, 2.0), sweep: Pace = Pace(1000, 20.0),
                 lease: timedelta = timedelta(seconds=60)) -> None:
        self.memories = memories
        self.ledger = memories.ledger
        self.purge = memories.purge
        self.clock = memories.clock
        self.accounts = accounts
        self.sources = sources
        self.request_pace = request
        self.sweep_pace = sweep
        self.lease = lease

    # -- many at once ------------------------------------------------------------------------------------

    def forget_many(self, caller: Caller, *, ids: list[str] | None = None,
                    source_id: str | None = None) -> dict[str, Any]:
        """Forget the caller's memories by ids (all or nothing: one the caller may not forget is a 404
        and nothing is forgotten), or every memory of one source (up to MAX_BULK a request)."""
        Access(caller).require_holder()
        access = self.ledger.access(caller)
        access.admit()
        access.require_may_act()
        actor = caller.bot or caller.person

        def may_forget(memory: Memory | None) -> bool:
            """A person forgets any memory of theirs (whatever the directory says now); a bot what it may use."""
            if memory is None or memory.company != caller.company or memory.person != caller.person:
                return False
            return caller.role != "bot" or access.may_use(memory.scope)

        if ids is not None:
            wanted = list(dict.fromkeys(ids))
            if not wanted or len(wanted) > MAX_BULK:
                raise InvalidBulkForget(f"give 1 to {MAX_BULK} ids")
            refused = sum(1 for i in wanted if not may_forget(self._get(i)))
            if refused:
                raise NotFound(f"{refused} of the {len(wanted)} ids are not memories this caller may forget; "
                               "nothing was forgotten")
        else:
            validate_id(source_id or "", "source_id")
            rows = self.sources.of_source(company=caller.company, person=caller.person,
                                          source_blind=self.memories.index.source(caller.company, source_id or ""),
                                          limit=MAX_BULK + 1)
            if caller.role == "bot":
                rows = [r for r in rows if access.may_use(row_scope(opened(self.ledger.keys, r)))]
            wanted = [str(r["memory_id"]) for r in rows[:MAX_BULK]]
        forget_ids = []
        for memory_id in wanted:
            forget_ids.append(self.memories.forget_loaded(self._loader(memory_id, may_forget), actor=actor).forget_id)
        answer: dict[str, Any] = {"forget_ids": forget_ids}
        if ids is None:
            # not yet forgotten ones come first: more of them beyond this request means ask again
            answer["more"] = len(rows) > MAX_BULK and rows[MAX_BULK]["status"] != "forgotten"
        return answer

    def _get(self, memory_id: str) -> Memory | None:
        try:
            return self.ledger.get(UUID(memory_id), Memory)
        except (ValueError, TypeError):
            return None

    def _loader(self, memory_id: str, allowed: Callable[[Memory | None], bool]) -> Callable[[], Memory]:
        def load() -> Memory:
            memory = self._get(memory_id)
            if memory is None or not allowed(memory):
                raise NotFound("no such memory")
            return memory

        return load

    # -- whole accounts -----------------------------------------------------------------------------------

    def forget_me(self, caller: Caller) -> ForgetAccepted:
        """Everything the caller's person holds in this company. The person's own control: a bot is refused."""
        Access(caller).require_holder()
        self.ledger.access(caller).require_person("forget the person's whole account")
        return self._account(caller.company, caller.person, requested_by=caller.person, by_admin=False)

    def forget_person(self, caller: Caller, person: str) -> ForgetAccepted:
        """An admin (or operator) forgets everything a person holds in the admin's company."""
        self.ledger.admin_access(caller, "forget a person's account")
        validate_id(person, "person")
        return self._account(caller.company, person, requested_by=caller.person, by_admin=True)

    def _account(self, company: str, person: str, *, requested_by: str, by_admin: bool) -> ForgetAccepted:
        head = self.accounts.open("fa-" + uuid4().hex, company, person, requested_by, by_admin, self.clock.now())
        self._advance(head["forget_id"], self.request_pace)
        # the answer API.md gives: use stopped now. Even when this request's own pass finished the purge,
        # `GET /v1/forgets/{id}` is where a purge is reported complete, with each copy's evidence
        return ForgetAccepted(forget_id=head["forget_id"], status="stopped_using")

    def continue_account_forgets(self, limit: int = 10) -> int:
        """The sweeper's task: advance unfinished account forgets no one else is advancing."""
        advanced = 0
        for forget_id in self.accounts.due(self.clock.now(), limit):
            if self._advance(forget_id, self.sweep_pace):
                advanced += 1
        return advanced

    def _advance(self, forget_id: str, pace: Pace) -> bool:
        """One bounded pass over an account forget, under its lease. False when another holds it."""
        now = self.clock.now()
        if not self.accounts.claim(forget_id, now, now + self.lease):
            return False
        try:
            head = self.accounts.get(forget_id)
            assert head is not None
            company, person, actor = head["company"], head["person"], head["requested_by"]
            self._settings(company, person, actor, paused=True)  # stopped using, and nothing new learned
            # receipts answer before the views apply them (ADR 0063), and the pause may have saved
            # nothing to wait for: the views first hold every receipt stored so far
            self.ledger.caught_up()
            deadline = time.monotonic() + pace.seconds
            budget = pace.members
            # receipts first: their text is what new candidates would be learned from
            handled: list[Any] = []
            cleared = 0
            while budget > 0 and time.monotonic() < deadline:
                receipts = self.accounts.remaining_receipts(company, person, min(budget, 100), handled)
                if not receipts:
                    break
                for rid in receipts:
                    handled.append(rid)
                    budget -= 1
                    if self.memories.clear_receipt_payload(rid, "account_forgotten"):
                        cleared += 1
            self.accounts.receipts_cleared(forget_id, cleared)
            failed: list[Any] = []
            while budget > 0 and time.monotonic() < deadline:
                members = self.accounts.remaining_memories(forget_id, company, person, min(budget, 100), failed)
                if not members:
                    break
                for memory_id in members:
                    budget -= 1
                    if not self._forget_member(forget_id, memory_id, company, person, actor):
                        failed.append(memory_id)
                    if time.monotonic() >= deadline:
                        break
            self.ledger.caught_up()  # a receipt stored during this pass is found below, not missed
            if not failed and not self.accounts.remaining_receipts(company, person, 1) \
                    and not self.accounts.learning_in_flight(company, person, self.clock.now()) \
                    and not self.accounts.remaining_memories(forget_id, company, person, 1):
                self._settings(company, person, actor, paused=False)  # reset to the defaults
                self.accounts.finish(forget_id, self.clock.now())
            return True
        finally:
            self.accounts.release(forget_id)

    def _forget_member(self, forget_id: str, memory_id: UUID, company: str, person: str, actor: str) -> bool:
        def owned(memory: Memory | None) -> bool:
            return memory is not None and memory.company == company and memory.person == person

        memory = self.ledger.get(memory_id, Memory)
        if not owned(memory):
            log.warning("account forget %s: memory %s is in the view but not in the store", forget_id, memory_id)
            return False
        assert memory is not None
        try:
            answer = self.memories.forget_loaded(self._loader(str(memory_id), owned), actor=actor)
        except (Conflict, NotFound) as e:  # kept changing: the next pass tries again
            log.warning("account forget %s: memory %s not forgotten yet (%s)", forget_id, memory_id, type(e).__name__)
            return False
        self.accounts.member(forget_id, memory_id, answer.forget_id, memory.is_forgotten)
        return True

    def _settings(self, company: str, person: str, actor: str, *, paused: bool) -> None:
        """Pause use and learning while an account forget runs; back to the defaults when it is done."""
        settings = self.ledger.get(settings_id(company, person), PersonSettings)
        if settings is None:
            if not paused:
                return  # never changed: already the defaults
            settings = PersonSettings.open(company, person, self.clock.now())
        settings.change(learning_paused=paused, use_paused=paused, actor=actor, at=self.clock.now())
        try:
            self.ledger.save(settings)
        except Conflict:  # the person changed them at the same moment: the next pass sets them again
            pass

    # -- status ----------------------------------------------------------------------------------------

    def status(self, caller: Caller, forget_id: str) -> ForgetStatus:
        """A memory forget or an account forget. The person (or their registered bot) reads their own;
        an admin or operator reads any forget of their company: ids, states and evidence, never text."""
        access = self.ledger.access(caller)  # a revoked token or a suspended person, before anything is looked up
        if not caller.is_administrative:
            head, total, copies = self.accounts.report(forget_id)
            if head is None:
                return ForgetStatus.model_validate({**self.memories.forget_status(caller, forget_id), "kind": "memory"})
            if head["company"] != caller.company or head["person"] != caller.person or not access.may_read:
                raise NotFound("no such forget request")
            return self._account_status(head, total, copies)
        memory_head, memory_copies = self.purge.report(forget_id)
        if memory_head is not None and memory_head["company"] == caller.company:
            return self._memory_status(memory_head, memory_copies)
        head, total, copies = self.accounts.report(forget_id)
        if head is None or head["company"] != caller.company:
            raise NotFound("no such forget request")
        return self._account_status(head, total, copies)

    def _memory_status(self, head: dict[str, Any], copies: list[dict[str, Any]]) -> ForgetStatus:
        return ForgetStatus.model_validate({"forget_id": head["forget_id"], "memory_id": str(head["memory_id"]),
                                            "status": self.purge.status_of(copies), "copies": copies,
                                            "kind": "memory"})

    def _account_status(self, head: dict[str, Any], total: int, copies: list[dict[str, Any]]) -> ForgetStatus:
        return ForgetStatus.model_validate({"forget_id": head["forget_id"], "status": self.purge.status_of(copies),
                                            "copies": copies, "kind": "account", "person": head["person"],
                                            "memories": total, "receipts_cleared": head["receipts_cleared"],
                                            "requested_at": head["requested_at"],
                                            "finished_at": head["finished_at"]})

    def list_forgets(self, caller: Caller, *, limit: int, cursor: str | None) -> ForgetList:
        """The caller's forgets, newest first: a person's memory forgets (those an account forget made
        are summarised by it) and account forgets of them; an admin's, the account forgets they asked for."""
        after = decode_cursor(cursor) if cursor else None
        if caller.is_administrative:
            rows = self.accounts.listing(caller.company, None, caller.person, after, limit + 1)
        elif self.ledger.access(caller).may_read:
            rows = self.accounts.listing(caller.company, caller.person, None, after, limit + 1)
        else:
            return ForgetList(items=[], next_cursor=None)
        page = rows[:limit]
        memory_reports = self.purge.reports([r["forget_id"] for r in page if r["kind"] == "memory"])
        items = []
        for row in page:
            if row["kind"] == "memory":
                if row["forget_id"] in memory_reports:  # else withdrawn by a rebuild this moment
                    items.append(self._memory_status(*memory_reports[row["forget_id"]]))
                continue
            head, total, copies = self.accounts.report(row["forget_id"])
            if head is not None:
                items.append(self._account_status(head, total, copies))
        next_cursor = None
        if len(rows) > limit:
            last = page[-1]
            next_cursor = encode_cursor(last["requested_at"], last["forget_id"])
        return ForgetList(items=items, next_cursor=next_cursor)
