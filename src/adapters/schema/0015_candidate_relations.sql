-- Candidates people are glad to review (ADR 0041): the review queue's rows gain the sentence or two
-- around the quote (sealed under the memory's key like its text) and the relation to a confirmed memory
-- (duplicate or update: ids only). The view gains columns: it is rebuilt, not migrated in place (ADR 0012).
DROP TABLE IF EXISTS engram_candidates, engram_review_tracking;
DELETE FROM engram_quarantine WHERE projection = 'review';
