"""The recall view's tables: each memory's current state, the revisions that answer for some valid
time, a blind term index over them and the per-person BM25 figures; and the columns a batch reads and
writes. No plaintext: text is sealed under the memory's key, terms are keyed hashes."""

from __future__ import annotations

from .view import View

DDL = """
CREATE TABLE IF NOT EXISTS engram_memories (
    memory_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    sealed_source bytea,             -- {kind, id, message_id} under the memory's key (ADR 0019)
    source_blind text,               -- BlindIndex.source of its id: for revocation, restriction, forget by source
    status text NOT NULL,
    review text NOT NULL,
    revision int NOT NULL,
    sealed_text bytea,
    sealed_evidence bytea,
    valid_from timestamptz,
    valid_to timestamptz,
    time_uncertain boolean NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    forget_id text,
    occurred_at timestamptz,         -- when it was said (its first evidence): its day is a term, its turn an order
    asks boolean NOT NULL DEFAULT false,  -- its text is a question: the memory said next may answer it
    sealed_tags bytea,               -- its tags, sealed under its key
    tag_terms bigint[] NOT NULL DEFAULT '{}'  -- BlindIndex.tag of each: what `tags` filters match
);
CREATE INDEX IF NOT EXISTS engram_memories_tags ON engram_memories USING gin (tag_terms)
    WHERE cardinality(tag_terms) > 0;
CREATE INDEX IF NOT EXISTS engram_memories_conversation
    ON engram_memories (company, person, source_blind, occurred_at) WHERE source_blind IS NOT NULL;
CREATE INDEX IF NOT EXISTS engram_memories_owner
    ON engram_memories (company, person, status, created_at DESC, memory_id DESC);
CREATE INDEX IF NOT EXISTS engram_memories_source
    ON engram_memories (company, person, source_blind) WHERE source_blind IS NOT NULL;
CREATE TABLE IF NOT EXISTS engram_recall_revisions (
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    company text NOT NULL,
    person text NOT NULL,
    visibility text NOT NULL,
    team text,
    source_blind text,
    valid_from timestamptz,
    valid_to timestamptz,
    mode text,
    time_uncertain boolean NOT NULL,
    at timestamptz NOT NULL,
    is_answer boolean NOT NULL DEFAULT false,
    answer_from timestamptz,
    answer_to timestamptz,
    sealed_text bytea,
    sealed_evidence bytea,           -- this revision's own evidence (a correction's is the correction)
    doc_len int NOT NULL DEFAULT 0,
    PRIMARY KEY (memory_id, revision)
);
CREATE INDEX IF NOT EXISTS engram_recall_revisions_owner
    ON engram_recall_revisions (company, person) WHERE is_answer;
CREATE TABLE IF NOT EXISTS engram_recall_terms (
    company text NOT NULL,
    person text NOT NULL,
    term bigint NOT NULL,
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    tf int NOT NULL,
    -- copied from the revision so a search reads nothing but this index range
    doc_len int NOT NULL,
    visibility text NOT NULL,
    team text,
    source_blind text,
    answer_from timestamptz,
    answer_to timestamptz,
    -- the rest of the row rides in the key's index: a search reads the index alone (an index-only scan)
    PRIMARY KEY (company, person, term, memory_id, revision)
        INCLUDE (tf, doc_len, visibility, team, source_blind, answer_from, answer_to)
);
CREATE TABLE IF NOT EXISTS engram_recall_stats (
    company text NOT NULL,
    person text NOT NULL,
    answers int NOT NULL,
    total_len bigint NOT NULL,
    PRIMARY KEY (company, person)
);
CREATE INDEX IF NOT EXISTS engram_recall_terms_memory ON engram_recall_terms (memory_id);
"""


class RecallView(View):
    ddl = DDL
    tables = (
        "engram_recall_stats",
        "engram_recall_terms",
        "engram_recall_revisions",
        "engram_memories",
    )


MEMORY_COLUMNS = ("memory_id", "company", "person", "visibility", "team", "sealed_source", "source_blind", "status",
                  "review", "revision", "sealed_text", "sealed_evidence", "valid_from", "valid_to", "time_uncertain",
                  "created_at", "updated_at", "forget_id", "occurred_at", "asks", "sealed_tags", "tag_terms")
REVISION_COLUMNS = ("memory_id", "revision", "company", "person", "visibility", "team", "source_blind", "valid_from",
                    "valid_to", "mode", "time_uncertain", "at", "is_answer", "answer_from", "answer_to", "sealed_text",
                    "sealed_evidence", "doc_len")
TERM_COLUMNS = ("company", "person", "term", "memory_id", "revision", "tf", "doc_len", "visibility", "team",
                "source_blind", "answer_from", "answer_to")
