-- The purge tracker's tables (projections/purge.py). Each copy's evidence is reported by whatever
-- purged it; Hindsight's report is not rebuilt from events, so these tables are durable, not a view.
-- Databases from before this migration made them with the recall view: IF NOT EXISTS adopts them.
CREATE TABLE IF NOT EXISTS engram_forgets (
    forget_id text PRIMARY KEY,
    memory_id uuid NOT NULL,
    company text NOT NULL,
    person text NOT NULL,
    requested_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS engram_purge_copies (
    forget_id text NOT NULL,
    copy text NOT NULL,
    state text NOT NULL,
    evidence text,
    purged_at timestamptz,
    PRIMARY KEY (forget_id, copy)
);
