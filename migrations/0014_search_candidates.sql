-- The learned second stage's candidates in one call (issue 29, docs/decisions/0024-the-gate.md).
--
-- recall.search_candidates(user, query vector, tsquery, words, vector ids, k) returns the union
-- of the user's best k memories by BM25 (the same BM25 as recall.search_keyword) and the ids
-- the vector side already found (recall.search_exact or recall.search_indexed, called before
-- it), and for each what the second stage's features need and PostgreSQL already knows:
--   - its cosine distance to the query, its embedding, its BM25 (0 when it matches no word) and
--     its number of lexemes;
--   - which of the query's distinct terms it holds (`matched`, numbers into `term_df`);
--   - the same for the turn before and the turn after it in its conversation (created_at
--     order; the (user_id, conversation_id, created_at, id) index of migration 0003);
--   - the query's terms' document frequencies among the user's memories, their number and
--     mean length (the same on every row).
-- A term is a distinct lexeme of the query (a stop word has none). With `p_scope` (ids), BM25,
-- its document frequencies and the number of memories are taken over those memories only: the
-- store passes a large user's nearest memories (docs/retrieval.md), so the keyword side costs
-- the same however long their history. Like the other search functions it sets the row-level
-- security key itself, so it needs no transaction.

CREATE TYPE recall.search_candidate AS (
    id uuid, conversation_id text, user_message text, ai_response text,
    created_at timestamptz, metadata jsonb, kind text, distance float8, bm25 float8,
    embedding vector, doc_len integer, matched integer[],
    prev_distance float8, prev_matched integer[], prev_doc_len integer, prev_bm25 float8,
    next_distance float8, next_matched integer[], next_doc_len integer, next_bm25 float8,
    term_df float8[], memories float8, avgdl float8
);

CREATE FUNCTION recall.search_candidates(
    p_user_id text, p_query vector, p_tsquery text, p_words text[], p_vector_ids uuid[],
    p_limit integer, p_scope uuid[]
) RETURNS SETOF recall.search_candidate LANGUAGE plpgsql AS $$
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
        SELECT m.id, m.fts, m.doc_len
        FROM recall.memories AS m, q
        WHERE p_scope IS NULL AND m.user_id = p_user_id AND m.fts @@ q.query
        UNION ALL
        SELECT m.id, m.fts, m.doc_len
        FROM unnest(p_scope) AS s(id)
        JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
        CROSS JOIN q
        WHERE m.fts @@ q.query
    ), hits AS MATERIALIZED (
        -- a term in a memory's title (weight A) counts double, in its entities or key phrases
        -- (weight B) one and a half times, as in recall.search_keyword
        SELECT mt.id, mt.doc_len, t.term_no,
               CASE WHEN ts_filter(mt.fts, '{a}') @@ t.tq THEN 2.0
                    WHEN ts_filter(mt.fts, '{b}') @@ t.tq THEN 1.5
                    ELSE 1.0 END AS boost
        FROM matched AS mt JOIN terms AS t ON mt.fts @@ t.tq
    ), df AS MATERIALIZED (
        SELECT t.term_no, count(h.id)::float8 AS df
        FROM terms AS t LEFT JOIN hits AS h USING (term_no)
        GROUP BY t.term_no
    ), scored AS MATERIALIZED (
        SELECT hits.id,
               sum(
                   hits.boost * ln(1 + (q.n - df.df + 0.5) / (df.df + 0.5))
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * hits.doc_len / q.avgdl))
               ) AS bm25,
               array_agg(hits.term_no ORDER BY hits.term_no) AS matched
        FROM hits JOIN df USING (term_no) CROSS JOIN q
        GROUP BY hits.id
    ), best AS (
        SELECT s.id FROM scored AS s ORDER BY s.bm25 DESC, s.id LIMIT p_limit
    ), picked AS (
        SELECT best.id FROM best
        UNION
        SELECT v.id FROM unnest(coalesce(p_vector_ids, '{}'::uuid[])) AS v(id)
    ), stats AS (
        SELECT coalesce(array_agg(df.df ORDER BY df.term_no), '{}'::float8[]) AS term_df
        FROM df
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, m.embedding <=> p_query AS distance, coalesce(s.bm25, 0.0), m.embedding,
           m.doc_len, coalesce(s.matched, '{}'::integer[]),
           pv.distance, coalesce(ps.matched, '{}'::integer[]), pv.doc_len, coalesce(ps.bm25, 0.0),
           nx.distance, coalesce(ns.matched, '{}'::integer[]), nx.doc_len, coalesce(ns.bm25, 0.0),
           stats.term_df, q.n, q.avgdl
    FROM picked
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = picked.id
    CROSS JOIN q CROSS JOIN stats
    LEFT JOIN scored AS s ON s.id = m.id
    LEFT JOIN LATERAL (
        SELECT b.id, b.embedding <=> p_query AS distance, b.doc_len
        FROM recall.memories AS b
        WHERE b.user_id = p_user_id AND b.conversation_id = m.conversation_id
          AND (b.created_at, b.id) < (m.created_at, m.id)
        ORDER BY b.created_at DESC, b.id DESC
        LIMIT 1
    ) AS pv ON true
    LEFT JOIN scored AS ps ON ps.id = pv.id
    LEFT JOIN LATERAL (
        SELECT a.id, a.embedding <=> p_query AS distance, a.doc_len
        FROM recall.memories AS a
        WHERE a.user_id = p_user_id AND a.conversation_id = m.conversation_id
          AND (a.created_at, a.id) > (m.created_at, m.id)
        ORDER BY a.created_at, a.id
        LIMIT 1
    ) AS nx ON true
    LEFT JOIN scored AS ns ON ns.id = nx.id
    ORDER BY m.id;
    PERFORM recall.swap_user_key(previous);
END;
$$;

ALTER FUNCTION recall.search_candidates(text, vector, text, text[], uuid[], integer, uuid[])
    SET plan_cache_mode = force_generic_plan;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION
            recall.search_candidates(text, vector, text, text[], uuid[], integer, uuid[]) TO recall_app;
    END IF;
END
$$;

-- On a Citus coordinator the function runs on the user's worker, like the other per-user
-- functions (migration 0013): recall.distribute() now also distributes it, colocated with the
-- memories, once they are distributed. 0013's body is kept as it is, under another name.
ALTER FUNCTION recall.distribute() RENAME TO distribute_0013;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_0013();
    f constant text := 'recall.search_candidates(text, vector, text, text[], uuid[], integer, uuid[])';
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
       AND EXISTS (
           SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
       )
       AND NOT EXISTS (
           SELECT 1 FROM pg_dist_object
           WHERE classid = 'pg_proc'::regclass AND objid = f::regprocedure
             AND distribution_argument_index IS NOT NULL
       ) THEN
        ALTER FUNCTION recall.search_candidates(text, vector, text, text[], uuid[], integer, uuid[])
            SET plan_cache_mode = force_custom_plan;
        PERFORM create_distributed_function(
            f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
    END IF;
    RETURN distributed;
END;
$fn$;
