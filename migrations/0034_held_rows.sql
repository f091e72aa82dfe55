-- The rows a search holds between searches (issue 56): recall.held_versions and
-- recall.held_rows.
--
-- The default path's call after the query's embedding (recall.search_details: the user's
-- nearest memories by exact cosine, the keyword side's, and their neighbours) is done in the
-- process instead, over the user's rows held there (recall.store.held). These functions are how
-- the process keeps them: while the query is embedded it reads the user's stamp (and, when it
-- changed, their rows' versions), and then only the rows new or changed.
CREATE TYPE recall.held_row AS (
    id uuid, version bigint, conversation_id text, user_message text, ai_response text,
    created_at timestamptz, metadata text, kind text, embedding vector, doc_len integer,
    holds text, content_hash bytea
);

-- The user's memories as they stand: a stamp, the xor of a 64-bit hash of each memory's id
-- seeded with its row version (xmin: it changes with every insert and update of the row; a
-- deleted row is gone), so that any write to them changes it; and, unless the stamp is p_stamp
-- (the one the caller's rows were read under), each memory's id and row version. A search
-- reads this while the query is embedded, and reads rows only when the stamp changed.
CREATE FUNCTION recall.held_versions(p_user_id text, p_stamp bigint)
RETURNS TABLE (stamp bigint, ids uuid[], versions bigint[]) LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    now_stamp bigint;
BEGIN
    -- each memory's id hashed with its row version as the seed
    SELECT coalesce(bit_xor(uuid_hash_extended(m.id, m.xmin::text::bigint)), 0) INTO now_stamp
    FROM recall.memories AS m
    WHERE m.user_id = p_user_id;
    IF now_stamp IS NOT DISTINCT FROM p_stamp THEN
        RETURN QUERY SELECT now_stamp, NULL::uuid[], NULL::bigint[];
    ELSE
        -- (a write between the two reads makes these newer than the stamp: the next call's
        -- stamp differs, and the caller compares the versions again)
        RETURN QUERY
        SELECT now_stamp, coalesce(array_agg(m.id), '{}'),
               coalesce(array_agg(m.xmin::text::bigint), '{}')
        FROM recall.memories AS m
        WHERE m.user_id = p_user_id;
    END IF;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- The user's memories of p_ids (every one when NULL), with the columns a search reads.
CREATE FUNCTION recall.held_rows(p_user_id text, p_ids uuid[])
RETURNS SETOF recall.held_row LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    SELECT m.id, m.xmin::text::bigint, m.conversation_id, m.user_message, m.ai_response,
           m.created_at, m.metadata::text, m.kind, m.embedding, m.doc_len, m.holds,
           m.content_hash
    FROM recall.memories AS m
    WHERE m.user_id = p_user_id AND (p_ids IS NULL OR m.id = ANY(p_ids));
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- as migration 0021 made the other per-user calls: a generic plan, the owner's rights, a
-- pinned search_path, EXECUTE for recall_app (and the owner) only
DO $$
DECLARE
    f text;
    vector_schema text := (
        SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'
    );
BEGIN
    FOREACH f IN ARRAY ARRAY['recall.held_versions(text, bigint)', 'recall.held_rows(text, uuid[])'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
        EXECUTE format(
            'ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
            f, vector_schema
        );
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        IF to_regrole('recall_app') IS NOT NULL THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO recall_app', f);
        END IF;
    END LOOP;
END
$$;

-- On a Citus coordinator both run on the user's worker, like the other per-user functions:
-- recall.distribute() now also distributes them, colocated with the memories. The body it had
-- before this migration is kept as it is, under a name of this migration's own.
ALTER FUNCTION recall.distribute() RENAME TO distribute_before_0034;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_before_0034();
    f text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        RETURN distributed;
    END IF;
    FOREACH f IN ARRAY ARRAY['recall.held_versions(text, bigint)', 'recall.held_rows(text, uuid[])'] LOOP
        IF NOT EXISTS (
            SELECT 1 FROM pg_dist_object
            WHERE classid = 'pg_proc'::regclass AND objid = f::regprocedure
              AND distribution_argument_index IS NOT NULL
        ) THEN
            EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
            PERFORM create_distributed_function(
                f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
        END IF;
    END LOOP;
    RETURN distributed;
END;
$fn$;
