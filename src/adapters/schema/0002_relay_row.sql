-- The relay's one row comes with the schema, so a starting relay creates nothing (no table, no row)
-- before its first publish: it reads and moves the row. A relay that never ran starts at position 0;
-- an existing row keeps its position and epoch.
ALTER TABLE engram_relay ALTER COLUMN position SET DEFAULT 0;
INSERT INTO engram_relay (relay) VALUES ('main') ON CONFLICT (relay) DO NOTHING;
