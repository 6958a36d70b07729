-- A recall search reads its terms' rows from the key's index alone: the key carries the rest of each
-- row (INCLUDE), so the search no longer visits the table for each posting (ADR 0035). The key is
-- rebuilt in place, under the table's lock for as long as building the index takes; the view keeps
-- its rows and position (nothing to replay). A database whose recall view does not exist yet gets
-- the new key from the view's own DDL.
DO $$
DECLARE
    key_name text;
BEGIN
    SELECT c.conname INTO key_name
    FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
    WHERE t.relname = 'engram_recall_terms' AND t.relnamespace = current_schema()::regnamespace AND c.contype = 'p';
    IF key_name IS NOT NULL THEN
        EXECUTE format('ALTER TABLE engram_recall_terms DROP CONSTRAINT %I, ADD PRIMARY KEY '
                       '(company, person, term, memory_id, revision) '
                       'INCLUDE (tf, doc_len, visibility, team, source_blind, answer_from, answer_to)', key_name);
    END IF;
END
$$;
