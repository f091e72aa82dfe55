-- A large user's scope as ids only (issue 56): recall.search_scoped no longer reads its
-- nearest memories' texts to keep their ids; recall.search_details keeps all its rows under
-- any plan.
--
-- recall.search_scoped (a user of more than 2,000 memories, decision 0055) took the ids of the
-- user's 60 nearest from recall.search_indexed (or recall.search_exact): the rows of the
-- semantic search, each joined back to its memory for its texts, metadata and kind, all of it
-- dropped but the id. For a user of 20,468 LongMemEval turns (about 4 kB a row) that was about
-- 0.6 ms of the call's 2.1 (server, medians of 300 calls). recall.search_scope returns the same
-- ids in the same order (the same candidates, the same distance bound of 2, the same ties) from
-- the scan alone; recall.search_scope_sql is its statement for a user with an index of their
-- own, as recall.search_indexed_sql is recall.search_indexed's. recall.search_scoped's
-- signature, rows and values are unchanged.
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

-- The statement recall.search_scope runs for a user with an HNSW index of their own:
-- recall.search_indexed_sql's nearest, their ids only, in its order (the user id a literal, so
-- the planner matches their partial index; a test counts its scans of that index).
CREATE OR REPLACE FUNCTION recall.search_scope_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $$
SELECT format($q$
    SELECT coalesce(array_agg(best.id ORDER BY best.distance, best.created_at DESC,
                                              best.content_hash), '{}'::uuid[])
    FROM (
        SELECT c.id, c.distance, c.created_at, c.content_hash
        FROM (
            SELECT id, embedding <=> $1 AS distance, created_at, content_hash
            FROM recall.memories
            WHERE user_id = %1$L AND (holds IS NULL OR holds = 'statement')
            ORDER BY embedding <=> $1
            LIMIT $2
        ) AS c
        WHERE c.distance <= 2.0
        ORDER BY c.distance, c.created_at DESC, c.content_hash
        LIMIT $3
    ) AS best
$q$, p_user_id);
$$;

-- A large user's scope: the ids of their p_scope nearest memories that hold something, nearest
-- first (ties to the newer, then by content hash), through their own HNSW index (p_indexed,
-- p_candidates wide) or exactly: the ids recall.search_indexed and recall.search_exact return
-- at a distance of at most 2, without reading the rows again for their texts. Called by
-- recall.search_scoped, under its owner's rights and row-level security key.
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
        EXECUTE recall.search_scope_sql(p_user_id) INTO nearest
            USING p_query, greatest(p_candidates, p_scope), p_scope;
    ELSE
        -- the exact plan of decision 0001: every row of the user scored, then sorted (no
        -- index gives this order)
        SELECT coalesce(array_agg(best.id ORDER BY best.distance, best.created_at DESC,
                                                   best.content_hash), '{}'::uuid[])
        INTO nearest
        FROM (
            SELECT b.id, b.distance, b.created_at, b.content_hash
            FROM (
                SELECT s.id, s.embedding <=> p_query AS distance, s.created_at, s.content_hash
                FROM recall.memories AS s
                WHERE s.user_id = p_user_id AND (s.holds IS NULL OR s.holds = 'statement')
                OFFSET 0
            ) AS b
            WHERE b.distance <= 2.0
            ORDER BY b.distance, b.created_at DESC, b.content_hash
            LIMIT p_scope
        ) AS best;
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
