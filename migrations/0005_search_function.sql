-- The per-user searches (exact vector, and BM25 keyword) as one function call each: each sets
-- the row-level security key (recall.user_id) and runs its search in the same statement, so a
-- search is one round trip instead of four (BEGIN, set the key, search, COMMIT). Measured in
-- docs/decisions/0007. SECURITY INVOKER (the default): the caller's row-level security
-- applies. The previous key is put back, so a caller's own transaction keeps its scope.

-- Set the row-level security key for the rest of this transaction; return the one it replaces.
-- (set_config treats NULL as the empty key, which matches no row.)
CREATE FUNCTION recall.swap_user_key(p_user_id text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    previous text := current_setting('recall.user_id', true);
BEGIN
    PERFORM set_config('recall.user_id', coalesce(p_user_id, ''), true);
    RETURN previous;
END;
$$;

-- One row of a search result, the shape the store reads (recall.retrieval.row_memory).
CREATE TYPE recall.search_hit AS (
    id uuid, conversation_id text, user_message text, ai_response text,
    created_at timestamptz, metadata jsonb, kind text, distance float8, bm25 float8
);

-- The exact plan of decision 0001: a MATERIALIZED scan of this user's rows (btree on user_id)
-- scores every one, so no index can drop a result; texts are fetched for the winners only.
CREATE FUNCTION recall.search_exact(
    p_user_id text, p_query vector, p_max_distance float8, p_limit integer
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
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
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- BM25 over this user's memories (optionally one conversation), computed exactly in SQL
-- with binary term frequency (memories are short: a term rarely repeats in one):
-- df is counted among the matching rows, which hold every row containing a query term;
-- N and the average length come from recall.users. k1 = 1.2, b = 0.75.
-- p_words are sanitized words (letters and digits only, recall.keywords), so quoting them
-- for to_tsquery is safe. p_query may be NULL (no cosine); p_conversation_id may be NULL.
-- The same one-call shape as search_exact: the key is set inside, the caller's put back.
CREATE FUNCTION recall.search_keyword(
    p_user_id text, p_tsquery text, p_words text[], p_query vector, p_limit integer,
    p_conversation_id text
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    WITH q AS MATERIALIZED (
        SELECT to_tsquery('english', p_tsquery) AS query,
               greatest(u.memory_count, 1)::float8 AS n,
               greatest(u.total_tokens::float8 / greatest(u.memory_count, 1), 1.0) AS avgdl
        FROM recall.users AS u
        WHERE u.user_id = p_user_id
    ), terms AS MATERIALIZED (
        SELECT DISTINCT ON (tq::text) tq
        FROM unnest(p_words::text[]) AS w,
             LATERAL (SELECT to_tsquery('english', '''' || w || '''') AS tq) AS x
        WHERE numnode(tq) > 0
    ), matched AS MATERIALIZED (
        SELECT m.id, m.fts, m.doc_len
        FROM recall.memories AS m, q
        WHERE m.user_id = p_user_id
          AND (p_conversation_id::text IS NULL OR m.conversation_id = p_conversation_id::text)
          AND m.fts @@ q.query
    ), hits AS MATERIALIZED (
        -- a term in a memory's title (weight A) counts double, in its entities or key phrases
        -- (weight B) one and a half times
        SELECT mt.id, mt.doc_len, t.tq::text AS term,
               CASE WHEN ts_filter(mt.fts, '{a}') @@ t.tq THEN 2.0
                    WHEN ts_filter(mt.fts, '{b}') @@ t.tq THEN 1.5
                    ELSE 1.0 END AS boost
        FROM matched AS mt JOIN terms AS t ON mt.fts @@ t.tq
    ), df AS (
        SELECT term, count(*)::float8 AS df FROM hits GROUP BY term
    ), scored AS (
        SELECT hits.id,
               sum(
                   hits.boost * ln(1 + (q.n - df.df + 0.5) / (df.df + 0.5))
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * hits.doc_len / q.avgdl))
               ) AS bm25
        FROM hits JOIN df USING (term) CROSS JOIN q
        GROUP BY hits.id
        ORDER BY bm25 DESC, hits.id
        LIMIT p_limit
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, m.embedding <=> p_query::vector AS distance, s.bm25
    FROM scored AS s
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
    ORDER BY s.bm25 DESC, s.id;
    PERFORM recall.swap_user_key(previous);
END;
$$;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.swap_user_key(text) TO recall_app;
        GRANT EXECUTE ON FUNCTION recall.search_exact(text, vector, float8, integer)
            TO recall_app;
        GRANT EXECUTE ON FUNCTION
            recall.search_keyword(text, text, text[], vector, integer, text) TO recall_app;
    END IF;
END
$$;
