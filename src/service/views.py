"""What a memory and a candidate look like to their person: each document's shape is decided here, once,
whether it is built from the aggregate (after a command) or from a view row (lists, recall), and how a
view row is unsealed and scoped."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engram.adapters.view_cipher import unseal_from_view
from engram.contract.responses import CandidateOut, MemoryOut
from engram.domain.memory import Memory
from engram.domain.memory_rules import FORGOTTEN
from engram.domain.scope import Scope

from .ports import Keys


def opened(keys: Keys, row: dict[str, Any]) -> dict[str, Any]:
    """A recall or review view row with its key unwrapped once and its source unsealed (ADR 0019):
    `source` is None when the key is gone."""
    if "key" in row:
        return row
    key = keys.unwrap_row(row["memory_id"], row.get("wrapped"))
    source = unseal_from_view(key, row["memory_id"], "source", row.get("sealed_source")) if key else None
    return {**row, "key": key, "source": source}


def row_scope(row: dict[str, Any]) -> Scope:
    """The scope of an `opened` view row, for the access policy to judge it again."""
    source = row["source"]
    return Scope(row["company"], row["person"], row["visibility"], row["team"],
                 None if source is None else source.get("id"), shredded=source is None)


def unsealed(keys: Keys, row: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The text and evidence of a view row, or (None, []) when its key is gone."""
    key = opened(keys, row)["key"]
    if key is None:
        return None, []
    text = unseal_from_view(key, row["memory_id"], "text", row.get("sealed_text"))
    return text, unseal_from_view(key, row["memory_id"], "evidence", row.get("sealed_evidence")) or []


def memory_document(*, id: Any, text: str | None, status: str, revision: int, visibility: str, team: str | None,
                    source: dict[str, Any] | None, valid_from: datetime | None, valid_to: datetime | None,
                    time_uncertain: bool, evidence: list[Any], created_at: datetime,
                    updated_at: datetime, tags: list[str]) -> dict[str, Any]:
    return {"id": str(id), "text": text, "status": status, "revision": revision, "visibility": visibility,
            "team": team, "source": source, "valid_from": valid_from, "valid_to": valid_to,
            "time_uncertain": time_uncertain, "evidence": evidence, "created_at": created_at, "updated_at": updated_at,
            "tags": tags}


def context_of_row(keys: Keys, row: dict[str, Any]) -> str | None:
    """An `opened` review row's context (the sentence or two around its quote), or None."""
    key = opened(keys, row)["key"]
    return unseal_from_view(key, row["memory_id"], "context", row.get("sealed_context")) if key else None


def tags_of_row(keys: Keys, row: dict[str, Any]) -> list[str]:
    """An `opened` view row's tags, or [] when its key is gone."""
    key = opened(keys, row)["key"]
    return (unseal_from_view(key, row["memory_id"], "tags", row.get("sealed_tags")) or []) if key else []


def memory_of(m: Memory, **more: Any) -> MemoryOut:
    """The memory as its person reads it; `more`: the fields only some answers carry (links, purge_id)."""
    return MemoryOut.model_validate({**memory_fields(m), **more})


def memory_fields(m: Memory) -> dict[str, Any]:
    """`memory_of`'s fields, for documents that extend them (the export's)."""
    cur, forgotten = m.current, m.status == FORGOTTEN
    return memory_document(
        id=m.id, text=None if forgotten else cur["text"], status=m.status, revision=m.revision,
        visibility=m.visibility, team=m.team, source=None if forgotten else m.source, valid_from=cur["valid_from"],
        valid_to=cur["valid_to"], time_uncertain=cur["time_uncertain"],
        evidence=[] if forgotten or m.evidence is None else m.evidence, created_at=m.created_on,
        updated_at=m.modified_on, tags=[] if forgotten else list(getattr(m, "tags", None) or []),
    )


def memory_of_row(row: dict[str, Any], text: str | None, evidence: list[Any],
                  tags: list[str] | None = None) -> MemoryOut:
    return MemoryOut.model_validate(memory_document(
        id=row["memory_id"], text=text, status=row["status"], revision=row["revision"],
        visibility=row["visibility"], team=row["team"], source=row["source"], valid_from=row["valid_from"],
        valid_to=row["valid_to"], time_uncertain=row["time_uncertain"], evidence=evidence,
        created_at=row["created_at"], updated_at=row["updated_at"], tags=tags or [],
    ))


def candidate_document(*, id: Any, text: str | None, status: str, review: str, visibility: str, team: str | None,
                       source: dict[str, Any] | None, evidence: list[Any], proposed_at: datetime,
                       expires_at: datetime | None, context: str | None,
                       relation: dict[str, str] | None, valid_from: datetime | None,
                       valid_to: datetime | None) -> dict[str, Any]:
    return {"id": str(id), "text": text, "status": status, "review": review, "visibility": visibility,
            "team": team, "source": source, "evidence": evidence, "context": context, "relation": relation,
            "valid_from": valid_from, "valid_to": valid_to, "time_uncertain": valid_from is None,
            "proposed_at": proposed_at, "expires_at": expires_at}


def candidate_of(m: Memory, **more: Any) -> CandidateOut:
    return CandidateOut.model_validate({**candidate_document(
        id=m.id, text=m.current["text"], status=m.status, review=m.review, visibility=m.visibility, team=m.team,
        source=m.source, evidence=m.evidence or [], proposed_at=m.created_on, expires_at=m.expires_at,
        context=getattr(m, "context", None), relation=getattr(m, "relation", None),
        valid_from=m.current["valid_from"], valid_to=m.current["valid_to"],
    ), **more})


def candidate_of_row(row: dict[str, Any], text: str | None, evidence: list[Any],
                     context: str | None = None) -> CandidateOut:
    return CandidateOut.model_validate(candidate_document(
        id=row["memory_id"], text=text, status="pending_review", review=row["review"],
        visibility=row["visibility"], team=row["team"], source=row["source"], evidence=evidence,
        proposed_at=row["proposed_at"], expires_at=row["expires_at"], context=context,
        relation=row.get("relation"), valid_from=row.get("valid_from"), valid_to=row.get("valid_to"),
    ))
