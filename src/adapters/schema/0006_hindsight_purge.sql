-- Hindsight purge that stays true (ADR 0018).
--
-- The hindsight_sync view gets a `generation` (the event that made each wish): it is rebuilt, not
-- migrated in place (ADR 0012). On a new database nothing exists yet, hence IF EXISTS.
DROP TABLE IF EXISTS engram_hindsight_sync, engram_hindsight_scopes, engram_hindsight_directories,
    engram_hindsight_sync_tracking;
DELETE FROM engram_quarantine WHERE projection = 'hindsight_sync';

-- Who works on a memory's Hindsight document, and what is known about requests that may still land.
-- Kept apart from the view: a rebuild or a new wish must never free a lease while a request runs.
CREATE TABLE engram_hindsight_leases (
    memory_id uuid PRIMARY KEY,
    owner text,                        -- the syncer holding the lease (NULL: released)
    lease_until timestamptz,
    retain_in_doubt_until timestamptz, -- a retain that ended without an answer may land until then
    deleted_at timestamptz,            -- when the document was last seen deleted by this syncer's delete
    facts_before int                   -- how many facts the document had at that delete
);

-- The audit of deleted documents against Hindsight (content-free: ids, counts, times).
CREATE TABLE engram_hindsight_audits (
    memory_id uuid PRIMARY KEY,
    checked_at timestamptz NOT NULL,
    checks int NOT NULL DEFAULT 1,
    found_again int NOT NULL DEFAULT 0,   -- times the document was found back in Hindsight
    last_found_at timestamptz
);
CREATE INDEX engram_hindsight_audits_checked ON engram_hindsight_audits (checked_at);
