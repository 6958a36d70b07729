-- Tags (API.md "Capture"): a memory's tags are sealed in its creation event and, in the recall view,
-- sealed under its key with a blinded term each for filtering. The view gains columns: it is rebuilt,
-- not migrated in place (ADR 0012).
DROP TABLE IF EXISTS engram_recall_stats, engram_recall_terms, engram_recall_revisions, engram_memories,
    engram_recall_tracking;
DELETE FROM engram_quarantine WHERE projection = 'recall';
