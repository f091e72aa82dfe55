-- Memory creation (seed 003): the per-conversation progress tracker, the rolling summary, and
-- weighted full-text search over model-written memories (title A, entities and key phrases B,
-- the memory text D).

CREATE TABLE recall.progress (
    user_id text NOT NULL,
    conversation_id text NOT NULL,
    last_hash bytea NOT NULL,
    last_created_at timestamptz NOT NULL,
    last_memory_id uuid NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, conversation_id)
);

CREATE TABLE recall.summaries (
    user_id text NOT NULL,
    conversation_id text NOT NULL,
    summary text NOT NULL,
    last_memory_id uuid NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, conversation_id)
);

DROP INDEX recall.memories_fts_idx;
ALTER TABLE recall.memories DROP COLUMN fts;
ALTER TABLE recall.memories ADD COLUMN fts tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english'::regconfig, coalesce(metadata ->> 'title', '')), 'A')
    || setweight(
        to_tsvector(
            'english'::regconfig,
            coalesce(metadata ->> 'entities_text', '') || ' '
            || coalesce(metadata ->> 'key_phrases_text', '')
        ),
        'B'
    )
    || to_tsvector('english'::regconfig, user_message || ' ' || ai_response)
) STORED;
CREATE INDEX memories_fts_idx ON recall.memories USING gin (fts);

-- conversations are read in order by the tracker and the recent-memories node
CREATE INDEX memories_conversation_idx
    ON recall.memories (user_id, conversation_id, created_at, id);
