-- Sealed sources (ADR 0019).
--
-- The recall, review, inbox and hindsight_sync views no longer keep a memory's or a receipt's source
-- in clear: the source is sealed under its key and its id blinded (`BlindIndex.source`). Each view is
-- rebuilt, not migrated in place (ADR 0012); on a new database nothing exists yet, hence IF EXISTS.
DROP TABLE IF EXISTS engram_recall_stats, engram_recall_terms, engram_recall_revisions, engram_memories,
    engram_recall_tracking;
DROP TABLE IF EXISTS engram_candidates, engram_review_tracking;
DROP TABLE IF EXISTS engram_inbox, engram_capture_stops, engram_inbox_tracking;
DROP TABLE IF EXISTS engram_hindsight_sync, engram_hindsight_scopes, engram_hindsight_directories,
    engram_hindsight_sync_tracking;
DELETE FROM engram_quarantine WHERE projection IN ('recall', 'review', 'inbox', 'hindsight_sync');

-- Each memory's Hindsight bank, noted by the hindsight_sync projection at the memory's creation,
-- while its source (part of a restricted bank's name) can still be unsealed. A forget must find the
-- document after the key is gone, also after a rebuild: events cannot give it back, so no rebuild
-- clears this table. Content-free: a bank name is a hash.
CREATE TABLE engram_hindsight_banks (
    memory_id uuid PRIMARY KEY,
    bank text NOT NULL
);
