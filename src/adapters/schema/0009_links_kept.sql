-- Links of memories whose key is gone (ADR 0020).
--
-- The links projection notes here, when a memory is forgotten, rejected or expired, each link it had
-- then: the other memory, since when, when it was broken and why. Events cannot give these back (the
-- memory's evidence, which named the message, went with its key), so no rebuild clears this table.
-- Content-free: ids, times and a reason; no message, not even blinded.
CREATE TABLE engram_links_kept (
    memory_id uuid NOT NULL,
    version int NOT NULL,
    other_id uuid NOT NULL,
    other_version int NOT NULL,
    since timestamptz NOT NULL,
    invalidated_at timestamptz NOT NULL,
    reason text NOT NULL,
    PRIMARY KEY (memory_id, version, other_id, other_version)
);
CREATE INDEX engram_links_kept_other ON engram_links_kept (other_id);
