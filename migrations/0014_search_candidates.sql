-- The learned second stage's candidates in two calls (issue 29, docs/decisions/0024-the-gate.md).
--
-- recall.search_terms(user, tsquery, words, scope) needs no vector, so the store runs it while
-- the query is being embedded: every memory of the user holding a query term, with its BM25
-- (the same BM25 as recall.search_keyword) and which of the query's distinct terms it holds
-- (`matched`, 1-based numbers into `term_df`); and one row without an id that carries the
-- terms' document frequencies among the user's memories, their number and mean length. A term
-- is a distinct lexeme of the query (a stop word has none). With `scope` (ids), all of it is
-- taken over those memories only: the store passes a large user's nearest memories
-- (docs/retrieval.md), so the keyword side costs the same however long their history.
--
-- recall.search_details(user, query vector, k, ids) returns the user's k nearest memories by
-- cosine (exact, as recall.search_exact; none when k is 0) and the memories `ids` names (the
-- best by BM25, or a large user's nearest found through their own index), each with its
-- distance, embedding and number of lexemes, and the turn before and after it in its
-- conversation (created_at order; the (user_id, conversation_id, created_at, id) index of
-- migration 0003) with their distances.
--
-- Like the other search functions, both set the row-level security key themselves, so they
-- need no transaction.

CREATE TYPE recall.search_term_hit AS (
    id uuid, bm25 float8, matched integer[], term_df float8[], memories float8, avgdl float8
);

CREATE FUNCTION recall.search_terms(
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
    )
    SELECT NULL::uuid, NULL::float8, NULL::integer[],
           (SELECT coalesce(array_agg(df.df ORDER BY df.term_no), '{}'::float8[]) FROM df),
           q.n, q.avgdl
    FROM q
    UNION ALL
    SELECT hits.id,
           -- rounded: a tie stays a tie whatever order the terms are summed in (see 0016)
           round(sum(
               hits.boost * ln(1 + (q.n - df.df + 0.5) / (df.df + 0.5))
               * 2.2 / (1 + 1.2 * (0.25 + 0.75 * hits.doc_len / q.avgdl))
           )::numeric, 9)::float8,
           array_agg(hits.term_no ORDER BY hits.term_no),
           NULL::float8[], NULL::float8, NULL::float8
    FROM hits JOIN df USING (term_no) CROSS JOIN q
    GROUP BY hits.id;
    PERFORM recall.swap_user_key(previous);
END;
$$;

CREATE TYPE recall.search_detail AS (
    id uuid, conversation_id text, user_message text, ai_response text,
    created_at timestamptz, metadata jsonb, kind text, distance float8, embedding vector,
    doc_len integer, prev_id uuid, prev_distance float8, next_id uuid, next_distance float8
);

CREATE FUNCTION recall.search_details(
    p_user_id text, p_query vector, p_limit integer, p_ids uuid[]
) RETURNS SETOF recall.search_detail LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    WITH scored AS MATERIALIZED (
        -- the exact plan of decision 0001, when asked for: every row of the user scored
        SELECT s.id, s.embedding <=> p_query AS distance
        FROM recall.memories AS s
        WHERE p_limit > 0 AND s.user_id = p_user_id
    ), nearest AS (
        SELECT b.id FROM scored AS b ORDER BY b.distance, b.id LIMIT greatest(p_limit, 0)
    ), picked AS (
        SELECT nearest.id FROM nearest
        UNION
        SELECT v.id FROM unnest(coalesce(p_ids, '{}'::uuid[])) AS v(id)
    )
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, m.embedding <=> p_query, m.embedding, m.doc_len,
           pv.id, pv.distance, nx.id, nx.distance
    FROM picked
    JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = picked.id
    LEFT JOIN LATERAL (
        SELECT b.id, b.embedding <=> p_query AS distance
        FROM recall.memories AS b
        WHERE b.user_id = p_user_id AND b.conversation_id = m.conversation_id
          AND (b.created_at, b.id) < (m.created_at, m.id)
        ORDER BY b.created_at DESC, b.id DESC
        LIMIT 1
    ) AS pv ON true
    LEFT JOIN LATERAL (
        SELECT a.id, a.embedding <=> p_query AS distance
        FROM recall.memories AS a
        WHERE a.user_id = p_user_id AND a.conversation_id = m.conversation_id
          AND (a.created_at, a.id) > (m.created_at, m.id)
        ORDER BY a.created_at, a.id
        LIMIT 1
    ) AS nx ON true;
    PERFORM recall.swap_user_key(previous);
END;
$$;

ALTER FUNCTION recall.search_terms(text, text, text[], uuid[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION recall.search_details(text, vector, integer, uuid[])
    SET plan_cache_mode = force_generic_plan;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.search_terms(text, text, text[], uuid[]) TO recall_app;
        GRANT EXECUTE ON FUNCTION
            recall.search_details(text, vector, integer, uuid[]) TO recall_app;
    END IF;
END
$$;

-- On a Citus coordinator both run on the user's worker, like the other per-user functions
-- (migration 0013): recall.distribute() now also distributes them, colocated with the
-- memories, once they are distributed. 0013's body is kept as it is, under another name.
ALTER FUNCTION recall.distribute() RENAME TO distribute_0013;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_0013();
    f text;
BEGIN
    -- pg_dist_partition exists only with citus: asked in a statement of its own
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        RETURN distributed;
    END IF;
    FOREACH f IN ARRAY ARRAY[
        'recall.search_terms(text, text, text[], uuid[])',
        'recall.search_details(text, vector, integer, uuid[])'
    ] LOOP
        IF NOT EXISTS (
            SELECT 1 FROM pg_dist_object
            WHERE classid = 'pg_proc'::regclass AND objid = f::regprocedure
              AND distribution_argument_index IS NOT NULL
        ) THEN
            EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
            PERFORM create_distributed_function(
                f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
        END IF;
    END LOOP;
    RETURN distributed;
END;
$fn$;
