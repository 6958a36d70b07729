-- Recall by meaning (ADR 0040): each answering revision's text embedded by the configured model, the
-- vector sealed under the memory's data key like its text. Kept apart from the recall view: a vector is
-- a function of a revision's text (which never changes once it answers) and the model, so a rebuild of
-- the view keeps them instead of embedding everything again. Forgetting deletes them with the key.
CREATE TABLE engram_vectors (
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    model text NOT NULL,               -- the space: model name and dimension; never two in one ranking
    company text NOT NULL,
    person text NOT NULL,
    sealed_vector bytea NOT NULL,      -- int8 components and their scale, AES-GCM under the memory's key
    cut boolean NOT NULL DEFAULT false, -- the text was longer than the model reads: its start was embedded
    embedded_at timestamptz NOT NULL,
    PRIMARY KEY (memory_id, revision, model)
);
CREATE INDEX engram_vectors_owner ON engram_vectors (company, person, model);

-- Revisions that answer and have no vector of the current model yet: the recall view's projection adds
-- them as it writes their terms; the embedding worker leases a batch, embeds it and deletes its rows.
CREATE TABLE engram_vector_backlog (
    memory_id uuid NOT NULL,
    revision int NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz,
    attempts int NOT NULL DEFAULT 0,
    PRIMARY KEY (memory_id, revision)
);
CREATE INDEX engram_vector_backlog_due ON engram_vector_backlog (queued_at);

-- A person's vectors changed (one embedded, one forgotten, an answer's valid time moved): every process
-- holding that person's vectors in memory reloads them at its next recall. Values come from one sequence,
-- so a number is never given twice, even after a rebuild.
CREATE SEQUENCE engram_vector_generation_seq;
CREATE TABLE engram_vector_generations (
    company text NOT NULL,
    person text NOT NULL,
    generation bigint NOT NULL,
    PRIMARY KEY (company, person)
);
