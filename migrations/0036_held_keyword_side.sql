-- The keyword side from the held rows (issue 56, decision 0060): recall.held_state, and each
-- held row's lexemes.
--
-- While the query is embedded, the default path read the keyword side from
-- recall.search_terms: every memory of the user holding a query word, with its BM25, a couple
-- of hundred rows a search for a LoCoMo user (their speakers' names are in nearly every turn),
-- about 1 ms of the server's time beside the embedding on the same cores. The process holds
-- the user's rows (migration 0034), so it can score them itself if it holds their lexemes:
--
-- - recall.held_rows also returns each memory's lexemes and each one's boost (2 for a lexeme
--   with a position of weight A, the title; 1.5 for weight B, the entities and key phrases; 1
--   otherwise), as recall.search_terms boosts a term;
-- - recall.held_state replaces recall.held_versions in the call beside the embedding: the
--   stamp (and, when it changed, the versions) as before, and, read with the stamp, what
--   BM25 reads of the database besides the rows: the user's memory count and mean length
--   (recall.users, as recall.search_terms reads them) and each query word's lexeme ('' for a
--   stop word; NULL when the word is not one lexeme at one position, for which the process
--   asks recall.search_terms, the phrase's positions being the parser's).
--
-- The stamp itself becomes one row's: recall.held_versions hashed every memory's id and row
-- version, about 0.13 ms of the server's time a search for a user of 300 memories, beside the
-- embedding on the same cores; recall.held_state reads the row version (xmin) of the user's row
-- in recall.users instead. The counters' triggers already write that row for every insert and
-- delete; a third one, recall.count_updated, writes it (unchanged) for every update, so that
-- any write to a user's memories gives the row a new version in the same transaction. A user's
-- row deleted and made again has a new version too (another transaction's).
--
-- recall.held_versions stays for a process of the version before (a rolling upgrade), and
-- because recall.distribute_before_0036 names it. The held row's type grows two attributes;
-- a process of the version before reads `SELECT *` from recall.held_rows and refuses the wider
-- row (its search falls back to no memories, a turn never fails) until it is replaced: the
-- query now names its columns.
--
-- CREATE OR REPLACE keeps owners, grants and (on Citus) distribution but resets SECURITY
-- DEFINER and SET clauses: they are read before and put back after, as in migration 0032.

CREATE TEMP TABLE recall_0036_kept ON COMMIT DROP AS
SELECT p.oid::regprocedure::text AS f, p.prosecdef, coalesce(p.proconfig, '{}') AS config
FROM pg_proc AS p
WHERE p.pronamespace = 'recall'::regnamespace AND p.proname = 'held_rows';

ALTER TYPE recall.held_row ADD ATTRIBUTE terms text[];
ALTER TYPE recall.held_row ADD ATTRIBUTE boosts float8[];

-- The user's memories of p_ids (every one when NULL), with the columns a search reads.
CREATE OR REPLACE FUNCTION recall.held_rows(p_user_id text, p_ids uuid[])
RETURNS SETOF recall.held_row LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    SELECT m.id, m.xmin::text::bigint, m.conversation_id, m.user_message, m.ai_response,
           m.created_at, m.metadata::text, m.kind, m.embedding, m.doc_len, m.holds,
           m.content_hash, t.terms, t.boosts
    FROM recall.memories AS m
    CROSS JOIN LATERAL (
        -- each lexeme once, boosted as recall.search_terms boosts a query term it holds
        SELECT coalesce(array_agg(u.lexeme), '{}') AS terms,
               coalesce(array_agg(CASE WHEN 'A' = ANY(u.weights) THEN 2.0
                                       WHEN 'B' = ANY(u.weights) THEN 1.5
                                       ELSE 1.0 END::float8), '{}') AS boosts
        FROM unnest(m.fts) AS u
    ) AS t
    WHERE m.user_id = p_user_id AND (p_ids IS NULL OR m.id = ANY(p_ids));
    PERFORM recall.swap_user_key(previous);
END;
$$;

DO $$
DECLARE
    kept record;
    setting text;
BEGIN
    FOR kept IN SELECT * FROM recall_0036_kept LOOP
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

-- Every update of memories writes their users' rows, unchanged: a new row version, the held
-- rows' stamp (inserts and deletes write them already, recall.count_inserted and
-- recall.count_deleted). One statement per user, as the counters run on Citus.
CREATE FUNCTION recall.count_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT user_id FROM old_rows UNION SELECT user_id FROM new_rows ORDER BY 1 LOOP
        UPDATE recall.users AS u SET memory_count = u.memory_count WHERE u.user_id = r.user_id;
    END LOOP;
    RETURN NULL;
END;
$$;

-- On a Citus coordinator a trigger on a distributed table runs on its shards (as the counters'),
-- and Citus sends the statement that made it on to the shards: one statement of its own (a
-- migration is one string of several).
DO $$
BEGIN
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    EXECUTE 'CREATE TRIGGER memories_count_updated AFTER UPDATE ON recall.memories '
            'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows '
            'FOR EACH STATEMENT EXECUTE FUNCTION recall.count_updated()';
END
$$;

-- The user's memories as they stand: a stamp, the row version of the user's row in
-- recall.users, which every write to their memories renews (NULL: no row), and, unless it is
-- p_stamp, each memory's id and row version; and what BM25 reads besides the rows, in the same
-- snapshot as the stamp: N and the mean length as recall.search_terms takes them (NULL for a user without
-- a row in recall.users), and each of p_words' lexeme, in order ('' for a stop word; NULL for a
-- word that is not one lexeme at one position).
CREATE FUNCTION recall.held_state(p_user_id text, p_stamp bigint, p_words text[])
RETURNS TABLE (
    stamp bigint, ids uuid[], versions bigint[], lexemes text[], memories float8, avgdl float8
) LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    now_stamp bigint;
    counted float8;
    mean float8;
    words text[];
BEGIN
    SELECT u.xmin::text::bigint,
           CASE WHEN u.user_id IS NOT NULL THEN greatest(u.memory_count, 1)::float8 END,
           CASE WHEN u.user_id IS NOT NULL
                THEN greatest(u.total_tokens::float8 / greatest(u.memory_count, 1), 1.0) END
    INTO now_stamp, counted, mean
    FROM (SELECT 1) AS one LEFT JOIN recall.users AS u ON u.user_id = p_user_id;
    SELECT coalesce(array_agg(x.lexeme ORDER BY w.ord), '{}') INTO words
    FROM unnest(coalesce(p_words, '{}'::text[])) WITH ORDINALITY AS w(word, ord),
         LATERAL (
             SELECT CASE WHEN count(*) = 0 THEN ''
                         WHEN count(*) = 1 AND sum(cardinality(u.positions)) = 1
                             THEN min(u.lexeme) END AS lexeme
             FROM unnest(to_tsvector('english', w.word)) AS u
         ) AS x;
    IF now_stamp IS NOT DISTINCT FROM p_stamp THEN
        RETURN QUERY SELECT now_stamp, NULL::uuid[], NULL::bigint[], words, counted, mean;
    ELSE
        RETURN QUERY
        SELECT now_stamp, coalesce(array_agg(m.id), '{}'),
               coalesce(array_agg(m.xmin::text::bigint), '{}'), words, counted, mean
        FROM recall.memories AS m
        WHERE m.user_id = p_user_id;
    END IF;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- as migration 0021 made the other per-user calls: a generic plan, the owner's rights, a
-- pinned search_path, EXECUTE for recall_app (and the owner) only
DO $$
DECLARE
    f text := 'recall.held_state(text, bigint, text[])';
    vector_schema text := (
        SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'
    );
BEGIN
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
    EXECUTE format(
        'ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
        f, vector_schema
    );
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    IF to_regrole('recall_app') IS NOT NULL THEN
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO recall_app', f);
    END IF;
END
$$;

-- On a Citus coordinator it runs on the user's worker, like the other per-user functions.
ALTER FUNCTION recall.distribute() RENAME TO distribute_before_0036;

CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    distributed integer := recall.distribute_before_0036();
    f text := 'recall.held_state(text, bigint, text[])';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_object
        WHERE classid = 'pg_proc'::regclass AND objid = f::regprocedure
          AND distribution_argument_index IS NOT NULL
    ) THEN
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
        PERFORM create_distributed_function(
            f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
    END IF;
    RETURN distributed;
END;
$fn$;
