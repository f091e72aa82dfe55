-- BM25 ties are ties wherever rows sit (issue 30's Citus flake).
--
-- Two memories holding the same query terms with the same length have the same BM25, and ties
-- are broken by id. But the score is a floating-point sum over the memory's terms, and the
-- order in which those terms arrive at sum() follows the order rows are read and sorted in
-- (a sort is not stable), so the same sum could come out one unit in the last place apart
-- depending on where rows physically sit: during a Citus shard move, one search in 28,176
-- ranked two tied memories the other way round. The sum is now rounded to nine decimals, far
-- finer than any real difference in BM25 and far coarser than the rounding noise, so equal
-- scores are equal and the id decides. recall.search_terms (migration 0014) rounds the same
-- way.
--
-- recall.search_keyword's body is 0005's with that one change. CREATE OR REPLACE keeps its
-- grants and, on Citus, its distribution; its plan setting is set again as 0008 (plain) or
-- recall.distribute() (Citus) left it.

CREATE OR REPLACE FUNCTION recall.search_keyword(
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
               round(sum(
                   hits.boost * ln(1 + (q.n - df.df + 0.5) / (df.df + 0.5))
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * hits.doc_len / q.avgdl))
               )::numeric, 9)::float8 AS bm25
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
    ALTER FUNCTION recall.search_keyword(text, text, text[], vector, integer, text)
        SET plan_cache_mode = force_generic_plan;
    -- pg_dist_partition exists only with citus: asked in a statement of its own
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        IF EXISTS (
            SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
        ) THEN
            ALTER FUNCTION recall.search_keyword(text, text, text[], vector, integer, text)
                SET plan_cache_mode = force_custom_plan;
        END IF;
    END IF;
END
$$;
