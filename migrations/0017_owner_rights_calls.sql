-- The six per-user calls run with their owner's rights (SECURITY DEFINER), so that what they
-- read and write never depends on where the row-level security key has reached (decision
-- 0025).
--
-- Why: on Citus a call outside a transaction block is delegated to the worker that the
-- coordinator believes holds the user's shard. While a shard move commits, that worker may
-- already know the shard has gone to another node, and then runs the call's statement there
-- as a remote task. A read-only remote task outside a coordinated transaction is sent without
-- BEGIN, so the `SET LOCAL recall.user_id` of recall.swap_user_key (migration 0013) never
-- reaches it: the policies see no key, and the statement reads no rows, without an error. A
-- search returned nothing, or lost its keyword side, one to three times per rebalance of 24
-- users (tests/citus/test_cluster.py); a write would be refused (WITH CHECK) and retried.
-- Run as the owner, whom row-level security does not restrict (it is not FORCEd), the remote
-- task reads the user's rows wherever it runs.
--
-- What is given up: nothing the policies added to these six. Each sets the key from its own
-- p_user_id argument and filters every table it reads by that same user id, so under the
-- policies it could already read or write any user's rows its caller named, exactly as the app
-- role can by setting the key itself. The policies still guard every other statement the app
-- role runs (a query that forgets its user filter sees one user, or none). The calls still set
-- and restore the key, so that a caller's scoped transaction is left as it was.
--
-- A SECURITY DEFINER function must not be callable by everyone, nor resolve names through a
-- schema others can write to: EXECUTE is revoked from PUBLIC and granted to recall_app (and the
-- owner keeps it), and each call's search_path is pinned to pg_catalog, the schema pgvector is
-- installed in (its type and operators), and pg_temp last. Every other name in them is
-- qualified with recall. On Citus, ALTER FUNCTION and GRANT on distributed functions reach the
-- workers, and recall.distribute() distributes a function with its settings and grants.

DO $$
DECLARE
    f text;
    vector_schema text := (
        SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'
    );
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'recall.search_exact(text, vector, float8, integer)',
        'recall.search_keyword(text, text, text[], vector, integer, text)',
        'recall.search_indexed(text, vector, float8, integer, integer)',
        'recall.search_terms(text, text, text[], uuid[])',
        'recall.search_details(text, vector, integer, uuid[])',
        'recall.add_memory(text, text, text, text, timestamptz, jsonb, bytea, vector, text, text)'
    ] LOOP
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
