-- Master-key rotation (ADR 0030). Each data key records which master key wrapped it, by that key's id
-- (a keyed hash, never the key), so a rotation re-wraps in batches, resumes after a crash and counts
-- what is left. NULL: wrapped before ids were recorded, by the one master key in use then.
ALTER TABLE engram_data_keys ADD COLUMN master_id text;
CREATE INDEX engram_data_keys_master_id ON engram_data_keys (master_id);

-- The secret search terms and keyed ids are derived from, wrapped like a data key. It outlives
-- rotations: blinded terms, links and the ids of remembered and imported memories stay valid.
-- One row; a database upgraded to this version gets the old master key itself (the old derivation).
CREATE TABLE engram_derivation_root (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    wrapped bytea NOT NULL,
    master_id text NOT NULL
);
