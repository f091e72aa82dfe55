-- Ties go by what a rebuild keeps (issue 44).
--
-- Every search function cut its candidates with ORDER BY <score>, id LIMIT n: two memories with
-- the same score (the same BM25, which is common: the same query terms in a turn of the same
-- length; the same distance, for two copies of one text) were ordered by their ids, which are
-- random (gen_random_uuid()). Two databases holding the same memories therefore returned
-- different memories at the k-th place: 32 of 955 dev questions differed between two fresh
-- loads of the same data at b9bae67, and 0 with this file (benchmarks/same_results.py --fresh,
-- docs/benchmarks.md "same-results").
--
-- Ties now go to the newer memory (created_at DESC), then by content_hash: the sha256 of the
-- user, conversation, texts and kind (recall.memory.make_turn), unique per user, so the order
-- is total, and the same wherever and whenever the same memories were stored. Every function
-- also returns its rows in that order, best first, so the store's Python keeps the SQL's order
-- for ties (its sorts are stable and no longer look at ids): the SQL decides, once.
--
-- recall.search_terms returned its rows in no particular order (a GROUP BY); it now returns
-- the statistics row first, then the memories best first by BM25, ties as above, and the store
-- cuts the keyword side from that order.
--
-- The bodies are those of migrations 0008 (search_exact), 0010 (search_indexed_sql), 0016
-- (search_keyword), 0014 (search_terms) and 0021 (search_details, search_scoped) with only the
-- order changed. 0014's search_details with four arguments stays as it was: only a process of
-- a version before 0021 calls it. CREATE OR REPLACE keeps a function's owner, grants and (on Citus) its
-- distribution, but resets its other properties to what the statement says: each one's
-- SECURITY DEFINER and SET clauses (plan_cache_mode, search_path, ...) are read before and put
-- back after, so a plain server and a Citus coordinator each keep their own.

CREATE TEMP TABLE recall_0023_kept ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS f, p.prosecdef, coalesce(p.proconfig, '{}') AS config
FROM pg_proc AS p
WHERE p.pronamespace = 'recall'::regnamespace
  AND p.proname IN ('search_exact', 'search_indexed_sql', 'search_keyword', 'search_terms',
                    'search_details', 'search_scoped');

CREATE OR REPLACE FUNCTION recall.search_exact(
    p_user_id text, p_query vector, p_max_distance float8, p_limit integer
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    WITH best AS (
        SELECT b.id, b.distance, b.created_at, b.content_hash
        FROM (
            SELECT s.id, s.embedding <=> p_query AS distance, s.created_at, s.content_hash
            FROM recall.memories AS s
            WHERE s.user_id = p_user_id
            OFFSET 0
        ) AS b
        WHERE b.distance <= p_max_distance
        ORDER BY b.distance, b.created_at DESC, b.content_hash
        LIMIT p_limit
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, best.distance, NULL::float8 AS bm25
    FROM best
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = best.id
    ORDER BY best.distance, best.created_at DESC, best.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

CREATE OR REPLACE FUNCTION recall.search_indexed_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $fn$
SELECT format($q$
    WITH candidates AS MATERIALIZED (
        SELECT id, embedding <=> $1 AS distance, created_at, content_hash
        FROM recall.memories
        WHERE user_id = %1$L
        ORDER BY embedding <=> $1
        LIMIT $2
    ), best AS (
        SELECT id, distance, created_at, content_hash FROM candidates
        WHERE distance <= $3
        ORDER BY distance, created_at DESC, content_hash
        LIMIT $4
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, best.distance, NULL::float8 AS bm25
    FROM best
    JOIN recall.memories AS m ON m.user_id = %1$L AND m.id = best.id
    ORDER BY best.distance, best.created_at DESC, best.content_hash
$q$, p_user_id);
$fn$;

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
        SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
        FROM recall.memories AS m, q
        WHERE m.user_id = p_user_id
          AND (p_conversation_id::text IS NULL OR m.conversation_id = p_conversation_id::text)
          AND m.fts @@ q.query
    ), hits AS MATERIALIZED (
        -- a term in a memory's title (weight A) counts double, in its entities or key phrases
        -- (weight B) one and a half times
        SELECT mt.id, mt.doc_len, mt.created_at, mt.content_hash, t.tq::text AS term,
               CASE WHEN ts_filter(mt.fts, '{a}') @@ t.tq THEN 2.0
                    WHEN ts_filter(mt.fts, '{b}') @@ t.tq THEN 1.5
                    ELSE 1.0 END AS boost
        FROM matched AS mt JOIN terms AS t ON mt.fts @@ t.tq
    ), df AS (
        SELECT term, count(*)::float8 AS df FROM hits GROUP BY term
    ), scored AS (
        SELECT hits.id, hits.created_at, hits.content_hash,
               round(sum(
                   hits.boost * ln(1 + (q.n - df.df + 0.5) / (df.df + 0.5))
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * hits.doc_len / q.avgdl))
               )::numeric, 9)::float8 AS bm25
        FROM hits JOIN df USING (term) CROSS JOIN q
        GROUP BY hits.id, hits.created_at, hits.content_hash
        ORDER BY bm25 DESC, hits.created_at DESC, hits.content_hash
        LIMIT p_limit
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, m.embedding <=> p_query::vector AS distance, s.bm25
    FROM scored AS s
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
    ORDER BY s.bm25 DESC, s.created_at DESC, s.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

CREATE OR REPLACE FUNCTION recall.search_terms(
    p_user_id text, p_tsquery text, p_words text[], p_scope uuid[]
) RETURNS SETOF recall.search_term_hit LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    WITH q AS MATERIALIZED (
        SELECT CASE WHEN coalesce(p_tsquery, '') = '' THEN NULL
                    ELSE to_tsquery('english', p_tsquery) END AS query,
               greatest(coalesce(cardinality(p_scope), u.memory_count), 1)::float8 AS n,
               greatest(u.total_tokens::float8 / greatest(u.memory_count, 1), 1.0) AS avgdl
        FROM recall.users AS u
        WHERE u.user_id = p_user_id
    ), words AS MATERIALIZED (
        SELECT w.ord, x.tq
        FROM unnest(coalesce(p_words, '{}'::text[])) WITH ORDINALITY AS w(word, ord),
             LATERAL (SELECT to_tsquery('english', '''' || w.word || '''') AS tq) AS x
        WHERE numnode(x.tq) > 0
    ), terms AS MATERIALIZED (
        -- distinct lexemes, numbered from 1 in the order the query first names them
        SELECT (row_number() OVER (ORDER BY min(words.ord)))::integer AS term_no,
               (array_agg(words.tq ORDER BY words.ord))[1] AS tq
        FROM words
        GROUP BY words.tq::text
    ), matched AS MATERIALIZED (
        -- the user's memories holding a query term, or those of the scope (one branch runs)
        SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
        FROM recall.memories AS m, q
        WHERE p_scope IS NULL AND m.user_id = p_user_id AND m.fts @@ q.query
        UNION ALL
        SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
        FROM unnest(p_scope) AS s(id)
        JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
        CROSS JOIN q
        WHERE m.fts @@ q.query
    ), hits AS MATERIALIZED (
        -- a term in a memory's title (weight A) counts double, in its entities or key phrases
        -- (weight B) one and a half times, as in recall.search_keyword
        SELECT mt.id, mt.doc_len, mt.created_at, mt.content_hash, t.term_no,
               CASE WHEN ts_filter(mt.fts, '{a}') @@ t.tq THEN 2.0
                    WHEN ts_filter(mt.fts, '{b}') @@ t.tq THEN 1.5
                    ELSE 1.0 END AS boost
        FROM matched AS mt JOIN terms AS t ON mt.fts @@ t.tq
    ), df AS MATERIALIZED (
        SELECT t.term_no, count(h.id)::float8 AS df
        FROM terms AS t LEFT JOIN hits AS h USING (term_no)
        GROUP BY t.term_no
    ), rows AS (
        SELECT 0 AS part, NULL::uuid AS id, NULL::float8 AS bm25, NULL::integer[] AS matched,
               (SELECT coalesce(array_agg(df.df ORDER BY df.term_no), '{}'::float8[]) FROM df)
                   AS term_df,
               q.n AS memories, q.avgdl, NULL::timestamptz AS created_at,
               NULL::bytea AS content_hash
        FROM q
        UNION ALL
        SELECT 1, hits.id,
               -- rounded: a tie stays a tie whatever order the terms are summed in (see 0016)
               round(sum(
                   hits.boost * ln(1 + (q.n - df.df + 0.5) / (df.df + 0.5))
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * hits.doc_len / q.avgdl))
               )::numeric, 9)::float8,
               array_agg(hits.term_no ORDER BY hits.term_no),
               NULL::float8[], NULL::float8, NULL::float8, hits.created_at, hits.content_hash
        FROM hits JOIN df USING (term_no) CROSS JOIN q
        GROUP BY hits.id, hits.created_at, hits.content_hash
    )
    SELECT r.id, r.bm25, r.matched, r.term_df, r.memories, r.avgdl
    FROM rows AS r
    ORDER BY r.part, r.bm25 DESC, r.created_at DESC, r.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

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
    ), nearest AS (
        SELECT b.id FROM scored AS b
        ORDER BY b.distance, b.created_at DESC, b.content_hash
        LIMIT greatest(p_limit, 0)
    ), picked AS (
        SELECT nearest.id FROM nearest
        UNION
        SELECT v.id FROM unnest(coalesce(p_ids, '{}'::uuid[])) AS v(id)
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, m.embedding <=> p_query, CASE WHEN p_vectors THEN m.embedding END, m.doc_len,
           pv.id, pv.distance, nx.id, nx.distance
    FROM picked
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = picked.id
    -- the turn before and after, in (created_at, content_hash) order: two turns of one
    -- conversation with the same time are in the same order in every database (the created_at
    -- bound keeps the scan on the (user_id, conversation_id, created_at, id) index)
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
    ORDER BY m.embedding <=> p_query, m.created_at DESC, m.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

CREATE OR REPLACE FUNCTION recall.search_scoped(
    p_user_id text, p_query vector, p_scope integer, p_candidates integer, p_indexed boolean,
    p_tsquery text, p_words text[], p_near integer, p_best integer, p_vectors boolean
) RETURNS SETOF recall.search_scoped_row LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    nearest uuid[];
BEGIN
    -- the scope: as the store's own vector search asks for it (max distance 2: every row)
    IF p_indexed THEN
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'::uuid[]) INTO nearest
        FROM recall.search_indexed(p_user_id, p_query, 2.0, p_scope, p_candidates)
            WITH ORDINALITY AS h(id, conversation_id, user_message, ai_response, created_at,
                                 metadata, kind, distance, bm25, ord);
    ELSE
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'::uuid[]) INTO nearest
        FROM recall.search_exact(p_user_id, p_query, 2.0, p_scope)
            WITH ORDINALITY AS h(id, conversation_id, user_message, ai_response, created_at,
                                 metadata, kind, distance, bm25, ord);
    END IF;
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

-- each function's SECURITY DEFINER and SET clauses, as they were before this file
DO $$
DECLARE
    kept record;
    setting text;
BEGIN
    FOR kept IN SELECT * FROM recall_0023_kept LOOP
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
