-- A turn judged once, when it is written (issue 54, decision 0049).
--
-- What a stored turn holds was judged at every search: a question left unanswered, small talk
-- on both sides (recall.search.echo), by the reply's own words (migration 0024). The searches
-- fetched rows beyond their limit so that leaving those out still filled it (a slack of 5, then
-- 20 more on a refetch), and remembered for five minutes which users needed the larger one.
-- The writer now judges each turn (recall.search.judging) and records the judgement in the
-- turn's metadata under "recall": "holds" (statement, question, small_talk, restatement),
-- "rule" (the rule's version) and, for a statement that states a source anew, "supersedes"
-- (recall.search.provenance.updated). Export and import carry them with the metadata.
--
-- 1. Three columns, filled by the text search trigger from the metadata on every insert and
--    every update of it (so also by recall.db.judging, which judges the rows stored before this
--    file in the background, and by `recall import`): anything malformed there leaves NULL.
--    Added without a default: no table rewrite, no row changes here.
-- 2. The searches leave out, before they rank, every memory judged to hold nothing: a row is a
--    candidate when `holds` is NULL (not judged yet: the read path judges it, as before) or
--    'statement'. recall.search_exact, the indexed search's statement, recall.search_keyword,
--    recall.search_terms and the second stage's recall.search_details (its nearest; the turns
--    before and after a candidate are any turn of its conversation). recall.search_scoped
--    calls the first three and needs no change.
--
-- CREATE OR REPLACE keeps owners, grants and (on Citus) distribution but resets SECURITY
-- DEFINER and SET clauses to what the statement says: they are read before and put back after,
-- as in migration 0026. On Citus, ALTER TABLE reaches every shard, and the trigger function,
-- which Citus distributed with the table, is replaced on every worker.

-- On Citus the ALTER TABLE reaches the shards in parallel, and a function replaced after it in
-- the same transaction is refused unless the transaction runs shard commands one at a time (a
-- setting plain PostgreSQL keeps as an unused placeholder; migration 0013 does the same). Citus
-- passes the statement's own text on to the shards, so it runs alone (EXECUTE), not as a part of
-- this file's text.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

DO $$
BEGIN
    EXECUTE 'ALTER TABLE recall.memories ADD COLUMN holds text, ADD COLUMN judged smallint,'
            ' ADD COLUMN supersedes uuid';
END
$$;

CREATE TEMP TABLE recall_0027_kept ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS f, p.prosecdef, coalesce(p.proconfig, '{}') AS config
FROM pg_proc AS p
WHERE p.pronamespace = 'recall'::regnamespace
  AND (p.proname IN ('search_exact', 'search_indexed_sql', 'search_keyword', 'search_terms')
       OR (p.proname = 'search_details' AND p.pronargs = 5));

CREATE OR REPLACE FUNCTION recall.memories_text_search() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    body tsvector := to_tsvector(
        'english'::regconfig,
        NEW.user_message || ' ' || CASE
            WHEN jsonb_typeof(NEW.metadata #> '{recall,own}') = 'string'
                THEN NEW.metadata #>> '{recall,own}'
            ELSE NEW.ai_response
        END
    );
BEGIN
    NEW.doc_len := recall.tsvector_tokens(body);
    -- what the turn holds, by which rule, and what it states anew, as the writer judged it
    -- (recall.search.judging): copied from the metadata, anything malformed there left NULL
    NEW.holds := CASE WHEN NEW.metadata #>> '{recall,holds}'
                           IN ('statement', 'question', 'small_talk', 'restatement')
                      THEN NEW.metadata #>> '{recall,holds}' END;
    NEW.judged := CASE WHEN NEW.metadata #>> '{recall,rule}' ~ '^[0-9]{1,4}$'
                       THEN (NEW.metadata #>> '{recall,rule}')::smallint END;
    NEW.supersedes := CASE WHEN NEW.metadata #>> '{recall,supersedes}'
                                ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                           THEN (NEW.metadata #>> '{recall,supersedes}')::uuid END;
    NEW.fts := setweight(
            to_tsvector('english'::regconfig, coalesce(NEW.metadata ->> 'title', '')), 'A'
        )
        || setweight(
            to_tsvector(
                'english'::regconfig,
                coalesce(NEW.metadata ->> 'entities_text', '') || ' '
                || coalesce(NEW.metadata ->> 'key_phrases_text', '')
            ),
            'B'
        )
        || body;
    RETURN NEW;
END;
$$;

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
            WHERE s.user_id = p_user_id AND (s.holds IS NULL OR s.holds = 'statement')
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
LANGUAGE sql STABLE AS $$
SELECT format($q$
    WITH candidates AS MATERIALIZED (
        SELECT id, embedding <=> $1 AS distance, created_at, content_hash
        FROM recall.memories
        WHERE user_id = %1$L AND (holds IS NULL OR holds = 'statement')
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
$$;

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
          AND m.fts @@ q.query AND (m.holds IS NULL OR m.holds = 'statement')
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
                   recall.bm25_term(df.df, q.n, hits.doc_len, q.avgdl, hits.boost)
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
          AND (m.holds IS NULL OR m.holds = 'statement')
        UNION ALL
        SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
        FROM unnest(p_scope) AS s(id)
        JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
        CROSS JOIN q
        WHERE m.fts @@ q.query AND (m.holds IS NULL OR m.holds = 'statement')
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
                   recall.bm25_term(df.df, q.n, hits.doc_len, q.avgdl, hits.boost)
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

-- each function's SECURITY DEFINER and SET clauses, as they were before this file
DO $$
DECLARE
    kept record;
    setting text;
BEGIN
    FOR kept IN SELECT * FROM recall_0027_kept LOOP
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
