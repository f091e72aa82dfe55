-- The keyword side's statement orders its ties by one number (issue 56, decision 0059).
--
-- recall.search_terms (the keyword side of every default search, and of recall.search_scoped)
-- orders the memories holding a query word by BM25, ties to the newer memory, then by content
-- hash (migration 0023). It carried each memory's time and hash through the aggregate that sums
-- its BM25, as max(created_at) and (array_agg(content_hash))[1]: an array built for every
-- memory holding a query word (about 215 a search for a LoCoMo user). The memories are now
-- numbered once in that order (row_number() over the matched ones) and ordered by the number:
-- the same rows in the same order with the same values, about 0.3 ms less a call (decision
-- 0059). The function's signature and row type are unchanged.
--
-- CREATE OR REPLACE keeps owners, grants and (on Citus) distribution but resets SECURITY
-- DEFINER and SET clauses: they are read before and put back after, as in migration 0032.

CREATE TEMP TABLE recall_0035_kept ON COMMIT DROP AS
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
        -- each with its place in the order ties take (the newer memory first, then by content
        -- hash, migration 0023): one sort here instead of a time and a hash carried through
        -- the aggregate below for every memory (migration 0035)
        SELECT u.id, u.fts, u.doc_len,
               row_number() OVER (ORDER BY u.created_at DESC, u.content_hash) AS tie
        FROM (
            -- the user's memories holding a query term, or those of the scope (one branch runs)
            SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
            FROM recall.memories AS m, q
            WHERE p_scope IS NULL AND m.user_id = p_user_id
              -- found through this user's own words (0030), as in recall.search_keyword
              AND recall.user_terms(m.user_id, m.fts) && recall.user_word_keys(p_user_id, p_words)
              AND ts_match_vq(m.fts, q.query) AND (m.holds IS NULL OR m.holds = 'statement')
            UNION ALL
            SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
            FROM unnest(p_scope) AS s(id)
            JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
            CROSS JOIN q
            WHERE m.fts @@ q.query AND (m.holds IS NULL OR m.holds = 'statement')
        ) AS u
    ), hits AS MATERIALIZED (
        -- a term in a memory's title (weight A) counts double, in its entities or key phrases
        -- (weight B) one and a half times, as in recall.search_keyword
        SELECT mt.id, mt.doc_len, mt.tie, t.term_no,
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
               q.n AS memories, q.avgdl, NULL::bigint AS tie
        FROM q
        UNION ALL
        SELECT 1, hits.id,
               -- rounded: a tie stays a tie whatever order the terms are summed in (see 0016)
               round(sum(
                   recall.bm25_term(df.df, q.n, hits.doc_len, q.avgdl, hits.boost)
               ) * 1e9) / 1e9,
               array_agg(hits.term_no ORDER BY hits.term_no),
               NULL::float8[], NULL::float8, NULL::float8, min(hits.tie)
        FROM hits JOIN df USING (term_no) CROSS JOIN q
        GROUP BY hits.id
    )
    SELECT r.id, r.bm25, r.matched, r.term_df, r.memories, r.avgdl
    FROM rows AS r
    ORDER BY r.part, r.bm25 DESC, r.tie;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- the function's SECURITY DEFINER and SET clauses, as they were before this file
DO $$
DECLARE
    kept record;
    setting text;
BEGIN
    FOR kept IN SELECT * FROM recall_0035_kept LOOP
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
