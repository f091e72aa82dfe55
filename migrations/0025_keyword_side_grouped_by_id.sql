-- The keyword side groups by the memory's id alone (issue 46).
--
-- recall.search_terms (migration 0023's body) grouped each memory's term hits by
-- (id, created_at, content_hash) to carry the two columns its order breaks ties with. Grouped
-- by the id alone, with those two read by aggregates (one value per id: max(created_at), and
-- the first content_hash of an array, as max(bytea) is not in every PostgreSQL the tests run),
-- it returns the same rows in the same order and costs less: LoCoMo's 760 dev questions, each
-- asked of its own user (about 300 memories), the two bodies taking turns in one run, the call
-- took 2.67 ms p50 / 4.59 ms p95 with its rows fetched against 2.30 / 3.42 grouped by the id,
-- and all 760 results were identical, row for row. The body is otherwise 0023's.
--
-- CREATE OR REPLACE keeps the function's owner, grants and (on Citus) its distribution, but
-- resets its other properties to what the statement says: its SECURITY DEFINER and SET clauses
-- (plan_cache_mode, search_path) are read before and put back after, as 0023 does.

CREATE TEMP TABLE recall_0025_kept ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS f, p.prosecdef, coalesce(p.proconfig, '{}') AS config
FROM pg_proc AS p
WHERE p.pronamespace = 'recall'::regnamespace AND p.proname = 'search_terms';

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
               -- one value per memory: grouped by the id alone, which is what costs less
               NULL::float8[], NULL::float8, NULL::float8, max(hits.created_at),
               (array_agg(hits.content_hash))[1]
        FROM hits JOIN df USING (term_no) CROSS JOIN q
        GROUP BY hits.id
    )
    SELECT r.id, r.bm25, r.matched, r.term_df, r.memories, r.avgdl
    FROM rows AS r
    ORDER BY r.part, r.bm25 DESC, r.created_at DESC, r.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- its SECURITY DEFINER and SET clauses, as they were before this file
DO $$
DECLARE
    kept record;
    setting text;
BEGIN
    FOR kept IN SELECT * FROM recall_0025_kept LOOP
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
