-- A candidate's valid time, resolved against its message's time ("next Thursday", 上个月; ADR 0041): the
-- review queue's rows gain valid_from and valid_to (timestamps, no text). The view gains columns: it is
-- rebuilt, not migrated in place (ADR 0012).
DROP TABLE IF EXISTS engram_candidates, engram_review_tracking;
DELETE FROM engram_quarantine WHERE projection = 'review';
