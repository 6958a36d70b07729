-- Each revision keeps its own evidence (a correction's is the correction, with its own source), so
-- recall answers a revision with its own quote, never the replaced text's. The recall view gains a
-- column: it is rebuilt, not migrated in place (ADR 0012).
DROP TABLE IF EXISTS engram_recall_stats, engram_recall_terms, engram_recall_revisions, engram_memories,
    engram_recall_tracking;
DELETE FROM engram_quarantine WHERE projection = 'recall';
