-- Every statement recall runs, as named blocks with %(name)s parameters (recall.sql loads them).

-- name: lock_migrations
-- One fixed key for everything that changes the schema (0x7265_6361_6c6c = "recall").
SELECT pg_advisory_xact_lock(125779646293100);

-- name: bootstrap_migrations
CREATE SCHEMA IF NOT EXISTS recall;
CREATE TABLE IF NOT EXISTS recall.schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: vector_extension
SELECT
    (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS installed,
    (SELECT default_version FROM pg_available_extensions WHERE name = 'vector') AS available;

-- name: create_vector_extension
CREATE EXTENSION IF NOT EXISTS vector;

-- name: migrations_table_exists
SELECT to_regclass('recall.schema_migrations') IS NOT NULL;

-- name: applied_migrations
SELECT version FROM recall.schema_migrations ORDER BY version;

-- name: migration_checksum
SELECT checksum FROM recall.schema_migrations WHERE version = %(version)s;

-- name: record_migration
INSERT INTO recall.schema_migrations (version, name, checksum)
VALUES (%(version)s, %(name)s, %(checksum)s);

-- name: can_distribute
-- A Citus coordinator whose schema has recall.distribute() (migration 0013).
SELECT to_regprocedure('recall.distribute()') IS NOT NULL
       AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus');

-- name: distribute
-- Distributes what is not yet distributed (migration 0013); the number of tables it distributed.
SELECT recall.distribute();

-- name: embedding_space_exists
-- Whether migration 0001 has run (a model can be bound at all).
SELECT to_regclass('recall.embedding_space') IS NOT NULL;

-- name: get_embedding_space
SELECT model_name, dimensions FROM recall.embedding_space;

-- name: set_embedding_space
INSERT INTO recall.embedding_space (model_name, dimensions)
VALUES (%(model_name)s, %(dimensions)s);

-- name: update_embedding_space
UPDATE recall.embedding_space
SET model_name = %(model_name)s, dimensions = %(dimensions)s, bound_at = now();

-- name: insert_memory
-- A model-written memory, inside `store_chunk`'s transaction, as the caller (migration 0018:
-- recall.insert_memory holds the one single-row INSERT of a memory; add_memory calls it too).
-- No row when the user has the same content hash already.
SELECT memory_id, memory_created_at FROM recall.insert_memory(
    %(user_id)s, %(conversation_id)s, %(user_message)s, %(ai_response)s, %(created_at)s,
    %(metadata)s, %(content_hash)s, %(embedding)s, %(embedding_model)s, %(kind)s
);

-- name: add_turn
-- One turn in one call with its repeat lookup (migration 0019, issue 37): the same turn again
-- (`inserted` false), else the user's %(nearest)s nearest memories of its kind within
-- %(max_distance)s (`inserted` NULL, nothing stored), else the turn stored (`inserted` true).
SELECT r_id AS id, r_created_at AS created_at, r_inserted AS inserted,
       r_conversation_id AS conversation_id, r_user_message AS user_message,
       r_ai_response AS ai_response, r_metadata AS metadata, r_kind AS kind
FROM recall.add_turn(
    %(user_id)s, %(conversation_id)s, %(user_message)s, %(ai_response)s, %(created_at)s,
    %(metadata)s, %(content_hash)s, %(embedding)s, %(embedding_model)s, %(kind)s,
    %(max_distance)s, %(nearest)s, %(candidates)s
);

-- name: add_memory
-- One turn in one call (migration 0009; its current body: schema.sql): sets the row-level
-- security key itself, inserts (through recall.insert_memory) unless the user has the same
-- content hash already, and returns the stored turn either way.
SELECT memory_id, memory_created_at, inserted FROM recall.add_memory(
    %(user_id)s, %(conversation_id)s, %(user_message)s, %(ai_response)s, %(created_at)s,
    %(metadata)s, %(content_hash)s, %(embedding)s, %(embedding_model)s, %(kind)s
);

-- name: create_import_table
CREATE TEMP TABLE recall_import (
    ord integer NOT NULL,
    id uuid,
    user_id text NOT NULL,
    conversation_id text,
    user_message text NOT NULL,
    ai_response text NOT NULL,
    created_at timestamptz,
    metadata jsonb NOT NULL,
    content_hash bytea NOT NULL,
    embedding vector NOT NULL,
    embedding_model text NOT NULL,
    kind text NOT NULL
) ON COMMIT DROP;

-- name: copy_import
COPY recall_import (
    ord, id, user_id, conversation_id, user_message, ai_response, created_at, metadata,
    content_hash, embedding, embedding_model, kind
) FROM STDIN (FORMAT BINARY);

-- name: import_clock
-- The time an import starts: turns of the file that carry no date are dated from it, in order.
SELECT clock_timestamp();

-- name: merge_import
-- Rows already stored (same user and content hash) are skipped, also within one batch (the
-- first in the file is kept). A turn without a date gets the import's start plus its position
-- in the file in microseconds: the file's order, whichever of two batches written at once
-- commits first. Rows go in the unique key's order, the same for every batch, so two batches
-- written at once never wait on each other in a cycle (no deadlock). A turn that carries an id
-- (a file `recall export` wrote) keeps it; the others get a new one, as a single INSERT does.
INSERT INTO recall.memories (
    id, user_id, conversation_id, user_message, ai_response, created_at, metadata,
    content_hash, embedding, embedding_model, kind
)
SELECT coalesce(id, gen_random_uuid()), user_id, conversation_id, user_message, ai_response,
       coalesce(created_at, %(clock)s::timestamptz + (%(first)s::bigint + ord) * interval '1 microsecond'),
       metadata, content_hash, embedding, embedding_model, kind
FROM recall_import
ORDER BY user_id, content_hash, ord
ON CONFLICT (user_id, content_hash) DO NOTHING;

-- name: import_ids
SELECT i.ord, m.id
FROM recall_import AS i
JOIN recall.memories AS m ON m.user_id = i.user_id AND m.content_hash = i.content_hash
ORDER BY i.ord;

-- name: user_plan
SELECT memory_count, hnsw_index FROM recall.users WHERE user_id = %(user_id)s;

-- name: search_exact
-- Exact plan (decision 0001), as one call: recall.search_exact (its current body, as every
-- function's: schema.sql) sets the row-level security key itself, so it needs no transaction
-- around it.
SELECT * FROM recall.search_exact(%(user_id)s, %(query)s, %(max_distance)s, %(limit)s);

-- name: search_indexed
-- Indexed plan for a user with an HNSW index of their own (a partial index on user_id = X),
-- as one call: recall.search_indexed (migration 0010) sets the row-level security key, the
-- HNSW candidate count and `enable_sort = off`, and runs a statement planned for this user,
-- so the partial index's predicate matches. The index holds only this user's rows, so no
-- filtering after the scan loses results.
SELECT * FROM recall.search_indexed(
    %(user_id)s, %(query)s, %(max_distance)s, %(limit)s, %(candidates)s
);

-- name: search_keyword
-- BM25 over this user's memories, as one call: recall.search_keyword (its current body:
-- schema.sql) sets the row-level security key itself. %(words)s are sanitized words (letters
-- and digits only, recall.keywords); %(query)s and %(conversation_id)s may be NULL.
SELECT * FROM recall.search_keyword(
    %(user_id)s, %(tsquery)s, %(words)s, %(query)s, %(limit)s, %(conversation_id)s
);

-- name: search_terms
-- The second stage's keyword side (migration 0014): every memory of the user holding a query
-- term (found through the user's own words, migration 0030), its BM25 and the terms it holds,
-- and one row without an id with the terms' idf (recall.bm25_idfs: BM25's idf is written in
-- SQL only, migration 0033) and the idf of a term no memory holds; no vector, so it runs while
-- the query is embedded. One call that sets the row-level security key itself. Its avgdl column
-- is left out: BM25 reads it in SQL, nothing in Python does.
SELECT id, bm25, matched, recall.bm25_idfs(term_df, memories) AS term_idf,
       recall.bm25_idf(0, memories) AS unheld_idf, memories
FROM recall.search_terms(%(user_id)s, %(tsquery)s, %(words)s, NULL::uuid[]);

-- name: held_state
-- The user's memories as they stand (migrations 0034 and 0036, recall.store.held): their stamp,
-- which any insert, update or delete of one changes, and, unless it is %(stamp)s, each memory's
-- id and row version; with the stamp, what BM25 reads besides the rows (the memory count and
-- mean length, each of %(words)s' lexeme). One call that sets the row-level security key itself.
SELECT stamp, ids, versions, lexemes, memories, avgdl
FROM recall.held_state(%(user_id)s, %(stamp)s, %(words)s);

-- name: held_rows
-- The memories of %(ids)s (every one of the user's when NULL) with the columns a search reads
-- and their lexemes (migrations 0034 and 0036, recall.store.held). One call that sets the
-- row-level security key itself.
SELECT id, version, conversation_id, user_message, ai_response, created_at, metadata, kind,
       embedding, doc_len, holds, content_hash, terms, boosts
FROM recall.held_rows(%(user_id)s, %(ids)s);

-- name: search_scoped
-- A large user's second-stage candidates in one call (migration 0021): their %(scope)s nearest
-- memories (their own HNSW index when %(indexed)s, else exact), the keyword side over those, and
-- the details of the first %(near)s of them and of the best %(best)s by BM25 (not their vectors:
-- the ranker reads none, decision 0027). One call that sets the row-level security key itself.
-- The terms' idf as in search_terms; its avgdl column is left out, as there.
SELECT part, near, id, bm25, matched, recall.bm25_idfs(term_df, memories) AS term_idf,
       recall.bm25_idf(0, memories) AS unheld_idf, memories, conversation_id, user_message,
       ai_response, created_at, metadata, kind, distance, embedding, doc_len, prev_id,
       prev_distance, next_id, next_distance
FROM recall.search_scoped(
    %(user_id)s, %(query)s, %(scope)s, %(candidates)s, %(indexed)s, %(tsquery)s, %(words)s,
    %(near)s, %(best)s, false
);

-- name: recent
SELECT id, conversation_id, user_message, ai_response, created_at, metadata, kind,
       NULL::float8 AS distance, NULL::float8 AS bm25
FROM recall.memories
WHERE user_id = %(user_id)s
ORDER BY created_at DESC, content_hash DESC  -- ties as a rebuild keeps them, not by random id
LIMIT %(limit)s;

-- name: memories_page
-- One page of a user's memories, newest first, after the cursor (created_at, id) of the
-- previous page's last row (both NULL: the first page), of one kind when `kind` is set. Keyset
-- paging: a page costs the same at any depth, and a memory written meanwhile does not shift the
-- pages already read.
SELECT id, conversation_id, user_message, ai_response, created_at, metadata, kind,
       NULL::float8 AS distance, NULL::float8 AS bm25
FROM recall.memories
WHERE user_id = %(user_id)s
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(before_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: user_summaries
-- The rolling summary of each of a user's conversations, the newest first.
SELECT conversation_id, summary, updated_at
FROM recall.summaries
WHERE user_id = %(user_id)s
ORDER BY updated_at DESC, conversation_id
LIMIT %(limit)s;

-- name: get_memory
SELECT id, conversation_id, user_message, ai_response, created_at, metadata, kind,
       NULL::float8 AS distance, NULL::float8 AS bm25
FROM recall.memories
WHERE user_id = %(user_id)s AND id = %(id)s;

-- name: count_repeat
-- A turn that repeats this memory almost word for word was written (issue 37): count it and
-- when it was seen, under the metadata key "recall" (recall.search.provenance), instead of
-- storing a second copy. A value there that is not what this writes is replaced.
UPDATE recall.memories
SET metadata = metadata || jsonb_build_object('recall',
    CASE WHEN jsonb_typeof(metadata -> 'recall') = 'object' THEN metadata -> 'recall'
         ELSE '{}'::jsonb END
    || jsonb_build_object(
        'repeats',
        CASE WHEN jsonb_typeof(metadata #> '{recall,repeats}') = 'number'
             THEN floor((metadata #>> '{recall,repeats}')::numeric)::bigint ELSE 0 END + 1,
        'last_seen', %(seen_at)s::text))
WHERE user_id = %(user_id)s AND id = %(id)s
RETURNING id, conversation_id, user_message, ai_response, created_at, metadata, kind,
          NULL::float8 AS distance, NULL::float8 AS bm25;

-- name: memories_by_ids
-- Some of a user's memories by id (a memory's sources, for the inspector), oldest first.
SELECT id, conversation_id, user_message, ai_response, created_at, metadata, kind,
       NULL::float8 AS distance, NULL::float8 AS bm25
FROM recall.memories
WHERE user_id = %(user_id)s AND id = ANY(%(ids)s::uuid[])
ORDER BY created_at, id;

-- name: restatements_of
-- The memories of a user that restate one memory: their provenance (metadata "recall") lists
-- it among what their reply quoted. A scan of the user's rows; the inspector asks for one
-- memory at a time.
SELECT id, conversation_id, user_message, ai_response, created_at, metadata, kind,
       NULL::float8 AS distance, NULL::float8 AS bm25
FROM recall.memories
WHERE user_id = %(user_id)s AND metadata #> '{recall,quoted}' ? %(id)s::text
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: delete_memory
DELETE FROM recall.memories WHERE user_id = %(user_id)s AND id = %(id)s;

-- name: forget_memories
DELETE FROM recall.memories WHERE user_id = %(user_id)s;

-- name: forget_before
-- The user's memories dated before a time (`recall forget --before`, retention by age).
DELETE FROM recall.memories WHERE user_id = %(user_id)s AND created_at < %(before)s;

-- name: forget_over_cap
-- The user's memories beyond the %(keep)s that retention's per-user cap keeps (issue 37): the
-- restatements whose source is still stored go first, oldest first (what they say is kept by
-- the source), then the other memories, oldest first. A restatement is what
-- recall.search.provenance marks one: metadata "recall" has "restates": true and "quoted"
-- names a memory of the user; one whose sources were all erased is the last holder of what it
-- says and counts as any other memory. Metadata written by hand is read defensively (the CASE
-- reads "quoted" only when it is an array, and an element only when it is a UUID's text).
-- Every subquery names the user, so Citus routes the statement to the user's one shard.
DELETE FROM recall.memories
WHERE user_id = %(user_id)s
  AND (user_id, id) IN (
      SELECT m.user_id, m.id FROM recall.memories AS m
      WHERE m.user_id = %(user_id)s
      ORDER BY
          CASE
              WHEN m.metadata #> '{recall,restates}' = 'true'::jsonb
                   AND jsonb_typeof(m.metadata #> '{recall,quoted}') = 'array'
              THEN EXISTS (
                  SELECT 1
                  FROM jsonb_array_elements_text(m.metadata #> '{recall,quoted}') AS q (id)
                  JOIN recall.memories AS s
                    ON s.user_id = %(user_id)s
                   AND s.id = CASE
                       WHEN q.id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                       THEN q.id::uuid
                   END
              )
              ELSE false
          END,
          m.created_at DESC, m.id DESC
      OFFSET %(keep)s
  );

-- name: users_with_memories_before
-- Users with a memory dated before a time (retention by age erases them user by user).
SELECT DISTINCT user_id FROM recall.memories WHERE created_at < %(before)s ORDER BY user_id;

-- name: users_over_cap
-- Users with more than %(cap)s memories, by the bookkeeping count (retention's cap).
SELECT user_id FROM recall.users WHERE memory_count > %(cap)s ORDER BY user_id;

-- name: forget_user_row
DELETE FROM recall.users WHERE user_id = %(user_id)s RETURNING hnsw_index;

-- name: users_over_threshold
SELECT user_id FROM recall.users
WHERE memory_count >= %(threshold)s AND hnsw_index IS NULL
ORDER BY memory_count DESC;

-- name: try_lock_index_builds
-- One key for every per-user index build ("recall-ix"): concurrent builds on a table deadlock.
SELECT pg_try_advisory_lock(125779646298232);

-- name: unlock_index_builds
SELECT pg_advisory_unlock(125779646298232);

-- name: set_user_index
UPDATE recall.users SET hnsw_index = %(index_name)s WHERE user_id = %(user_id)s;

-- name: index_build_memory
-- A per-user HNSW build gets more memory than the server's default, for this session only.
SET maintenance_work_mem = '256MB';

-- name: reset_index_build_memory
RESET maintenance_work_mem;

-- name: index_is_valid
SELECT i.indisvalid
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indexrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'recall' AND c.relname = %(index_name)s;

-- name: stats
SELECT
    (SELECT count(*) FROM recall.memories) AS memories,
    (SELECT count(*) FROM recall.users WHERE memory_count > 0) AS users,
    (SELECT count(*) FROM recall.users WHERE hnsw_index IS NOT NULL) AS indexed_users,
    (SELECT coalesce(max(memory_count), 0) FROM recall.users) AS largest_user,
    pg_total_relation_size('recall.memories') AS bytes;

-- name: reembed_in_place_batch
-- `metadata`: for the reply's own part where one is recorded (decision 0038), which is embedded
-- with the user text instead of the whole reply (recall.memory.own_words reads it).
SELECT user_id, id, user_message, ai_response, metadata
FROM recall.memories
WHERE embedding_model <> %(model_name)s
LIMIT %(batch)s;

-- name: reembed_in_place_update
UPDATE recall.memories
SET embedding = %(embedding)s, embedding_model = %(model_name)s
WHERE user_id = %(user_id)s AND id = %(id)s;

-- name: reembed_next_batch
SELECT user_id, id, user_message, ai_response, metadata
FROM recall.memories
WHERE embedding_next IS NULL
LIMIT %(batch)s;

-- name: reembed_next_update
UPDATE recall.memories
SET embedding_next = %(embedding)s, embedding_model = %(model_name)s
WHERE user_id = %(user_id)s AND id = %(id)s;

-- name: judging_batch
-- Memories not judged by the current rule (recall.db.judge_stored): stored before migration 0027, or
-- under an older rule. In key order after the previous batch's last row, so a run reads the
-- table once (a keyset, not OFFSET); the first batch starts after ('', the nil uuid), before
-- any user id.
SELECT user_id, id, user_message, ai_response, metadata, doc_len, kind
FROM recall.memories
WHERE (user_id, id) > (%(after_user)s, %(after_id)s)
  AND (judged IS NULL OR judged < %(rule)s)
ORDER BY user_id, id
LIMIT %(batch)s;

-- name: judging_sources
-- The stored texts of the memories some turns were given (the batch's users and source ids;
-- the caller keeps the (user, id) pairs it asked for).
SELECT user_id, id, user_message, ai_response, metadata
FROM recall.memories
WHERE user_id = ANY(%(users)s::text[]) AND id = ANY(%(ids)s::uuid[]);

-- name: judging_update
-- Record a memory's judgement under "recall", key by key (`entry` set, its "own" a string, or
-- null where the whole reply is its own; `clear` removed), and, when `reembed`, its
-- vector of its new own words; the trigger (migration 0027) fills holds, judged and supersedes
-- and recomputes fts and doc_len. A row judged meanwhile, or whose new vector is of another
-- model than the one it holds, is left as it is. Returns the new doc_len, for the user's token
-- count.
-- (Immutable functions only: Citus allows no other in an UPDATE's CASE.)
UPDATE recall.memories
SET metadata = jsonb_set(
        metadata, '{recall}',
        (CASE WHEN jsonb_typeof(metadata -> 'recall') = 'object' THEN metadata -> 'recall'
              ELSE '{}'::jsonb END - %(clear)s::text[])
        || %(entry)s::jsonb
    ),
    embedding = CASE WHEN %(reembed)s::boolean THEN %(embedding)s ELSE embedding END
WHERE user_id = %(user_id)s AND id = %(id)s
  AND (judged IS NULL OR judged < %(rule)s)
  AND (NOT %(reembed)s::boolean OR embedding_model = %(model_name)s)
RETURNING doc_len;

-- name: judging_try_lock
-- One process at a time judges the stored memories ("recall-jd"); the others leave it to it.
SELECT pg_try_advisory_lock(125779646296676);

-- name: judging_unlock
SELECT pg_advisory_unlock(125779646296676);

-- name: judging_tokens
-- A user's document lengths changed by `delta` lexemes (BM25's average length, migration 0002:
-- only inserts and deletes keep it otherwise).
UPDATE recall.users SET total_tokens = total_tokens + %(delta)s WHERE user_id = %(user_id)s;

-- name: reembed_lock_table
LOCK TABLE recall.memories IN SHARE ROW EXCLUSIVE MODE;

-- name: reembed_swap_drop
-- The swap is four statements run one by one (Citus passes each on to the shards by itself).
ALTER TABLE recall.memories DROP COLUMN embedding;

-- name: reembed_swap_rename
ALTER TABLE recall.memories RENAME COLUMN embedding_next TO embedding;

-- name: reembed_swap_not_null
ALTER TABLE recall.memories ALTER COLUMN embedding SET NOT NULL;

-- name: reembed_swap_indexes
UPDATE recall.users SET hnsw_index = NULL WHERE hnsw_index IS NOT NULL;

-- name: progress_get
SELECT last_hash, last_created_at, last_memory_id FROM recall.progress
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s;

-- name: progress_set
INSERT INTO recall.progress AS p
    (user_id, conversation_id, last_hash, last_created_at, last_memory_id)
VALUES (%(user_id)s, %(conversation_id)s, %(last_hash)s, %(last_created_at)s, %(last_memory_id)s)
ON CONFLICT (user_id, conversation_id) DO UPDATE
SET last_hash = excluded.last_hash, last_created_at = excluded.last_created_at,
    last_memory_id = excluded.last_memory_id, updated_at = excluded.updated_at;  -- as below

-- name: turns_after
-- The conversation's turns after the tracker's position, oldest first.
SELECT id, user_message, ai_response, created_at, content_hash
FROM recall.memories
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s AND kind = 'turn'
  AND (created_at, id) > (%(after_at)s::timestamptz, %(after_id)s::uuid)
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: pending_conversations
SELECT m.user_id, m.conversation_id, count(*) AS pending
FROM recall.memories AS m
LEFT JOIN recall.progress AS p
    ON p.user_id = m.user_id AND p.conversation_id = m.conversation_id
WHERE m.kind = 'turn' AND m.conversation_id IS NOT NULL
  AND (%(user_id)s::text IS NULL OR m.user_id = %(user_id)s::text)
  AND (%(conversation_id)s::text IS NULL OR m.conversation_id = %(conversation_id)s::text)
  AND (p.user_id IS NULL OR (m.created_at, m.id) > (p.last_created_at, p.last_memory_id))
GROUP BY m.user_id, m.conversation_id
ORDER BY m.user_id, m.conversation_id;

-- name: nearest_summary
-- Exact nearest model-written memory of the user (for near-duplicate detection).
WITH scored AS MATERIALIZED (
    SELECT id, embedding <=> %(query)s AS distance, created_at, content_hash
    FROM recall.memories
    WHERE user_id = %(user_id)s AND kind = 'summary'
)
SELECT id, distance FROM scored ORDER BY distance, created_at DESC, content_hash LIMIT 1;

-- name: update_summary_memory
UPDATE recall.memories
SET user_message = %(user_message)s, metadata = %(metadata)s, embedding = %(embedding)s,
    content_hash = %(content_hash)s, embedding_model = %(embedding_model)s,
    conversation_id = %(conversation_id)s, created_at = now()
WHERE user_id = %(user_id)s AND id = %(id)s;

-- name: chat_summary_get
SELECT summary, last_memory_id, updated_at FROM recall.summaries
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s;

-- name: chat_summary_set
INSERT INTO recall.summaries AS s (user_id, conversation_id, summary, last_memory_id)
VALUES (%(user_id)s, %(conversation_id)s, %(summary)s, %(last_memory_id)s)
ON CONFLICT (user_id, conversation_id) DO UPDATE
SET summary = excluded.summary, last_memory_id = excluded.last_memory_id,
    updated_at = excluded.updated_at;  -- the default now(): Citus wants IMMUTABLE here

-- name: conversation_recent
-- The conversation's newest memories of one kind.
SELECT id, conversation_id, user_message, ai_response, created_at, metadata, kind,
       NULL::float8 AS distance, NULL::float8 AS bm25
FROM recall.memories
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s AND kind = %(kind)s
ORDER BY created_at DESC, content_hash DESC  -- ties as a rebuild keeps them, not by random id
LIMIT %(limit)s;

-- name: forget_progress
DELETE FROM recall.progress WHERE user_id = %(user_id)s;

-- name: forget_summaries
DELETE FROM recall.summaries WHERE user_id = %(user_id)s;

-- name: user_buckets
-- Users and memories per user size bucket (for `recall stats`).
SELECT bucket, count(*) AS users, sum(memory_count) AS memories
FROM (
    SELECT memory_count,
           CASE WHEN memory_count <= 10 THEN '1-10'
                WHEN memory_count <= 100 THEN '11-100'
                WHEN memory_count <= 1000 THEN '101-1,000'
                WHEN memory_count <= 10000 THEN '1,001-10,000'
                ELSE 'over 10,000' END AS bucket
    FROM recall.users
    WHERE memory_count > 0
) AS sized
GROUP BY bucket
ORDER BY min(memory_count);

-- name: set_user
-- Row-level security key for this transaction (migration 0004), through the function that the
-- searches use too: on Citus it is a SET command that reaches the workers (migration 0013).
SELECT recall.swap_user_key(%(user_id)s);

-- name: set_all_users
-- Ingestion of many users at once and operator statistics: every row, for this transaction
-- (migration 0013; on Citus it reaches the workers too).
SELECT recall.set_all_users();

-- name: session_utc
-- Dates come back in UTC whatever time zone the server was made in (initdb takes the machine's):
-- a memory's date in a prompt is the same on every machine (issue 44).
SET TIME ZONE 'UTC';

-- name: warm_text_search
-- A new connection loads the English stemmer and stop words at its first full-text parse,
-- about 7 ms; the pool does it before lending the connection (recall.db).
SELECT to_tsvector('english', 'recall warms up its text search');

-- name: can_use_app_role
SELECT to_regrole('recall_app') IS NOT NULL
       AND pg_has_role(session_user, 'recall_app', 'MEMBER');

-- name: use_app_role
SET ROLE recall_app;

-- name: use_owner_role
RESET ROLE;

-- name: is_citus
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus');

-- name: citus_local_ddl
-- This transaction's DDL changes the coordinator's table only (recall.db.citus.keep_inline).
SET LOCAL citus.enable_ddl_propagation = off;

-- name: citus_on_shards
-- The command holds a placeholder where Citus puts each shard's name.
SELECT shardid, success, result
FROM run_command_on_shards('recall.memories', %(command)s::text);
