"""Insights: derived judgments proposed from several confirmed memories of one scope, used once
their person confirms them, and never once any piece of their evidence no longer holds.

Every read (the list, confirm, recall) judges each insight's evidence again, for this caller, now:
each memory must still be confirmed at the cited revision and usable by the caller (the access
policy decides, as for memories). So a forget, a correction, a revocation or a scope change stops an
insight at once, whatever the background has done. The background then records it for good: an
`Invalidated` event (destroying the insight's key when a memory was forgotten, since its text was
derived from forgotten words). Proposals come from the proposers behind one port, per group of a
person's memories; a proposal citing memories outside its group is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.adapters.blind_index import BlindIndex
from engram.adapters.view_cipher import unseal_from_view
from engram.contract.responses import InsightList, InsightOut
from engram.domain.access import Access
from engram.domain.errors import Conflict, NotFound
from engram.domain.insight import (
    CONFIRMED,
    FORGOTTEN,
    INVALIDATED,
    LIVE,
    OUT_OF_SCOPE,
    PROPOSED,
    REVOKED,
    Fact,
    Group,
    Insight,
    InsightInvalidated,
    Proposal,
    broken_by,
    insight_id,
    scope_key,
)
from engram.domain.scope import Caller, Scope
from engram.domain.text import validate_text
from engram.projections.insight_queries import InsightQueries

from .ledger import Ledger
from .ports import InsightProposer
from .views import opened, row_scope, unsealed

log = logging.getLogger("engram.insights")

SHOWN = (PROPOSED, CONFIRMED, INVALIDATED)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _parse(insight_id_text: str) -> UUID:
    try:
        return UUID(insight_id_text)
    except (ValueError, TypeError, AttributeError):
        raise NotFound("no such insight") from None


class InsightService:
    def __init__(self, ledger: Ledger, queries: InsightQueries, index: BlindIndex,
                 proposers: Sequence[InsightProposer] = (), *, max_facts: int = 200,
                 max_text_bytes: int = 8192) -> None:
        self.ledger = ledger
        self.keys = ledger.keys
        self.queries = queries
        self.index = index
        self.proposers = list(proposers)
        self.max_facts = max_facts
        self.max_text_bytes = max_text_bytes

    # -- judging evidence -----------------------------------------------------

    def _memories(self, access: Access, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """What the caller's reads know now of every memory these insights rest on."""
        ids = sorted({str(p["memory_id"]) for r in rows for p in r["evidence"]})
        known: dict[str, dict[str, Any]] = {}
        for row in self.queries.memory_states(ids):
            row = opened(self.keys, row)
            scope = row_scope(row)
            known[str(row["memory_id"])] = {"status": row["status"], "revision": row["revision"],
                                            "usable": access.may_use(scope), "row": row,
                                            "revoked": scope.source_id in access.revoked_sources}
        return known

    def _judged(self, access: Access, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each insight with its status as its evidence stands now, for this caller. One resting on a
        memory revoked or out of the caller's scope is `invalidated` for them and shows no text (its text
        came from that memory); it is in use again if the memory comes back into their scope."""
        if access.caller.is_administrative:
            return []
        memories = self._memories(access, rows)
        judged = []
        for row in rows:
            status, reason, hidden = row["status"], row["reason"], False
            broken = broken_by(row["evidence"], memories)
            if broken is not None and broken[0] in (OUT_OF_SCOPE, REVOKED):
                hidden = True
            if status in LIVE and broken is not None:
                status, reason = INVALIDATED, broken[0]
            judged.append({**row, "status": status, "reason": reason, "memories": memories, "hidden": hidden})
        return judged

    def _document(self, row: dict[str, Any]) -> dict[str, Any]:
        key = self.keys.unwrap_row(row["insight_id"], row.get("wrapped"))
        text = unseal_from_view(key, row["insight_id"], "text", row["sealed_text"]) if key else None
        if row["reason"] == FORGOTTEN or row["hidden"]:
            text = None  # derived from forgotten words, or from words this caller may not use now
        evidence = []
        for piece in row["evidence"]:
            known = row["memories"].get(str(piece["memory_id"]))
            if known is None or not known["usable"] or known["status"] == "forgotten":
                continue
            _text, quotes = unsealed(self.keys, known["row"])
            evidence += [{**q, "memory_id": str(piece["memory_id"])} for q in quotes]
        return {"id": str(row["insight_id"]), "text": text, "status": row["status"], "reason": row["reason"],
                "proposer": row["proposer"], "evidence_memory_ids": [str(p["memory_id"]) for p in row["evidence"]],
                "evidence": evidence, "proposed_at": row["proposed_at"], "updated_at": row["updated_at"]}

    # -- reads ----------------------------------------------------------------

    def list_insights(self, caller: Caller, *, status: str | None = None) -> InsightList:
        access = self.ledger.access(caller)
        if not access.sees_memories:
            return InsightList(items=[])
        stored = [PROPOSED, CONFIRMED, INVALIDATED] if status in (None, INVALIDATED) else [status]
        rows = self.queries.insights(company=caller.company, person=caller.person, statuses=stored)
        items = [self._document(r) for r in self._judged(access, rows)]
        if status is not None:
            items = [i for i in items if i["status"] == status]
        return InsightList(items=[InsightOut.model_validate(i) for i in items])

    def _load(self, caller: Caller, insight_id_text: str) -> tuple[Access, Insight, dict[str, Any]]:
        Access(caller).require_reviewer()
        access = self.ledger.access(caller)
        access.admit()
        access.require_may_act()
        insight = self.ledger.get(_parse(insight_id_text), Insight)
        if insight is None or insight.company != caller.company or insight.person != caller.person:
            raise NotFound("no such insight")
        judged = self._judged(access, [self._row(insight)])
        if not judged:
            raise NotFound("no such insight")
        return access, insight, judged[0]

    def _row(self, insight: Insight) -> dict[str, Any]:
        rows = self.queries.insight(insight.id)
        if rows:
            return rows[0]
        raise NotFound("no such insight")

    def confirm(self, caller: Caller, insight_id_text: str) -> InsightOut:
        _access, insight, judged = self._load(caller, insight_id_text)
        if judged["status"] == INVALIDATED or judged["hidden"]:
            raise InsightInvalidated("a memory this insight rests on was forgotten, corrected or revoked")
        insight.confirm(actor=caller.bot or caller.person, at=self.ledger.clock.now())
        self.ledger.save(insight)
        return self._reread(caller, insight)

    def reject(self, caller: Caller, insight_id_text: str) -> InsightOut:
        _access, insight, _judged = self._load(caller, insight_id_text)
        insight.reject(actor=caller.bot or caller.person, at=self.ledger.clock.now())
        # like a rejected candidate: its text goes with its key, in the same transaction
        self.ledger.save(insight, shreds=[self.ledger.shred("insight", insight.id, insight.company,
                                                            person=insight.person)])
        return self._reread(caller, insight)

    def _reread(self, caller: Caller, insight: Insight) -> InsightOut:
        access = self.ledger.access(caller)
        judged = self._judged(access, [self._row(insight)])
        if not judged:
            raise NotFound("no such insight")
        return InsightOut.model_validate(self._document(judged[0]))

    def recallable(self, access: Access, *, terms: list[int], as_of: datetime) -> list[dict[str, Any]]:
        """The caller's confirmed insights whose evidence holds now and answered at `as_of`, as recall
        items with a score in [0, 1): the share of the query's terms they hold (all when no query)."""
        caller = access.caller
        # a query's insights share a term with it: the others are not read at all
        rows = self.queries.insights(company=caller.company, person=caller.person, statuses=[CONFIRMED],
                                     sharing=sorted(set(terms)) if terms else None)
        judged = [r for r in self._judged(access, rows) if r["status"] == CONFIRMED]
        if not judged:
            return []
        wanted = set(terms)
        periods: dict[tuple[str, int], dict[str, Any]] = {
            (str(a["memory_id"]), a["revision"]): a
            for a in self.queries.answers(sorted({str(p["memory_id"]) for r in judged for p in r["evidence"]}))}
        items = []
        for row in judged:
            held = len(wanted & set(row["terms"] or ())) if wanted else 0
            if wanted and not held:
                continue
            spans = [periods.get((str(p["memory_id"]), int(p["revision"]))) for p in row["evidence"]]
            if any(s is None or (s["answer_from"] is not None and s["answer_from"] > as_of)
                   or (s["answer_to"] is not None and s["answer_to"] <= as_of) for s in spans):
                continue
            starts = [s["answer_from"] for s in spans if s and s["answer_from"] is not None]
            ends = [s["answer_to"] for s in spans if s and s["answer_to"] is not None]
            document = self._document(row)
            if document["text"] is None:
                continue
            items.append({"id": document["id"], "kind": "insight", "text": document["text"], "revision": 1,
                          "valid_from": _iso(max(starts)) if starts else None,
                          "valid_to": _iso(min(ends)) if ends else None,
                          "time_uncertain": len(starts) < len(spans), "evidence": document["evidence"],
                          "evidence_memory_ids": document["evidence_memory_ids"],
                          "score": round(held / (held + 1.0), 4)})
        return sorted(items, key=lambda i: -i["score"])

    # -- background -------------------------------------------------------------

    def propose_due(self, limit: int = 20) -> int:
        """Run the proposers for people whose confirmed memories changed; returns the insights proposed."""
        proposed = 0
        for work in self.queries.due_work(limit):
            try:
                proposed += self._propose_for(work["company"], work["person"])
            except Exception as exc:  # noqa: BLE001 - one person's failure never stops the others
                log.warning("insight proposals failed for one person (%s); retried on their next change",
                            type(exc).__name__)
            self.queries.work_done(work["company"], work["person"], work["changed_at"])
        return proposed

    def groups(self, company: str, person: str) -> list[Group]:
        """The person's confirmed memories they may use now, one group per scope (never across)."""
        access = self.ledger.access(Caller(company, person, "user"))
        if access.learning_paused:
            return []
        grouped: dict[tuple[str, str | None, str | None], tuple[Scope, list[Fact]]] = {}
        for row in self.queries.confirmed_memories(company, person, self.max_facts):
            row = opened(self.keys, row)
            scope = row_scope(row)
            if not access.may_use(scope):
                continue
            text, _evidence = unsealed(self.keys, row)
            if not text:
                continue
            entry = grouped.setdefault(scope_key(scope), (scope, []))
            entry[1].append(Fact(str(row["memory_id"]), int(row["revision"]), text))
        return [Group(scope, tuple(facts)) for scope, facts in grouped.values() if len(facts) >= 2]

    def _propose_for(self, company: str, person: str) -> int:
        proposed = 0
        groups = self.groups(company, person)
        if not groups:
            return 0
        live = self.queries.insights(company=company, person=person, statuses=list(LIVE))
        for group in groups:
            for proposer in self.proposers:
                try:
                    proposals = proposer.propose(group)
                except Exception as exc:  # noqa: BLE001 - a proposer down is the others' business too
                    log.warning("insight proposer %s failed (%s)", proposer.name, type(exc).__name__)
                    continue
                for proposal in proposals:
                    proposed += self._save_proposal(group, proposal, proposer.name, live)
        return proposed

    def _save_proposal(self, group: Group, proposal: Proposal, name: str, live: list[dict[str, Any]]) -> int:
        facts = {f.memory_id: f for f in group.facts}
        cited = list(dict.fromkeys(proposal.memory_ids))
        if len(cited) < 2 or any(m not in facts for m in cited):
            log.info("insight proposer %s cited memories outside its group; proposal dropped", name)
            return 0
        try:
            validate_text(proposal.text, self.max_text_bytes)
        except Exception:  # noqa: BLE001
            return 0
        if any(r["proposer"] == name and {str(p["memory_id"]) for p in r["evidence"]} <= set(cited) for r in live):
            return 0  # already proposed over these memories (or fewer of them)
        scope = group.scope
        new_id = insight_id(scope.company, scope.person, name, cited)
        if self.ledger.get(new_id, Insight) is not None:
            return 0  # proposed once already, whatever became of it
        insight = Insight.propose(scope=scope, text=proposal.text, evidence=[facts[m] for m in cited], proposer=name,
                                  actor=name, at=self.ledger.clock.now())
        try:
            self.ledger.create(insight, company=scope.company)
        except Conflict:
            return 0  # proposed concurrently elsewhere
        return 1

    def settle_invalidations(self, limit: int = 100) -> int:
        """Record for good the insights the view found broken: their Invalidated event, and when a
        memory they rest on was forgotten, their key's destruction and tombstone in the same transaction."""
        settled = 0
        for row in self.queries.unsettled(limit):
            insight = self.ledger.get(row["insight_id"], Insight)
            if insight is None:
                continue
            now = self.ledger.clock.now()
            forgotten = bool(row["evidence_forgotten"])
            if insight.is_live:
                insight.invalidate(reason=row["reason"] or FORGOTTEN, memory_id=None, at=now,
                                   key_destroyed_at=now if forgotten else None)
            shreds = [self.ledger.shred("insight", insight.id, insight.company, person=insight.person)] if forgotten else []
            try:
                self.ledger.save(insight, shreds=shreds)
            except Conflict:
                continue
            settled += 1
        if settled:
            self.keys.vacuum()
        return settled
