-- Baseline: the tables events cannot rebuild, as Engram created them at every start before numbered
-- migrations. IF NOT EXISTS (here only) adopts a database made by that code: its tables are kept as
-- they are, and from now on only numbered migrations change them.

-- Per-memory data keys, wrapped by the master key; deleting a row is what forgetting means.
CREATE TABLE IF NOT EXISTS engram_data_keys (
    key_id uuid PRIMARY KEY,
    company text NOT NULL,
    wrapped bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 50);
CREATE TABLE IF NOT EXISTS engram_destroyed_keys (
    key_id uuid PRIMARY KEY,
    company text NOT NULL,
    destroyed_at timestamptz NOT NULL
);

-- Daily model budgets, their reservations and the usage ledger (operational counters, not events).
CREATE TABLE IF NOT EXISTS engram_budget_days (
    company text NOT NULL,
    person text NOT NULL,  -- '' is the company's own row
    day date NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    calls int NOT NULL DEFAULT 0,
    PRIMARY KEY (company, person, day)
);
CREATE TABLE IF NOT EXISTS engram_budget_reservations (
    reservation_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    day date NOT NULL,
    tokens_reserved bigint NOT NULL,
    tokens_charged bigint,
    settled boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    settled_at timestamptz
);
CREATE TABLE IF NOT EXISTS engram_usage_ledger (
    entry_id uuid PRIMARY KEY,
    company text NOT NULL,
    person text NOT NULL,
    day date NOT NULL,
    extractor text NOT NULL,
    model text NOT NULL,
    attempts int NOT NULL,
    tokens_reserved bigint NOT NULL,
    prompt_tokens bigint,
    completion_tokens bigint,
    tokens_charged bigint NOT NULL,
    proposals int NOT NULL,
    accepted int NOT NULL,
    outcome text NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS engram_usage_ledger_day ON engram_usage_ledger (company, day);

-- Distributed mode: how far the relay has published, and its epoch.
CREATE TABLE IF NOT EXISTS engram_relay (
    relay text PRIMARY KEY,
    position bigint NOT NULL,
    epoch int NOT NULL DEFAULT 1
);

-- The learning worker's leases on queued receipts (coordination between workers).
CREATE TABLE IF NOT EXISTS engram_inbox_leases (
    receipt_uuid uuid PRIMARY KEY,
    lease_until timestamptz,
    not_before timestamptz,
    attempts int NOT NULL DEFAULT 0,
    waiting_for text
);

-- Projector workers' positions per Kafka partition, and the events a projection set aside.
CREATE TABLE IF NOT EXISTS engram_partition_tracking (
    projection text NOT NULL,
    partition int NOT NULL,
    notification_id bigint NOT NULL,
    PRIMARY KEY (projection, partition)
);
CREATE TABLE IF NOT EXISTS engram_quarantine (
    projection text NOT NULL,
    notification_id bigint NOT NULL,
    originator_id uuid,
    topic text NOT NULL,
    error text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection, notification_id)
);
