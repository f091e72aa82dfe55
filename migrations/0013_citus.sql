-- Citus, distributed PostgreSQL (docs/scaling.md, decision 0020). On plain PostgreSQL this file
-- adds one small function and changes nothing else; recall.distribute() below is run by
-- `recall migrate` (recall.db.migrate) and does its work only where the citus extension is
-- installed, i.e. on a Citus coordinator.
--
-- Row-level security for many users at once (ingestion, statistics), as one function: on
-- Citus it must be a SET command to reach the workers, which set_config() is not.
CREATE FUNCTION recall.set_all_users() RETURNS void LANGUAGE sql AS $$
    SELECT set_config('recall.all_users', 'on', true);
$$;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.set_all_users() TO recall_app;
    END IF;
END
$$;

-- Make this database's schema a distributed one, idempotently: each step is skipped once done,
-- so it can run after every migration. Returns the number of tables it distributed. On a
-- database without citus it returns 0 at once.
--
-- What changes on Citus, and why (measured in decision 0020):
-- 1. The memory counters (recall.users) stay statement-level triggers with transition tables,
--    but loop over the transition table with one upsert per user: a set-based
--    INSERT ... SELECT FROM <transition table> inside a trigger on a shard fails at run time
--    ("executor could not find named tuplestore"), a row of the loop is a router query to the
--    user's (colocated, local) users shard.
-- 2. The row-level security key is set with SET LOCAL after
--    `SET LOCAL citus.propagate_set_commands = 'local'`, so it reaches the workers that take
--    part in the transaction (set_config does not); the policies read it without the
--    InitPlan subquery of migration 0008, which Citus refuses in policies of distributed
--    tables (each row then reads the setting, as before 0008).
-- 3. The search functions plan each call for its user (force_custom_plan): Citus cannot route
--    their generic plans.
-- 4. recall_app may log in (no password is set here): the coordinator connects to the workers
--    as the role that runs the query. Authenticate it between nodes (pg_dist_authinfo, or
--    certificates); docs/security.md.
-- 5. Tables: embedding_space is a reference table (a copy on every node); memories, users,
--    progress and summaries are distributed by user_id, colocated (one user's rows of the four
--    tables are on one worker); the per-user functions are distributed by p_user_id, colocated
--    with memories, so a call outside a transaction block runs on the user's worker.
--    schema_migrations and RecallStore's store_items / store_vectors (namespaces, not users)
--    stay local tables on the coordinator.
CREATE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    t text;
    f text;
    distributed integer := 0;
    rule constant text := '(user_id = current_setting(''recall.user_id'', true) '
        'OR current_setting(''recall.all_users'', true) = ''on'')';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN 0;
    END IF;
    -- triggers on distributed tables may only be created (and shards made of a table that has
    -- them) with this setting; they run on the shards
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    -- a table with rows is copied to its shards over one connection per node
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);

    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        -- 1. counters
        CREATE OR REPLACE FUNCTION recall.count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            r record;
        BEGIN
            FOR r IN
                SELECT user_id, count(*) AS n, sum(doc_len) AS tokens
                FROM new_rows GROUP BY user_id ORDER BY user_id
            LOOP
                INSERT INTO recall.users AS u (user_id, memory_count, total_tokens)
                VALUES (r.user_id, r.n, r.tokens)
                ON CONFLICT (user_id) DO UPDATE
                SET memory_count = u.memory_count + excluded.memory_count,
                    total_tokens = u.total_tokens + excluded.total_tokens;
            END LOOP;
            RETURN NULL;
        END;
        $$;
        CREATE OR REPLACE FUNCTION recall.count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            r record;
        BEGIN
            FOR r IN
                SELECT user_id, count(*) AS n, sum(doc_len) AS tokens
                FROM old_rows GROUP BY user_id ORDER BY user_id
            LOOP
                UPDATE recall.users AS u
                SET memory_count = u.memory_count - r.n, total_tokens = u.total_tokens - r.tokens
                WHERE u.user_id = r.user_id;
            END LOOP;
            RETURN NULL;
        END;
        $$;

        -- 2. the row-level security key, propagated to the workers
        CREATE OR REPLACE FUNCTION recall.swap_user_key(p_user_id text) RETURNS text
        LANGUAGE plpgsql AS $$
        DECLARE
            previous text := current_setting('recall.user_id', true);
        BEGIN
            SET LOCAL citus.propagate_set_commands = 'local';
            EXECUTE format('SET LOCAL recall.user_id = %L', coalesce(p_user_id, ''));
            RETURN previous;
        END;
        $$;
        CREATE OR REPLACE FUNCTION recall.set_all_users() RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            SET LOCAL citus.propagate_set_commands = 'local';
            SET LOCAL recall.all_users = 'on';
        END;
        $$;
        FOREACH t IN ARRAY ARRAY['memories', 'users', 'progress', 'summaries'] LOOP
            EXECUTE format(
                'ALTER POLICY own_rows ON recall.%I USING %s WITH CHECK %s', t, rule, rule
            );
        END LOOP;

        -- 3. plans
        ALTER FUNCTION recall.search_exact(text, vector, float8, integer)
            SET plan_cache_mode = force_custom_plan;
        ALTER FUNCTION recall.search_keyword(text, text, text[], vector, integer, text)
            SET plan_cache_mode = force_custom_plan;

        -- 4. the application role
        IF to_regrole('recall_app') IS NOT NULL THEN
            BEGIN
                ALTER ROLE recall_app LOGIN;
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE WARNING 'recall: cannot ALTER ROLE recall_app LOGIN (needs CREATEROLE): '
                    'the coordinator cannot reach the workers as recall_app';
            END;
        END IF;
    END IF;

    -- 5. tables
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.embedding_space'::regclass
    ) THEN
        PERFORM create_reference_table('recall.embedding_space');
        PERFORM truncate_local_data_after_distributing_table('recall.embedding_space');
        distributed := distributed + 1;
    END IF;
    FOREACH t IN ARRAY ARRAY['memories', 'users', 'progress', 'summaries'] LOOP
        IF NOT EXISTS (
            SELECT 1 FROM pg_dist_partition WHERE logicalrelid = format('recall.%I', t)::regclass
        ) THEN
            IF t = 'memories' THEN
                PERFORM create_distributed_table('recall.memories', 'user_id');
            ELSE
                PERFORM create_distributed_table(
                    format('recall.%I', t), 'user_id', colocate_with => 'recall.memories'
                );
            END IF;
            PERFORM truncate_local_data_after_distributing_table(format('recall.%I', t));
            distributed := distributed + 1;
        END IF;
    END LOOP;
    FOREACH f IN ARRAY ARRAY[
        'recall.search_exact(text, vector, float8, integer)',
        'recall.search_keyword(text, text, text[], vector, integer, text)',
        'recall.search_indexed(text, vector, float8, integer, integer)',
        'recall.add_memory(text, text, text, text, timestamptz, jsonb, bytea, vector, text, text)'
    ] LOOP
        IF NOT EXISTS (
            SELECT 1 FROM pg_dist_object
            WHERE classid = 'pg_proc'::regclass AND objid = f::regprocedure
              AND distribution_argument_index IS NOT NULL
        ) THEN
            PERFORM create_distributed_function(
                f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
        END IF;
    END LOOP;
    RETURN distributed;
END;
$fn$;
