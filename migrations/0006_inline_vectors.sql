-- Keep each memory's vector inside its row (decision 0008).
--
-- pgvector gives `vector` the storage EXTERNAL: once a row passes PostgreSQL's ~2 kB TOAST
-- threshold, the vector (its largest value) is moved out of line. A 384-dimension vector is
-- 1,544 bytes, so a memory with a few hundred characters of text crosses the threshold, and the
-- exact search then fetched every vector of the user from the TOAST table: one extra index
-- lookup per row. On the LoCoMo memories 95% of the vectors were out of line, and a 349-memory
-- user's search took twice as long (1.39 vs 0.71 ms, pgbench). MAIN keeps the vector in the
-- row and moves the texts out of line first; a vector too large for a page (thousands of
-- dimensions) still goes out of line as a last resort, so no insert can fail because of it.
-- recall.migrate.bind_embedding_space and recall.reembed set MAIN again whenever they give the
-- column a new type, which resets the storage to the type's default.

ALTER TABLE recall.memories ALTER COLUMN embedding SET STORAGE MAIN;

DO $$
BEGIN
    -- a reembed interrupted before this migration: its new column gets the same storage
    IF EXISTS (
        SELECT 1 FROM pg_attribute
        WHERE attrelid = 'recall.memories'::regclass AND attname = 'embedding_next'
          AND NOT attisdropped
    ) THEN
        ALTER TABLE recall.memories ALTER COLUMN embedding_next SET STORAGE MAIN;
    END IF;
END
$$;

-- SET STORAGE applies to rows written from now on: migration 0007 rewrites the rows stored
-- before, together with its own change of the same kind.
