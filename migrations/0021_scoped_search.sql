-- The second stage's candidates for less (issue 36, decision 0031): their vectors only when the
-- ranker reads them, and a large user's in one call.
--
-- recall.search_details(user, query vector, k, ids, vectors) is 0014's four-argument call with
-- one more: with `vectors` false each row's embedding is NULL. The shipped ranker reads no
-- vector products (decision 0027), and 45 vectors of 384 floats were most of what the call
-- sent. 0014's call stays as it was, for a process of the version before.
--
-- A user holding more than the store's SCOPE_FROM memories gets the second stage over their
-- SCOPE nearest (docs/retrieval.md). That took three calls in a row: their nearest memories
-- (recall.search_indexed or recall.search_exact, every row with its texts and metadata, only for
-- the store to keep their ids), the keyword side over those ids (recall.search_terms, the ids
-- sent back), and the chosen candidates' details (recall.search_details, the ids sent again).
-- recall.search_scoped makes the same three calls inside the server and returns what the store
-- kept of them:
--
-- - part 0: the query terms' statistics over the scope (recall.search_terms's row without id);
-- - part 1: each memory of the scope holding a query term, its BM25 and terms;
-- - part 2: the details (recall.search_details) of the first p_near memories of the scope and
--   of its best p_best by BM25 (ties by id), with `near`, each one's place among the nearest
--   (1-based; NULL for one only BM25 brought); their vectors when p_vectors.
--
-- The store judges which of the nearest are questions left unanswered (recall.search.echo, in
-- Python) from their details, as before from the rows of the first call, and asks again the
-- old way in the rare case that p_near of them hold fewer than it needs (docs/retrieval.md).
-- The functions it calls are unchanged (but for the vectors): the candidates, their BM25 and
-- their details are the ones the three calls returned.
--
-- Like the other search functions both set the row-level security key itself (no transaction
-- needed) and run with their owner's rights (migration 0017); on Citus recall.distribute()
-- distributes them colocated with the memories, so they run on the user's worker (and the
-- calls inside recall.search_scoped there).

CREATE FUNCTION recall.search_details(
    p_user_id text, p_query vector, p_limit integer, p_ids uuid[], p_vectors boolean
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
           m.kind, m.embedding <=> p_query, CASE WHEN p_vectors THEN m.embedding END, m.doc_len,
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

CREATE TYPE recall.search_scoped_row AS (
    part smallint, near integer,
    id uuid, bm25 float8, matched integer[], term_df float8[], memories float8, avgdl float8,
    conversation_id text, user_message text, ai_response text, created_at timestamptz,
    metadata jsonb, kind text, distance float8, embedding vector, doc_len integer,
    prev_id uuid, prev_distance float8, next_id uuid, next_distance float8
);

CREATE FUNCTION recall.search_scoped(
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
        SELECT t.* FROM recall.search_terms(p_user_id, p_tsquery, p_words, nearest) AS t
    ), best AS (
        SELECT t.id FROM terms AS t
        WHERE t.id IS NOT NULL
        ORDER BY t.bm25 DESC, t.id
        LIMIT greatest(p_best, 0)
    ), wanted AS (
        SELECT array_cat(nearest[1:greatest(p_near, 0)], coalesce(array_agg(best.id), '{}'))
            AS ids
        FROM best
    )
    SELECT CASE WHEN t.id IS NULL THEN 0 ELSE 1 END::smallint, NULL::integer,
           t.id, t.bm25, t.matched, t.term_df, t.memories, t.avgdl,
           NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::jsonb, NULL::text,
           NULL::float8, NULL::vector, NULL::integer,
           NULL::uuid, NULL::float8, NULL::uuid, NULL::float8
    FROM terms AS t
    UNION ALL
    SELECT 2::smallint, array_position(nearest[1:greatest(p_near, 0)], d.id),
           d.id, NULL::float8, NULL::integer[], NULL::float8[], NULL::float8, NULL::float8,
           d.conversation_id, d.user_message, d.ai_response, d.created_at, d.metadata, d.kind,
           d.distance, d.embedding, d.doc_len, d.prev_id, d.prev_distance, d.next_id,
           d.next_distance
    FROM wanted, recall.search_details(p_user_id, p_query, 0, wanted.ids, p_vectors) AS d;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- both as migration 0017 made the other per-user calls: a generic plan, the owner's rights, a
-- pinned search_path, EXECUTE for recall_app (and the owner) only
DO $$
DECLARE
    f text;
    vector_schema text := (
        SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'
    );
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'recall.search_details(text, vector, integer, uuid[], boolean)',
        'recall.search_scoped(text, vector, integer, integer, boolean, text, text[], integer, '
            'integer, boolean)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
        EXECUTE format(
            'ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
            f, vector_schema
        );
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        IF to_regrole('recall_app') IS NOT NULL THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO recall_app', f);
        END IF;
    END LOOP;
END
$$;

-- On a Citus coordinator both run on the user's worker, like the other per-user functions:
-- recall.distribute() now also distributes them, colocated with the memories. The body it had
-- before this migration is kept as it is, under a name of this migration's own.
ALTER FUNCTION recall.distribute() RENAME TO distribute_before_0021;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_before_0021();
    f text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        RETURN distributed;
    END IF;
    FOREACH f IN ARRAY ARRAY[
        'recall.search_details(text, vector, integer, uuid[], boolean)',
        'recall.search_scoped(text, vector, integer, integer, boolean, text, text[], integer, '
            'integer, boolean)'
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
