-- Account forgets (service/forgetting.py, projections/purge.py `AccountForgets`): one request that forgets
-- everything a person holds in a company, member by member, each member through the single-memory forget.
-- Who asked and which memory forgets belong to it cannot be rebuilt from events, so these are durable.
CREATE TABLE IF NOT EXISTS engram_account_forgets (
    forget_id text PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    requested_by text NOT NULL,        -- the person, or the admin or operator who asked
    by_admin boolean NOT NULL,
    requested_at timestamptz NOT NULL, -- members: the person's memories created up to this time
    finished_at timestamptz,           -- every member forgotten, every receipt cleared, settings reset
    receipts_cleared int NOT NULL DEFAULT 0,
    lease_until timestamptz            -- one worker (a request or a sweeper) advances it at a time
);
-- At most one unfinished account forget per person: asking again continues it.
CREATE UNIQUE INDEX IF NOT EXISTS engram_account_forgets_open
    ON engram_account_forgets (company, person) WHERE finished_at IS NULL;
CREATE INDEX IF NOT EXISTS engram_account_forgets_owner
    ON engram_account_forgets (company, person, requested_at DESC, forget_id DESC);
CREATE INDEX IF NOT EXISTS engram_account_forgets_requester
    ON engram_account_forgets (company, requested_by, requested_at DESC, forget_id DESC);

CREATE TABLE IF NOT EXISTS engram_account_forget_members (
    account_forget_id text NOT NULL REFERENCES engram_account_forgets (forget_id),
    memory_id uuid NOT NULL,
    forget_id text NOT NULL,           -- the member's own forget (engram_forgets, engram_purge_copies)
    earlier boolean NOT NULL,          -- already forgotten before the account forget reached it
    PRIMARY KEY (account_forget_id, memory_id)
);
CREATE INDEX IF NOT EXISTS engram_account_forget_members_forget ON engram_account_forget_members (forget_id);

-- GET /v1/forgets lists a person's forgets newest first.
CREATE INDEX IF NOT EXISTS engram_forgets_owner ON engram_forgets (company, person, requested_at DESC, forget_id DESC);
