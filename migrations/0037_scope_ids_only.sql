-- A large user's scope as ids only (issue 56): recall.search_scoped no longer reads its
-- nearest memories' texts to keep their ids; recall.search_details keeps all its rows under
-- any plan.
--
-- recall.search_scoped (a user of more than 2,000 memories, decision 0055) took the ids of the
-- user's 60 nearest from recall.search_indexed (or recall.search_exact): the rows of the
-- semantic search, each joined back to its memory for its texts, metadata and kind, all of it
-- dropped but the id. For a user of 20,468 LongMemEval turns (about 4 kB a row) the call took
-- 1.70 ms of server time at p50 with it and 1.55 without (300 calls, the two in turns with
-- their order alternating, decision 0055). recall.search_scope returns the same
-- ids in the same order from the scan alone. The nearest are one statement for both: for a user
-- with an index of their own, recall.search_nearest_sql, which recall.search_indexed_sql now
-- wraps with the texts (exactly, the scope still takes recall.search_exact's ids: the scan of
-- every row costs far more than the texts of 60). The semantic search's rows, order and values
-- are unchanged, and so are recall.search_scoped's signature, rows and values.
--
-- recall.search_details (the details of the scope's candidates) ordered its rows by
-- `m.embedding <=> p_query`, an order an HNSW index over every user's vectors can give: with
-- such an index on recall.memories and sorts disabled (the planner trap
-- tests/integration/test_exact_search.py sets), the planner read the rows through that index,
-- which returns only its nearest few, and the call lost most of the candidates (3 of 60 in the
-- test that found it). The rows are now made behind a fence (OFFSET 0) and then sorted: the
-- same rows in the same order wherever the plan was sound.
--
-- CREATE OR REPLACE keeps owners, grants and (on Citus) distribution but resets SECURITY
-- DEFINER and SET clauses: they are read before and put back after, as in migration 0032.

CREATE TEMP TABLE recall_0037_kept ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS f, p.prosecdef, coalesce(p.proconfig, '{}') AS config
FROM pg_proc AS p
WHERE p.pronamespace = 'recall'::regnamespace
  AND p.proname IN ('search_scoped', 'search_details');

-- The nearest memories of a user with an HNSW index of their own that hold something, as
-- (id, distance, created_at, content_hash), nearest first (ties to the newer memory, then by
-- content hash): $2 candidates from the index, those within distance $3 of the query $1, the
-- first $4. The user id a literal, so the planner matches their partial index. The one
-- statement of recall.search_indexed_sql (the semantic search) and recall.search_scope (a large
-- user's scope).
CREATE OR REPLACE FUNCTION recall.search_nearest_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $$
SELECT format($q$
    SELECT c.id, c.distance, c.created_at, c.content_hash
    FROM (
        SELECT id, embedding <=> $1 AS distance, created_at, content_hash
        FROM recall.memories
        WHERE user_id = %1$L AND (holds IS NULL OR holds = 'statement')
        ORDER BY embedding <=> $1
        LIMIT $2
    ) AS c
    WHERE c.distance <= $3
    ORDER BY c.distance, c.created_at DESC, c.content_hash
    LIMIT $4
$q$, p_user_id);
$$;

-- The statement recall.search_indexed runs for a user with an HNSW index of their own: their
-- nearest (recall.search_nearest_sql) with their texts; tests EXPLAIN it.
CREATE OR REPLACE FUNCTION recall.search_indexed_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $$
SELECT format($q$
    WITH best AS MATERIALIZED (%2$s)
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, best.distance, NULL::float8 AS bm25
    FROM best
    JOIN recall.memories AS m ON m.user_id = %1$L AND m.id = best.id
    ORDER BY best.distance, best.created_at DESC, best.content_hash
$q$, p_user_id, recall.search_nearest_sql(p_user_id));
$$;

-- A large user's scope: the ids of their p_scope nearest memories that hold something, at a
-- distance of at most 2, as recall.search_indexed (through their own HNSW index, p_candidates
-- wide, when p_indexed; its statement, recall.search_nearest_sql, without reading the rows again
-- for their texts) or recall.search_exact returns them. Called by recall.search_scoped, under
-- its owner's rights and row-level security key.
CREATE OR REPLACE FUNCTION recall.search_scope(
    p_user_id text, p_query vector, p_scope integer, p_candidates integer, p_indexed boolean
) RETURNS uuid[] LANGUAGE plpgsql
SET enable_sort = off
SET hnsw.ef_search = 40
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    nearest uuid[];
BEGIN
    IF p_indexed THEN
        PERFORM set_config('hnsw.ef_search', greatest(p_candidates, p_scope)::text, true);
        EXECUTE format(
            'SELECT coalesce(array_agg(best.id ORDER BY best.distance, best.created_at DESC, '
            || 'best.content_hash), ''{}''::uuid[]) FROM (%s) AS best',
            recall.search_nearest_sql(p_user_id)
        ) INTO nearest USING p_query, greatest(p_candidates, p_scope), 2.0::float8, p_scope;
    ELSE  -- every row of the user scored: their texts joined for the 60 cost little beside it
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'::uuid[]) INTO nearest
        FROM recall.search_exact(p_user_id, p_query, 2.0, p_scope)
            WITH ORDINALITY AS h(id, conversation_id, user_message, ai_response, created_at,
                                 metadata, kind, distance, bm25, ord);
    END IF;
    RETURN nearest;
END;
$$;

-- The second stage's vector side: the user's p_limit nearest memories (exact) and p_ids,
-- each with its distance, its vector when p_vectors, its length, and the turns before and after
-- it in its conversation.
CREATE OR REPLACE FUNCTION recall.search_details(
    p_user_id text, p_query vector, p_limit integer, p_ids uuid[], p_vectors boolean
) RETURNS SETOF recall.search_detail LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    WITH scored AS MATERIALIZED (
        -- the exact plan of decision 0001, when asked for: every row of the user scored
        SELECT s.id, s.embedding <=> p_query AS distance, s.created_at, s.content_hash
        FROM recall.memories AS s
        WHERE p_limit > 0 AND s.user_id = p_user_id
          AND (s.holds IS NULL OR s.holds = 'statement')
    ), nearest AS (
        SELECT b.id FROM scored AS b
        ORDER BY b.distance, b.created_at DESC, b.content_hash
        LIMIT greatest(p_limit, 0)
    ), picked AS (
        SELECT nearest.id FROM nearest
        UNION
        SELECT v.id FROM unnest(coalesce(p_ids, '{}'::uuid[])) AS v(id)
    )
    SELECT d.id, d.conversation_id, d.user_message, d.ai_response, d.created_at, d.metadata,
           d.kind, d.distance, d.embedding, d.doc_len, d.prev_id, d.prev_distance, d.next_id,
           d.next_distance
    FROM (
        SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at,
               m.metadata, m.kind, m.embedding <=> p_query AS distance,
               CASE WHEN p_vectors THEN m.embedding END AS embedding, m.doc_len,
               pv.id AS prev_id, pv.distance AS prev_distance, nx.id AS next_id,
               nx.distance AS next_distance, m.content_hash
        FROM picked
        JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = picked.id
        -- the turn before and after, in (created_at, content_hash) order: two turns of one
        -- conversation with the same time are in the same order in every database (the
        -- created_at bound keeps the scan on the (user_id, conversation_id, created_at, id)
        -- index)
        LEFT JOIN LATERAL (
            SELECT b.id, b.embedding <=> p_query AS distance
            FROM recall.memories AS b
            WHERE b.user_id = p_user_id AND b.conversation_id = m.conversation_id
              AND b.created_at <= m.created_at
              AND (b.created_at, b.content_hash) < (m.created_at, m.content_hash)
            ORDER BY b.created_at DESC, b.content_hash DESC
            LIMIT 1
        ) AS pv ON true
        LEFT JOIN LATERAL (
            SELECT a.id, a.embedding <=> p_query AS distance
            FROM recall.memories AS a
            WHERE a.user_id = p_user_id AND a.conversation_id = m.conversation_id
              AND a.created_at >= m.created_at
              AND (a.created_at, a.content_hash) > (m.created_at, m.content_hash)
            ORDER BY a.created_at, a.content_hash
            LIMIT 1
        ) AS nx ON true
        -- a fence: the order below is a sort of these rows, never an HNSW index's order
        -- (an index over every user's vectors, read in its order, returns only its nearest
        -- few and would drop the rest; migration 0037)
        OFFSET 0
    ) AS d
    ORDER BY d.distance, d.created_at DESC, d.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- A large user's second-stage candidates in one call.
CREATE OR REPLACE FUNCTION recall.search_scoped(
    p_user_id text, p_query vector, p_scope integer, p_candidates integer, p_indexed boolean,
    p_tsquery text, p_words text[], p_near integer, p_best integer, p_vectors boolean
) RETURNS SETOF recall.search_scoped_row LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    nearest uuid[];
BEGIN
    -- the scope: the ids of the nearest, as the store's own vector search orders them
    nearest := recall.search_scope(p_user_id, p_query, p_scope, p_candidates, p_indexed);
    RETURN QUERY
    WITH terms AS MATERIALIZED (
        -- in recall.search_terms' order: the statistics row, then best first by BM25
        SELECT t.*
        FROM recall.search_terms(p_user_id, p_tsquery, p_words, nearest)
            WITH ORDINALITY AS t(id, bm25, matched, term_df, memories, avgdl, place)
    ), best AS (
        SELECT t.id, t.place FROM terms AS t
        WHERE t.id IS NOT NULL
        ORDER BY t.place
        LIMIT greatest(p_best, 0)
    ), wanted AS (
        SELECT array_cat(nearest[1:greatest(p_near, 0)],
                         coalesce(array_agg(best.id ORDER BY best.place), '{}')) AS ids
        FROM best
    )
    SELECT x.part, x.near, x.id, x.bm25, x.matched, x.term_df, x.memories, x.avgdl,
           x.conversation_id, x.user_message, x.ai_response, x.created_at, x.metadata, x.kind,
           x.distance, x.embedding, x.doc_len, x.prev_id, x.prev_distance, x.next_id,
           x.next_distance
    FROM (
        SELECT CASE WHEN t.id IS NULL THEN 0 ELSE 1 END::smallint AS part, NULL::integer AS near,
               t.id, t.bm25, t.matched, t.term_df, t.memories, t.avgdl,
               NULL::text AS conversation_id, NULL::text AS user_message,
               NULL::text AS ai_response, NULL::timestamptz AS created_at,
               NULL::jsonb AS metadata, NULL::text AS kind, NULL::float8 AS distance,
               NULL::vector AS embedding, NULL::integer AS doc_len,
               NULL::uuid AS prev_id, NULL::float8 AS prev_distance, NULL::uuid AS next_id,
               NULL::float8 AS next_distance, t.place AS sort
        FROM terms AS t
        UNION ALL
        SELECT 2::smallint, array_position(nearest[1:greatest(p_near, 0)], d.id),
               d.id, NULL::float8, NULL::integer[], NULL::float8[], NULL::float8, NULL::float8,
               d.conversation_id, d.user_message, d.ai_response, d.created_at, d.metadata,
               d.kind, d.distance, d.embedding, d.doc_len, d.prev_id, d.prev_distance,
               d.next_id, d.next_distance, d.ordinality
        FROM wanted,
             recall.search_details(p_user_id, p_query, 0, wanted.ids, p_vectors)
                 WITH ORDINALITY AS d
    ) AS x
    ORDER BY x.part, x.sort;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- the function's SECURITY DEFINER and SET clauses, as they were before this file
DO $$
DECLARE
    kept record;
    setting text;
BEGIN
    FOR kept IN SELECT * FROM recall_0037_kept LOOP
        IF kept.prosecdef THEN
            EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', kept.f);
        END IF;
        FOREACH setting IN ARRAY kept.config LOOP
            EXECUTE format(
                'ALTER FUNCTION %s SET %s = %s', kept.f, split_part(setting, '=', 1),
                substr(setting, length(split_part(setting, '=', 1)) + 2)
            );
        END LOOP;
    END LOOP;
END
$$;
