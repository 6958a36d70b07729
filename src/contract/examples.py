"""The reference's examples: one request or answer document per model a route takes or returns.

Each model names its example here (`models.py`, `schemas.py`: `json_schema_extra`), so /openapi.json
and /docs show a document a program can copy. They are the documents the service sends for one person,
Alice, who told a chat bot how she likes her reports; tests check each one survives its own model
unchanged, so an example cannot drift from the model it illustrates.
"""

from __future__ import annotations

from typing import Any

MEMORY_ID = "6f1c2d1e-8b0a-4c55-9a57-0e3f5b1d2c44"
OTHER_MEMORY_ID = "0b7e4a9c-2f61-4d3a-8e15-93c1d7a6f208"
INSIGHT_ID = "c3a9e0f2-5d14-4b7e-a6c8-1f2e3d4c5b6a"
FORGET_ID = "fg-5e0d8c1b2a3f4e6d7c8b9a0f1e2d3c4b"
SOURCE = {"kind": "chat", "id": "chat-42", "message_id": "m-8"}
TEXT = "I prefer weekly reports as short bullet points"
AT = "2026-11-02T01:00:00Z"

# -- requests -------------------------------------------------------------------------------------

REMEMBER_IN = {"text": TEXT, "tags": ["reports"], "source": SOURCE, "occurred_at": "2026-11-02T09:00:00+08:00"}
CONFIRM_IN = {"text": "My blood pressure is high", "acknowledge_sensitive": True}  # a sensitive candidate, edited
CORRECT_IN = {"text": "I prefer monthly reports as short bullet points", "valid_from": "2026-12-01T00:00:00Z",
              "reason": "reports moved to monthly"}
RECALL_IN = {"query": "how should reports look", "limit": 5, "max_bytes": 4000}
RECEIPT_IN = {"receipt_id": "r-chat-42-m-8", "author": "user", "text": TEXT, "source": SOURCE,
              "occurred_at": "2026-11-02T09:00:00+08:00"}
RECEIPT_BATCH_IN = {"messages": [
    RECEIPT_IN,
    {"receipt_id": "r-chat-42-m-9", "author": "assistant", "text": "Noted: short bullet points.",
     "source": {**SOURCE, "message_id": "m-9"}, "occurred_at": "2026-11-02T09:00:05+08:00"},
]}
FORGET_MANY_IN = {"ids": [MEMORY_ID, OTHER_MEMORY_ID]}
DIRECTORY_IN = {"teams": {"t-risk": {"members": ["alice", "bob"]}},
                "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
                "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}}
SETTINGS_IN = {"learning_paused": False, "use_paused": False}

# A valid value of each argument or field a caller gets wrong most, from the documents above: shown by a
# 422's `errors[].example` and by the Python client's TypeError (and checked against the TypeScript
# client's), so every place that says "for example" says the same thing.
ARGUMENTS: dict[str, Any] = {
    "source": SOURCE, "occurred_at": REMEMBER_IN["occurred_at"], "as_of": REMEMBER_IN["occurred_at"],
    "valid_from": CORRECT_IN["valid_from"], "valid_to": CORRECT_IN["valid_from"], "tags": REMEMBER_IN["tags"],
    "ids": FORGET_MANY_IN["ids"][:1], "messages": [RECEIPT_IN],
}

# -- answers --------------------------------------------------------------------------------------

EVIDENCE = {"quote": TEXT, "source": SOURCE, "occurred_at": AT}
MEMORY = {"id": MEMORY_ID, "text": TEXT, "status": "confirmed", "revision": 1, "visibility": "general",
          "team": None, "source": SOURCE, "valid_from": AT, "valid_to": None, "time_uncertain": False,
          "evidence": [EVIDENCE], "created_at": AT, "updated_at": AT, "tags": ["reports"]}
LINK = {"memory_id": OTHER_MEMORY_ID, "kind": "co_mention", "status": "active", "since": AT,
        "invalidated_at": None, "reason": None}
LINKS = {"items": [LINK]}
MEMORY_LIST = {"items": [MEMORY], "next_cursor": None}
CANDIDATE = {"id": MEMORY_ID, "text": TEXT, "status": "pending_review", "review": "normal",
             "visibility": "general", "team": None, "source": SOURCE, "evidence": [EVIDENCE],
             "proposed_at": AT, "expires_at": "2026-12-02T01:00:00Z"}
CANDIDATES = {"items": [CANDIDATE]}
HISTORY = {"events": [
    {"type": "Created", "at": AT, "actor": "alice", "revision": 1, "text": TEXT, "evidence": [EVIDENCE]},
    {"type": "Corrected", "at": "2026-11-20T08:00:00Z", "actor": "alice", "revision": 2,
     "text": CORRECT_IN["text"], "reason": CORRECT_IN["reason"], "mode": "supersede",
     "valid_from": "2026-12-01T00:00:00Z", "valid_to": None,
     "evidence": [{"quote": CORRECT_IN["text"], "source": {"kind": "correction", "id": "alice", "message_id": None},
                   "occurred_at": "2026-11-20T08:00:00Z"}]},
]}
RECALL = {"items": [{"id": MEMORY_ID, "kind": "memory", "text": TEXT, "revision": 1, "valid_from": AT,
                     "valid_to": None, "time_uncertain": False, "evidence": [EVIDENCE], "score": 0.0328}],
          "degraded": False, "bytes": 47, "omitted": 0}
INSIGHT = {"id": INSIGHT_ID, "text": "Alice wants reports short", "status": "proposed", "reason": None,
           "proposer": "local", "evidence_memory_ids": [MEMORY_ID, OTHER_MEMORY_ID],
           "evidence": [{**EVIDENCE, "memory_id": MEMORY_ID},
                        {"quote": "Keep the report short", "source": {**SOURCE, "message_id": "m-31"},
                         "occurred_at": "2026-11-09T01:00:00Z", "memory_id": OTHER_MEMORY_ID}],
           "proposed_at": "2026-11-09T01:00:03Z", "updated_at": "2026-11-09T01:00:03Z"}
INSIGHTS = {"items": [INSIGHT]}
FORGET_ACCEPTED = {"forget_id": FORGET_ID, "status": "stopped_using"}
FORGET_STATUS = {"forget_id": FORGET_ID, "memory_id": MEMORY_ID, "status": "stopped_using", "copies": [
    {"copy": "event_store", "state": "purged",
     "evidence": "data key destroyed; every stored event of this memory is ciphertext under it", "purged_at": AT},
    {"copy": "recall_view", "state": "purged",
     "evidence": "deleted 1 revision rows and 9 term rows at position 812", "purged_at": AT},
    {"copy": "hindsight", "state": "pending", "evidence": None, "purged_at": None},
], "kind": "memory", "requested_at": AT}
FORGETS = {"items": [FORGET_STATUS], "next_cursor": None}
FORGET_MANY = {"forget_ids": [FORGET_ID, "fg-9a8b7c6d5e4f30211203f4e5d6c7b8a9"]}
REJECTED = {"id": MEMORY_ID, "status": "rejected", "purge_id": FORGET_ID}
RECEIPT = {"receipt_id": "r-chat-42-m-8", "state": "done", "attempts": 1, "last_error": None,
           "candidate_ids": [MEMORY_ID]}
RECEIPT_QUEUED = {"receipt_id": "r-chat-42-m-8", "state": "queued"}
RECEIPT_BATCH = {"items": [RECEIPT_QUEUED, {"receipt_id": "r-chat-42-m-9", "state": "ignored",
                                            "reason": "not_user_text"}]}
REVOCATION = {"source_id": "chat-42", "scope": "person", "status": "revoked"}
SETTINGS = {"learning_paused": False, "use_paused": False}
DIRECTORY = {"teams": {"t-risk": {"members": ["alice", "bob"]}},
             "sources": {"s-jira": {"team": "t-risk", "members": ["alice"]}},
             "bots": {"b-helper": {"teams": ["t-risk"], "sources": ["s-jira"]}}}
ADMIN_STATUS = {"company": "acme", "mode": "enabled",
                "dependencies": {"database": "ok", "kafka": "not used (in-process projectors)", "llm": "configured",
                                 "hindsight": "configured"},
                "quarantined_events": {"recall": 0, "review": 0, "governance": 0, "inbox": 0, "insights": 0,
                                       "links": 0, "hindsight_sync": 0},
                "backlogs": {"inbox": {"queued": 3, "done": 120}, "projector_lag": 0,
                             "hindsight_sync": {"pending": 1, "done": 118},
                             "purge": {"forgets_pending": 1, "tombstones_unpublished": 0},
                             "insights": {"people_to_propose": 2, "invalidations_to_record": 0}},
                "budget_today": {"tokens": 18250, "calls": 41, "failed_calls": 1, "token_limit": 2000000,
                                 "call_limit": 5000},
                "budget_days": [{"day": f"2026-11-{d:02d}", "tokens": 900 * d, "calls": 2 * d, "failed_calls": d % 3 // 2}
                                for d in range(17, 31)]}
EXPORT = {"exported_at": "2026-11-30T06:00:00Z", "company": "acme", "person": "alice",
          "memories": [{**MEMORY, "history": HISTORY["events"][:1],
                        "answer": {"revision": 1, "text": TEXT, "valid_from": AT, "valid_to": None}}],
          "insights": [INSIGHT]}
BOT_KEYS = {"items": [{"key_id": "3f9a1c0b7d2e4a61", "revoked": False, "issued_at": AT}]}
BOT_KEY_REVOKED = {"key_id": "3f9a1c0b7d2e4a61", "bot": "b-helper", "revoked": True}
BOT_KEY = {"key_id": "3f9a1c0b7d2e4a61", "key": "ek_3f9a1c0b7d2e4a61_" + "x" * 43, "bot": "b-helper"}
PERSON_CREDENTIALS = {"person": "alice", "signed_out_before": 1798761600, "suspended": False}
HEALTH = {"status": "ok"}
METRICS = ("# HELP engram_recall_degraded_total Recalls answered without Hindsight\n"
           "# TYPE engram_recall_degraded_total counter\nengram_recall_degraded_total 0\n")

# -- problems -------------------------------------------------------------------------------------

_PROBLEM_CODES = {400: ("malformed_json", "Malformed JSON", "the request body is not valid JSON"),
                  401: ("token_expired", "Token expired", "the token has expired"),
                  403: ("forbidden", "Forbidden", "this role may not do that"),
                  404: ("not_found", "Not found", "no such memory"),
                  409: ("source_revoked", "The source was revoked", "the source this memory came from was revoked"),
                  413: ("text_too_large", "Text is too large", "text is over 8192 bytes of UTF-8"),
                  415: ("unsupported_media_type", "Unsupported media type", "the body must be application/json"),
                  422: ("validation_error", "Request is not valid", "limit: Input should be less than or equal to 200"),
                  503: ("unavailable", "Service unavailable", "the database is unavailable; retry later")}


def problem(status: int) -> dict[str, Any]:
    code, title, detail = _PROBLEM_CODES.get(status, ("http_error", "Problem", "the request failed"))
    return {"type": f"https://engram.dev/problems/{code}", "title": title, "status": status, "detail": detail,
            "code": code}


def extra(example: dict[str, Any]) -> dict[str, Any]:
    """`json_schema_extra` for a model illustrated by `example`."""
    return {"examples": [example]}
