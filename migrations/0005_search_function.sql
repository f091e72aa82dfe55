-- The exact per-user search as one function call: it sets the row-level security key
-- (recall.user_id) and runs the search in the same statement, so a search is one round trip
-- instead of four (BEGIN, set the key, search, COMMIT). Measured in docs/decisions/0007.
-- The query is the exact plan of decision 0001: a MATERIALIZED scan of this user's rows
-- (btree on user_id) scores every one, so no index can drop a result; texts are fetched for
-- the winners only. SECURITY INVOKER (the default): the caller's row-level security applies.
-- The previous key is put back, so a caller's own transaction keeps its scope.

CREATE FUNCTION recall.search_exact(
    p_user_id text, p_query vector, p_max_distance float8, p_limit integer
) RETURNS TABLE (
    id uuid, conversation_id text, user_message text, ai_response text,
    created_at timestamptz, metadata jsonb, kind text, distance float8, bm25 float8
) LANGUAGE plpgsql AS $$
DECLARE
    previous text := current_setting('recall.user_id', true);
BEGIN
    PERFORM set_config('recall.user_id', p_user_id, true);
    RETURN QUERY
    WITH scored AS MATERIALIZED (
        SELECT s.id, s.embedding <=> p_query AS distance
        FROM recall.memories AS s
        WHERE s.user_id = p_user_id
    ), best AS (
        SELECT b.id, b.distance FROM scored AS b
        WHERE b.distance <= p_max_distance
        ORDER BY b.distance, b.id
        LIMIT p_limit
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, best.distance, NULL::float8 AS bm25
    FROM best
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = best.id
    ORDER BY best.distance, best.id;
    PERFORM set_config('recall.user_id', coalesce(previous, ''), true);
END;
$$;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.search_exact(text, vector, float8, integer)
            TO recall_app;
    END IF;
END
$$;
