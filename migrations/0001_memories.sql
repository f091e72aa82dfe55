-- The memories table, the per-user bookkeeping that picks a search plan, and the embedding space.
-- The vector column gets its dimension when the store binds its embedding model
-- (recall.migrate.bind_embedding_space): a migration file cannot know which model you use.

CREATE TABLE recall.embedding_space (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    model_name text NOT NULL,
    dimensions integer NOT NULL CHECK (dimensions > 0),
    bound_at timestamptz NOT NULL DEFAULT now()
);

-- Primary and unique keys lead with user_id so the table can be distributed by user
-- (docs/scaling.md) and every lookup routes to one user's rows.
CREATE TABLE recall.memories (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    user_id text NOT NULL CHECK (user_id <> ''),
    conversation_id text,
    user_message text NOT NULL,
    ai_response text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    content_hash bytea NOT NULL,
    embedding vector NOT NULL,
    embedding_model text NOT NULL,
    PRIMARY KEY (user_id, id),
    UNIQUE (user_id, content_hash)
);

-- Serves per-user access: the exact search plan, recent(), stats and erasure.
CREATE INDEX memories_user_created_idx ON recall.memories (user_id, created_at DESC);

-- One row per user with memories: the count picks the search plan without counting rows,
-- hnsw_index names the user's own HNSW index once it has one (recall.userindex).
CREATE TABLE recall.users (
    user_id text PRIMARY KEY,
    memory_count bigint NOT NULL DEFAULT 0,
    hnsw_index text
);

-- Statement-level triggers with transition tables: one upsert per statement, so COPY of a
-- million rows costs one aggregate, not a million row triggers.
CREATE FUNCTION recall.count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO recall.users AS u (user_id, memory_count)
    SELECT user_id, count(*) FROM new_rows GROUP BY user_id ORDER BY user_id
    ON CONFLICT (user_id) DO UPDATE SET memory_count = u.memory_count + excluded.memory_count;
    RETURN NULL;
END;
$$;

CREATE FUNCTION recall.count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE recall.users AS u SET memory_count = u.memory_count - d.n
    FROM (SELECT user_id, count(*) AS n FROM old_rows GROUP BY user_id) AS d
    WHERE u.user_id = d.user_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER memories_count_inserted AFTER INSERT ON recall.memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall.count_inserted();

CREATE TRIGGER memories_count_deleted AFTER DELETE ON recall.memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION recall.count_deleted();
