-- Full-text search for keyword and hybrid retrieval, and memory kinds (turns, notes, summaries).

-- Number of lexeme occurrences in a tsvector: the document length BM25 normalizes by.
CREATE FUNCTION recall.tsvector_tokens(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)::integer
    FROM unnest(v) AS t
$$;

-- kind: 'turn' (a user/AI pair), 'note' (imported text), 'summary' (written by a model).
-- Only turns need an AI response.
ALTER TABLE recall.memories
    ADD COLUMN kind text NOT NULL DEFAULT 'turn',
    ADD CONSTRAINT memories_kind_check CHECK (kind IN ('turn', 'note', 'summary')),
    ADD CONSTRAINT memories_turn_has_reply CHECK (kind <> 'turn' OR ai_response <> '');

ALTER TABLE recall.memories
    ADD COLUMN fts tsvector GENERATED ALWAYS AS (
        to_tsvector('english'::regconfig, user_message || ' ' || ai_response)
    ) STORED;

-- a generated column cannot read another one: the expression is repeated
ALTER TABLE recall.memories
    ADD COLUMN doc_len integer GENERATED ALWAYS AS (
        recall.tsvector_tokens(
            to_tsvector('english'::regconfig, user_message || ' ' || ai_response)
        )
    ) STORED;

CREATE INDEX memories_fts_idx ON recall.memories USING gin (fts);

-- BM25 needs each user's total document length (their average is the normalizer).
ALTER TABLE recall.users ADD COLUMN total_tokens bigint NOT NULL DEFAULT 0;
UPDATE recall.users AS u SET total_tokens = s.tokens
FROM (SELECT user_id, sum(doc_len) AS tokens FROM recall.memories GROUP BY user_id) AS s
WHERE u.user_id = s.user_id;

CREATE OR REPLACE FUNCTION recall.count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO recall.users AS u (user_id, memory_count, total_tokens)
    SELECT user_id, count(*), sum(doc_len) FROM new_rows GROUP BY user_id ORDER BY user_id
    ON CONFLICT (user_id) DO UPDATE
    SET memory_count = u.memory_count + excluded.memory_count,
        total_tokens = u.total_tokens + excluded.total_tokens;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION recall.count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE recall.users AS u
    SET memory_count = u.memory_count - d.n, total_tokens = u.total_tokens - d.tokens
    FROM (
        SELECT user_id, count(*) AS n, sum(doc_len) AS tokens FROM old_rows GROUP BY user_id
    ) AS d
    WHERE u.user_id = d.user_id;
    RETURN NULL;
END;
$$;
