"""A memory's revisions over valid time: the record each revision keeps, whether a correction
supersedes or replaces what came before, and which revision answers for which stretch of valid time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

SUPERSEDE = "supersede"
REPLACE = "replace"


def revision_record(*, revision: int, text: str | None, valid_from: datetime | None, valid_to: datetime | None,
                    time_uncertain: bool, at: datetime, actor: str, mode: str | None) -> dict[str, Any]:
    """One entry of a memory's `revisions`."""
    return {"revision": revision, "text": text, "valid_from": valid_from, "valid_to": valid_to,
            "time_uncertain": time_uncertain, "at": at, "actor": actor, "mode": mode}


def correction_mode(valid_from: datetime | None, current_from: datetime | None) -> str:
    """A correction that starts later than the current answer supersedes it from then; any other replaces it."""
    supersedes = valid_from is not None and (current_from is None or valid_from > current_from)
    return SUPERSEDE if supersedes else REPLACE


def answer_periods(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Which revision is the answer for which stretch of valid time.

    A superseding correction ends the earlier answers at its valid_from; a replacing
    one removes them for every time. Periods never overlap.
    """
    periods: list[dict[str, Any]] = []
    for rev in revisions:
        start, end = rev["valid_from"], rev["valid_to"]
        if rev["mode"] == SUPERSEDE:
            kept = []
            for p in periods:
                if p["valid_from"] is not None and p["valid_from"] >= start:
                    continue
                p_end = p["valid_to"]
                kept.append({**p, "valid_to": start if p_end is None or p_end > start else p_end})
            periods = kept
        elif rev["mode"] == REPLACE:
            periods = []
        periods.append({"revision": rev["revision"], "valid_from": start, "valid_to": end})
    return periods


def answer_at(revisions: list[dict[str, Any]], at: datetime) -> dict[str, Any] | None:
    """The revision that answers for valid time `at` (its text and answer period), if any does."""
    for period in answer_periods(revisions):
        if (period["valid_from"] is None or period["valid_from"] <= at) and \
                (period["valid_to"] is None or period["valid_to"] > at):
            revision = next(r for r in revisions if r["revision"] == period["revision"])
            return {"revision": revision["revision"], "text": revision["text"],
                    "valid_from": period["valid_from"], "valid_to": period["valid_to"]}
    return None
