-- When a forget was seen committed, on the database's clock (ADR 0060): a backup whose dump began
-- after that moment cannot hold the forgotten memory's key, so it never reopens the forget's
-- `backups` copy. Written by whatever records the forget after its commit; NULL for forgets recorded
-- before this migration (the 5-minute rule of ADR 0016 stays for them).
ALTER TABLE engram_forgets ADD COLUMN IF NOT EXISTS committed_by timestamptz;
ALTER TABLE engram_account_forgets ADD COLUMN IF NOT EXISTS committed_by timestamptz;
