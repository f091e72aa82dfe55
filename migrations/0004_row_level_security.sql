-- Defence in depth: row-level security on every table that holds user data. The store runs
-- its queries as the role recall_app and sets `recall.user_id` for each transaction, so even a
-- query that forgot its user filter sees only that user's rows. Ingestion of many users at
-- once and operator statistics set `recall.all_users` instead; schema work (migrations,
-- per-user indexes) runs as the owner, which row-level security does not restrict.

DO $$
BEGIN
    IF to_regrole('recall_app') IS NULL THEN
        CREATE ROLE recall_app NOLOGIN;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL;  -- created at the same moment by a migration of another database
    WHEN insufficient_privilege THEN
        RAISE WARNING 'recall: cannot create role recall_app (needs CREATEROLE); row-level '
            'security then protects only connections that are not the tables'' owner';
END
$$;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT USAGE ON SCHEMA recall TO recall_app;
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA recall TO recall_app;
        ALTER DEFAULT PRIVILEGES IN SCHEMA recall
            GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO recall_app;
    END IF;
END
$$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'users', 'progress', 'summaries'] LOOP
        EXECUTE format('ALTER TABLE recall.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY own_rows ON recall.%I '
            'USING (user_id = current_setting(''recall.user_id'', true) '
            '       OR current_setting(''recall.all_users'', true) = ''on'') '
            'WITH CHECK (user_id = current_setting(''recall.user_id'', true) '
            '            OR current_setting(''recall.all_users'', true) = ''on'')',
            t
        );
    END LOOP;
END
$$;
