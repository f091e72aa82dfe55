-- The indexed search (decision 0001: a user with an HNSW index of their own) as one call,
-- like the exact and keyword searches of migration 0005 (decision 0012).
--
-- The store ran it as BEGIN, the row-level security key, a savepoint, the HNSW candidate
-- count and `enable_sort = off`, the search, RELEASE and COMMIT: seven round trips around a
-- search of the users with the longest histories. recall.search_indexed does the same work in
-- one statement.
--
-- The statement is built for one user: the user id is a literal (format's %L quotes it), so
-- the planner matches it to that user's partial index `WHERE user_id = '<user>'`, as the
-- unprepared statement did before; a generic plan with a parameter cannot use a partial
-- index. It is planned on every call, as before. recall.search_indexed_sql returns it, so that
-- tests can EXPLAIN exactly the statement the search runs.

CREATE FUNCTION recall.search_indexed_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $fn$
SELECT format($q$
    WITH candidates AS MATERIALIZED (
        SELECT id, embedding <=> $1 AS distance
        FROM recall.memories
        WHERE user_id = %1$L
        ORDER BY embedding <=> $1
        LIMIT $2
    ), best AS (
        SELECT id, distance FROM candidates
        WHERE distance <= $3
        ORDER BY distance, id
        LIMIT $4
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, best.distance, NULL::float8 AS bm25
    FROM best
    JOIN recall.memories AS m ON m.user_id = %1$L AND m.id = best.id
    ORDER BY best.distance, best.id
$q$, p_user_id);
$fn$;

-- p_candidates is the HNSW candidate list (hnsw.ef_search), at least p_limit. The SET clauses
-- put both settings back when the function returns, so a caller's transaction keeps its own:
-- `enable_sort = off` leaves the planner one way to order by distance, the user's HNSW index,
-- whatever its cost estimates say; the ef_search set inside is restored the same way.
CREATE FUNCTION recall.search_indexed(
    p_user_id text, p_query vector, p_max_distance float8, p_limit integer,
    p_candidates integer
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql
SET enable_sort = off
SET hnsw.ef_search = 40
AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    PERFORM set_config('hnsw.ef_search', greatest(p_candidates, p_limit)::text, true);
    RETURN QUERY EXECUTE recall.search_indexed_sql(p_user_id)
        USING p_query, greatest(p_candidates, p_limit), p_max_distance, p_limit;
    PERFORM recall.swap_user_key(previous);
END;
$$;
