-- Every tombstone (forget, expiry, rejection, receipt clearing, source revocation) is written here in
-- the same transaction as its event and its key's destruction, then published to the journal (the
-- file in ENGRAM_TOMBSTONE_DIR, or the Kafka topic engram.tombstones). Content-free: ids and times.
-- The fence reads this table and the journal; a restore of the database cannot withdraw what the
-- journal keeps, and a journal that lost records (a broker's data) gets them again from here.
CREATE TABLE IF NOT EXISTS engram_tombstones (
    seq bigserial PRIMARY KEY,
    key text NOT NULL UNIQUE,          -- kind:aggregate[:source:person], the journal's compaction key
    kind text NOT NULL,
    aggregate_id text NOT NULL,
    company text NOT NULL,
    record jsonb NOT NULL,
    recorded_at timestamptz NOT NULL,
    published_at timestamptz
);
CREATE INDEX IF NOT EXISTS engram_tombstones_unpublished ON engram_tombstones (seq) WHERE published_at IS NULL;
