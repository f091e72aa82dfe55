-- One statement inserts a memory row (issue 31, decision 0026): recall.insert_memory. A turn
-- (recall.add_memory, with its owner's rights, migration 0017) and a model-written memory
-- (`store_chunk`, as recall_app inside the chunk's transaction) both go through it; the
-- parameters come from one builder (recall.db.memories.memory_params). An import batch keeps
-- its set-based INSERT ... SELECT (queries.sql, merge_import): calling this function per row
-- made an import of 5,000 turns 1.3 times slower.
--
-- Why two callers and not add_memory for both: on Citus, a chunk's transaction runs as
-- recall_app, and an owner-rights call inside it would write the same shard placement as
-- another user, which Citus refuses ("cannot perform query on placements that were modified
-- in this transaction by a different user"). This function runs with its caller's rights, so
-- each caller keeps its own role.

CREATE FUNCTION recall.insert_memory(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text
) RETURNS TABLE (memory_id uuid, memory_created_at timestamptz)
LANGUAGE sql AS $$
    INSERT INTO recall.memories AS m (
        user_id, conversation_id, user_message, ai_response, created_at, metadata,
        content_hash, embedding, embedding_model, kind
    )
    VALUES (
        p_user_id, p_conversation_id, p_user_message, p_ai_response,
        coalesce(p_created_at, now()), p_metadata, p_content_hash, p_embedding,
        p_embedding_model, p_kind
    )
    ON CONFLICT (user_id, content_hash) DO NOTHING
    RETURNING m.id, m.created_at;
$$;

-- add_memory's body, through insert_memory (CREATE OR REPLACE keeps its grants, and its
-- owner-rights settings are given again: they belong to the definition)
DO $do$
DECLARE
    vector_schema text := (
        SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'
    );
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION recall.add_memory(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text
) RETURNS TABLE (memory_id uuid, memory_created_at timestamptz, inserted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    SELECT i.memory_id, i.memory_created_at, true
    FROM recall.insert_memory(
        p_user_id, p_conversation_id, p_user_message, p_ai_response, p_created_at,
        p_metadata, p_content_hash, p_embedding, p_embedding_model, p_kind
    ) AS i;
    IF NOT FOUND THEN
        RETURN QUERY
        SELECT m.id, m.created_at, false
        FROM recall.memories AS m
        WHERE m.user_id = p_user_id AND m.content_hash = p_content_hash;
    END IF;
    PERFORM recall.swap_user_key(previous);
END;
$$
$f$, vector_schema);
    REVOKE ALL ON FUNCTION recall.insert_memory(
        text, text, text, text, timestamptz, jsonb, bytea, vector, text, text
    ) FROM PUBLIC;
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.insert_memory(
            text, text, text, text, timestamptz, jsonb, bytea, vector, text, text
        ) TO recall_app;
    END IF;
END
$do$;

-- On a Citus coordinator add_memory runs on the user's worker, and calls insert_memory there:
-- recall.distribute() now also distributes it, colocated with the memories. 0014's body is
-- kept as it is, under another name.
ALTER FUNCTION recall.distribute() RENAME TO distribute_0014;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_0014();
    f constant text :=
        'recall.insert_memory(text, text, text, text, timestamptz, jsonb, bytea, vector, text, text)';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_object
        WHERE classid = 'pg_proc'::regclass AND objid = f::regprocedure
          AND distribution_argument_index IS NOT NULL
    ) THEN
        PERFORM create_distributed_function(
            f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
    END IF;
    RETURN distributed;
END;
$fn$;
