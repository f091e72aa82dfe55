-- A turn's write in one call with its repeat lookup (issue 37, decision 0029):
-- recall.add_turn. Linking repeated turns (RECALL_LINK_REPEATED_TURNS) made each add_turn two
-- round trips: a search of the user's nearest memories, then recall.add_memory. This function
-- does both in one call, with its owner's rights like add_memory (migration 0017):
--
-- 1. the same turn again (the user's content hash, a retry): that memory, `inserted` false;
-- 2. else, when p_max_distance is given, the user's p_nearest nearest memories within it
--    (recall.search_exact, or recall.search_indexed for a user with an HNSW index of their
--    own, as a search would), those of the turn's kind, `inserted` NULL: nothing is stored,
--    the caller compares their words (recall.search.provenance.near_duplicate, which SQL does
--    not hold) and then counts the repeat or stores the turn with recall.add_memory;
-- 3. else the turn stored through recall.add_memory, `inserted` true (or false when a
--    concurrent write stored it first).
--
-- A turn with no memory that near (the common case: 0.95 cosine by default) is stored in one
-- round trip; the second is paid only when a neighbour is that near.

DO $do$
DECLARE
    vector_schema text := (
        SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'
    );
BEGIN
    EXECUTE format($f$
CREATE FUNCTION recall.add_turn(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text, p_max_distance float8, p_nearest integer,
    p_candidates integer
) RETURNS TABLE (
    r_id uuid, r_created_at timestamptz, r_inserted boolean, r_conversation_id text,
    r_user_message text, r_ai_response text, r_metadata jsonb, r_kind text
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    own_index text;
BEGIN
    RETURN QUERY
    SELECT m.id, m.created_at, false, m.conversation_id, m.user_message, m.ai_response,
           m.metadata, m.kind
    FROM recall.memories AS m
    WHERE m.user_id = p_user_id AND m.content_hash = p_content_hash;
    IF FOUND THEN
        PERFORM recall.swap_user_key(previous);
        RETURN;
    END IF;
    IF p_max_distance IS NOT NULL THEN
        SELECT u.hnsw_index INTO own_index FROM recall.users AS u WHERE u.user_id = p_user_id;
        IF own_index IS NULL THEN
            RETURN QUERY
            SELECT h.id, h.created_at, NULL::boolean, h.conversation_id, h.user_message,
                   h.ai_response, h.metadata, h.kind
            FROM recall.search_exact(p_user_id, p_embedding, p_max_distance, p_nearest) AS h
            WHERE h.kind = p_kind;
        ELSE
            RETURN QUERY
            SELECT h.id, h.created_at, NULL::boolean, h.conversation_id, h.user_message,
                   h.ai_response, h.metadata, h.kind
            FROM recall.search_indexed(
                p_user_id, p_embedding, p_max_distance, p_nearest, p_candidates
            ) AS h
            WHERE h.kind = p_kind;
        END IF;
        IF FOUND THEN
            PERFORM recall.swap_user_key(previous);
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT a.memory_id, a.memory_created_at, a.inserted, NULL::text, NULL::text, NULL::text,
           NULL::jsonb, NULL::text
    FROM recall.add_memory(
        p_user_id, p_conversation_id, p_user_message, p_ai_response, p_created_at,
        p_metadata, p_content_hash, p_embedding, p_embedding_model, p_kind
    ) AS a;
    PERFORM recall.swap_user_key(previous);
END;
$$
$f$, vector_schema);
    REVOKE ALL ON FUNCTION recall.add_turn(
        text, text, text, text, timestamptz, jsonb, bytea, vector, text, text, float8, integer,
        integer
    ) FROM PUBLIC;
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.add_turn(
            text, text, text, text, timestamptz, jsonb, bytea, vector, text, text, float8,
            integer, integer
        ) TO recall_app;
    END IF;
END
$do$;

-- On a Citus coordinator add_turn runs on the user's worker, where it calls add_memory,
-- search_exact and search_indexed (distributed by 0017's and 0018's distribute()):
-- recall.distribute() now also distributes it, colocated with the memories. 0018's body is
-- kept as it is, under another name.
ALTER FUNCTION recall.distribute() RENAME TO distribute_0018;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_0018();
    f constant text :=
        'recall.add_turn(text, text, text, text, timestamptz, jsonb, bytea, vector, text, text,'
        ' float8, integer, integer)';
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
