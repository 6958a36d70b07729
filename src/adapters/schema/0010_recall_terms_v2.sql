-- Recall ranking, second version (ADR 0023): question and function words are no longer terms, Chinese
-- runs also give single characters, digits no longer glue to Chinese ("我2025年" was one term),
-- irregular English forms and prefixes give looser terms, a memory carries the day it was said, and
-- the recall view keeps when each memory was said and whether it asks a question. The view's terms
-- and columns change: it is rebuilt, not migrated in place (ADR 0012).
DROP TABLE IF EXISTS engram_recall_stats, engram_recall_terms, engram_recall_revisions, engram_memories,
    engram_recall_tracking;
DELETE FROM engram_quarantine WHERE projection = 'recall';
