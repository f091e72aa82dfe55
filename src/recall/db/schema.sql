-- The code of recall's schema as the migrations leave it: the current definition of every
-- function in the `recall` schema, the triggers that call three of them and the row-level
-- security policies (issue 48, docs/decisions/0044-one-schema-file.md). Tables, indexes and
-- types are the migrations' alone.
--
-- The migrations (migrations/NNNN_*.sql, append-only) are history: a function's body may have
-- been replaced several times, and its settings changed by other files. This file is what they
-- add up to, in one place; `-- body:` names the migration whose body is current.
-- tests/integration/test_schema.py applies every migration to a fresh database and checks that
-- this file defines exactly the functions, triggers and policies found there, each the same
-- (pg_get_functiondef and its like, whitespace aside), naming any that differ.
--
-- The rule: a change to a function (or trigger, or policy) is one edit here and a new
-- migration that makes the same change, the function's body copied from here (keeping its
-- settings: see migration 0026). recall never runs this file: a database gets its schema from
-- the migrations only. `public` in a search_path is the schema pgvector is installed in (the
-- migrations read it from pg_extension; public unless pgvector was installed elsewhere). What
-- differs on a Citus coordinator is in recall.distribute_0013()'s body.

-- === A memory's bookkeeping: its text search columns and each user's counters ===

-- Number of lexeme occurrences in a tsvector: the document length BM25 normalizes by.
-- body: 0002_keyword_search.sql
CREATE OR REPLACE FUNCTION recall.tsvector_tokens(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0)::integer
    FROM unnest(v) AS t
$$;

-- The memories_text_search trigger: `fts` (title A, entities and key phrases B, the body) and
-- `doc_len` from one parse of the body: the user text and the reply's own words (the reply less
-- what it quotes: metadata recall.own), else the whole reply.
-- body: 0027_judged_at_write.sql
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

-- Statement-level counters with transition tables: each user's memory count and total length
-- (recall.users), one upsert per statement.
-- body: 0002_keyword_search.sql
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


-- body: 0002_keyword_search.sql
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

-- Every update of memories writes their users' rows, unchanged: a new row version, the held
-- rows' stamp (recall.held_state, migration 0036).
-- body: 0036_held_keyword_side.sql
CREATE OR REPLACE FUNCTION recall.count_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT user_id FROM old_rows UNION SELECT user_id FROM new_rows ORDER BY 1 LOOP
        UPDATE recall.users AS u SET memory_count = u.memory_count WHERE u.user_id = r.user_id;
    END LOOP;
    RETURN NULL;
END;
$$;

-- the triggers (migrations 0001, 0007 and 0036)
CREATE OR REPLACE TRIGGER memories_count_inserted AFTER INSERT ON recall.memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall.count_inserted();

CREATE OR REPLACE TRIGGER memories_count_deleted AFTER DELETE ON recall.memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION recall.count_deleted();

CREATE OR REPLACE TRIGGER memories_count_updated AFTER UPDATE ON recall.memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION recall.count_updated();

CREATE OR REPLACE TRIGGER memories_text_search
    BEFORE INSERT OR UPDATE OF user_message, ai_response, metadata, fts, doc_len
    ON recall.memories
    FOR EACH ROW EXECUTE FUNCTION recall.memories_text_search();

-- === Row-level security: the key, and the policies that read it ===

-- Set the row-level security key for the rest of this transaction; return the one it replaces
-- (set_config treats NULL as the empty key, which matches no row).
-- body: 0005_search_function.sql
CREATE OR REPLACE FUNCTION recall.swap_user_key(p_user_id text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    previous text := current_setting('recall.user_id', true);
BEGIN
    PERFORM set_config('recall.user_id', coalesce(p_user_id, ''), true);
    RETURN previous;
END;
$$;

-- Row-level security for many users at once (ingestion, statistics).
-- body: 0013_citus.sql
CREATE OR REPLACE FUNCTION recall.set_all_users() RETURNS void LANGUAGE sql AS $$
    SELECT set_config('recall.all_users', 'on', true);
$$;

-- own_rows on each table of user data (migration 0004; the key read once per query, as an
-- InitPlan, since 0008)
CREATE POLICY own_rows ON recall.memories
    USING (user_id = (SELECT current_setting('recall.user_id', true))
           OR (SELECT current_setting('recall.all_users', true)) = 'on')
    WITH CHECK (user_id = (SELECT current_setting('recall.user_id', true))
                OR (SELECT current_setting('recall.all_users', true)) = 'on');

CREATE POLICY own_rows ON recall.users
    USING (user_id = (SELECT current_setting('recall.user_id', true))
           OR (SELECT current_setting('recall.all_users', true)) = 'on')
    WITH CHECK (user_id = (SELECT current_setting('recall.user_id', true))
                OR (SELECT current_setting('recall.all_users', true)) = 'on');

CREATE POLICY own_rows ON recall.progress
    USING (user_id = (SELECT current_setting('recall.user_id', true))
           OR (SELECT current_setting('recall.all_users', true)) = 'on')
    WITH CHECK (user_id = (SELECT current_setting('recall.user_id', true))
                OR (SELECT current_setting('recall.all_users', true)) = 'on');

CREATE POLICY own_rows ON recall.summaries
    USING (user_id = (SELECT current_setting('recall.user_id', true))
           OR (SELECT current_setting('recall.all_users', true)) = 'on')
    WITH CHECK (user_id = (SELECT current_setting('recall.user_id', true))
                OR (SELECT current_setting('recall.all_users', true)) = 'on');

-- === Writes: one memory row, a turn, a turn with its repeat lookup ===

-- The one single-row INSERT of a memory, with its caller's rights: recall.add_memory and a
-- model-written memory's transaction (queries.sql insert_memory) both go through it.
-- body: 0018_one_memory_insert.sql
CREATE OR REPLACE FUNCTION recall.insert_memory(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text
) RETURNS TABLE (memory_id uuid, memory_created_at timestamptz) LANGUAGE sql AS $$
    INSERT INTO recall.memories AS m (
        user_id, conversation_id, user_message, ai_response, created_at, metadata,
        content_hash, embedding, embedding_model, kind
    )
    VALUES (
        p_user_id, p_conversation_id, p_user_message, p_ai_response,
        coalesce(p_created_at, now()), p_metadata, p_content_hash, p_embedding,
        p_embedding_model, p_kind
    )
    ON CONFLICT (user_id, content_hash) DO NOTHING
    RETURNING m.id, m.created_at;
$$;

-- A turn in one call: inserted unless the user has one with the same content hash; the
-- stored turn's id and time either way, and whether this call inserted it.
-- body: 0018_one_memory_insert.sql
CREATE OR REPLACE FUNCTION recall.add_memory(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text
) RETURNS TABLE (memory_id uuid, memory_created_at timestamptz, inserted boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    SELECT i.memory_id, i.memory_created_at, true
    FROM recall.insert_memory(
        p_user_id, p_conversation_id, p_user_message, p_ai_response, p_created_at,
        p_metadata, p_content_hash, p_embedding, p_embedding_model, p_kind
    ) AS i;
    IF NOT FOUND THEN
        RETURN QUERY
        SELECT m.id, m.created_at, false
        FROM recall.memories AS m
        WHERE m.user_id = p_user_id AND m.content_hash = p_content_hash;
    END IF;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- A turn's write with its repeat lookup: the same turn again (inserted false), else the
-- user's nearest memories within p_max_distance when it is given (inserted NULL: nothing stored,
-- the caller compares their words), else the turn stored through recall.add_memory.
-- body: 0019_add_turn_function.sql
CREATE OR REPLACE FUNCTION recall.add_turn(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text, p_max_distance float8, p_nearest integer,
    p_candidates integer
) RETURNS TABLE (
    r_id uuid, r_created_at timestamptz, r_inserted boolean, r_conversation_id text,
    r_user_message text, r_ai_response text, r_metadata jsonb, r_kind text
) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    own_index text;
BEGIN
    RETURN QUERY
    SELECT m.id, m.created_at, false, m.conversation_id, m.user_message, m.ai_response,
           m.metadata, m.kind
    FROM recall.memories AS m
    WHERE m.user_id = p_user_id AND m.content_hash = p_content_hash;
    IF FOUND THEN
        PERFORM recall.swap_user_key(previous);
        RETURN;
    END IF;
    IF p_max_distance IS NOT NULL THEN
        SELECT u.hnsw_index INTO own_index FROM recall.users AS u WHERE u.user_id = p_user_id;
        IF own_index IS NULL THEN
            RETURN QUERY
            SELECT h.id, h.created_at, NULL::boolean, h.conversation_id, h.user_message,
                   h.ai_response, h.metadata, h.kind
            FROM recall.search_exact(p_user_id, p_embedding, p_max_distance, p_nearest) AS h
            WHERE h.kind = p_kind;
        ELSE
            RETURN QUERY
            SELECT h.id, h.created_at, NULL::boolean, h.conversation_id, h.user_message,
                   h.ai_response, h.metadata, h.kind
            FROM recall.search_indexed(
                p_user_id, p_embedding, p_max_distance, p_nearest, p_candidates
            ) AS h
            WHERE h.kind = p_kind;
        END IF;
        IF FOUND THEN
            PERFORM recall.swap_user_key(previous);
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT a.memory_id, a.memory_created_at, a.inserted, NULL::text, NULL::text, NULL::text,
           NULL::jsonb, NULL::text
    FROM recall.add_memory(
        p_user_id, p_conversation_id, p_user_message, p_ai_response, p_created_at,
        p_metadata, p_content_hash, p_embedding, p_embedding_model, p_kind
    ) AS a;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- === Searches of one user's memories (each sets the row-level security key itself) ===

-- A query term's idf among p_n memories of which p_df hold it: ln(1 + (n - df + 0.5) / (df +
-- 0.5)), never negative. The one place it is written: recall.bm25_term below, and the keyword
-- side's statement (queries.sql search_terms, through recall.bm25_idfs) for the second stage's
-- features. Inlined into its callers (one expression, IMMUTABLE, no SET).
-- body: 0033_bm25_idf_in_sql.sql
CREATE OR REPLACE FUNCTION recall.bm25_idf(p_df float8, p_n float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ln(1 + (p_n - p_df + 0.5) / (p_df + 0.5))
$$;

-- Each query term's idf, in the terms' order, 0 for a term no memory holds (df 0); NULL for
-- NULL without running (STRICT): the keyword side's rows other than its statistics row.
-- body: 0033_bm25_idf_in_sql.sql
CREATE OR REPLACE FUNCTION recall.bm25_idfs(p_dfs float8[], p_n float8) RETURNS float8[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ARRAY(
        SELECT CASE WHEN u.df > 0 THEN recall.bm25_idf(u.df, p_n) ELSE 0 END
        FROM unnest(p_dfs) WITH ORDINALITY AS u(df, ord)
        ORDER BY u.ord
    )
$$;

-- One query term's share of a document's BM25: idf * (k1 + 1) / (1 + k1 * ((1 - b) + b *
-- doc_len / avgdl)) times the term's boost, k1 = 1.2, b = 0.75, idf = recall.bm25_idf, a term
-- counted once per document. The one place BM25 is written: the memories' keyword searches
-- below and RecallStore's (items.sql store_search_ranked) sum it over a document's terms.
-- Inlined into its callers' queries (one expression, IMMUTABLE, no SET).
-- body: 0033_bm25_idf_in_sql.sql
CREATE OR REPLACE FUNCTION recall.bm25_term(
    p_df float8, p_n float8, p_doc_len integer, p_avgdl float8, p_boost float8
) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_boost * recall.bm25_idf(p_df, p_n)
           * 2.2 / (1 + 1.2 * (0.25 + 0.75 * p_doc_len / p_avgdl))
$$;

-- The exact plan of decision 0001: every row of the user scored, the texts fetched for the
-- winners only; ties go to the newer memory, then by content hash (migration 0023).
-- body: 0027_judged_at_write.sql
CREATE OR REPLACE FUNCTION recall.search_exact(
    p_user_id text, p_query vector, p_max_distance float8, p_limit integer
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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

-- The nearest memories of a user with an HNSW index of their own that hold something, as
-- (id, distance, created_at, content_hash), nearest first (ties to the newer memory, then by
-- content hash): $2 candidates from the index, those within distance $3 of the query $1, the
-- first $4. The user id a literal, so the planner matches their partial index. The one
-- statement of recall.search_indexed_sql (the semantic search) and recall.search_scope (a large
-- user's scope).
-- body: 0037_scope_ids_only.sql
CREATE OR REPLACE FUNCTION recall.search_nearest_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $$
SELECT format($q$
    SELECT c.id, c.distance, c.created_at, c.content_hash
    FROM (
        SELECT id, embedding <=> $1 AS distance, created_at, content_hash
        FROM recall.memories
        WHERE user_id = %1$L AND (holds IS NULL OR holds = 'statement')
        ORDER BY embedding <=> $1
        LIMIT $2
    ) AS c
    WHERE c.distance <= $3
    ORDER BY c.distance, c.created_at DESC, c.content_hash
    LIMIT $4
$q$, p_user_id);
$$;

-- The statement recall.search_indexed runs for a user with an HNSW index of their own: their
-- nearest (recall.search_nearest_sql) with their texts; tests EXPLAIN it.
-- body: 0037_scope_ids_only.sql
CREATE OR REPLACE FUNCTION recall.search_indexed_sql(p_user_id text) RETURNS text
LANGUAGE sql STABLE AS $$
SELECT format($q$
    WITH best AS MATERIALIZED (%2$s)
    SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at, m.metadata,
           m.kind, best.distance, NULL::float8 AS bm25
    FROM best
    JOIN recall.memories AS m ON m.user_id = %1$L AND m.id = best.id
    ORDER BY best.distance, best.created_at DESC, best.content_hash
$q$, p_user_id, recall.search_nearest_sql(p_user_id));
$$;

-- The indexed search (decision 0001) as one call.
-- body: 0010_indexed_search_function.sql
CREATE OR REPLACE FUNCTION recall.search_indexed(
    p_user_id text, p_query vector, p_max_distance float8, p_limit integer, p_candidates integer
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql SECURITY DEFINER
SET enable_sort = off
SET hnsw.ef_search = 40
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    PERFORM set_config('hnsw.ef_search', greatest(p_candidates, p_limit)::text, true);
    RETURN QUERY EXECUTE recall.search_indexed_sql(p_user_id)
        USING p_query, greatest(p_candidates, p_limit), p_max_distance, p_limit;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- The keys a memory's row has in the index of each user's own words (migration 0030): each
-- lexeme of its `fts`, prefixed by the user's id, so one user's memories holding a word are
-- found without reading any other user's (an index over the lexemes alone returns every user's,
-- a cost that grows with the table). A lexeme holds no space, so no two users share a key.
-- body: 0030_user_terms.sql
CREATE OR REPLACE FUNCTION recall.user_terms(p_user_id text, p_fts tsvector) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY(SELECT p_user_id || ' ' || l FROM unnest(tsvector_to_array(p_fts)) AS l)
$$;

-- The keys of the query's words in that index: each word's lexemes, as `fts` holds them,
-- prefixed by the user's id. A memory that matches a word's tsquery holds all of that word's
-- lexemes, so it holds one of these keys: the index narrows, the tsquery decides.
-- body: 0030_user_terms.sql
CREATE OR REPLACE FUNCTION recall.user_word_keys(p_user_id text, p_words text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY(
        SELECT DISTINCT p_user_id || ' ' || l
        FROM unnest(coalesce(p_words, '{}'::text[])) AS w,
             unnest(tsvector_to_array(to_tsvector('english'::regconfig, w))) AS l
    )
$$;

-- BM25 over this user's memories (optionally one conversation), exactly: df among the
-- matching rows, N and the mean length from recall.users; a term in a title counts double, in
-- entities or key phrases one and a half times; the sum rounded to nine decimals so that ties
-- are ties wherever rows sit (migration 0016).
-- body: 0032_bm25_rounded_in_float.sql
CREATE OR REPLACE FUNCTION recall.search_keyword(
    p_user_id text, p_tsquery text, p_words text[], p_query vector, p_limit integer,
    p_conversation_id text
) RETURNS SETOF recall.search_hit LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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
          -- found through this user's own words (0030), then checked by ts_match_vq: @@ in
          -- a form the planner matches to no index
          AND recall.user_terms(m.user_id, m.fts) && recall.user_word_keys(p_user_id, p_words)
          AND ts_match_vq(m.fts, q.query) AND (m.holds IS NULL OR m.holds = 'statement')
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
               ) * 1e9) / 1e9 AS bm25
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

-- The second stage's keyword side: every memory of the user (of p_scope when given) holding
-- a query term, with its BM25 (as recall.search_keyword's) and the terms it holds, after one
-- row without an id that carries the terms' document frequencies, N and the mean length.
-- body: 0035_search_terms_tie_order.sql
CREATE OR REPLACE FUNCTION recall.search_terms(
    p_user_id text, p_tsquery text, p_words text[], p_scope uuid[]
) RETURNS SETOF recall.search_term_hit LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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
        -- each with its place in the order ties take (the newer memory first, then by content
        -- hash, migration 0023): one sort here instead of a time and a hash carried through
        -- the aggregate below for every memory (migration 0035)
        SELECT u.id, u.fts, u.doc_len,
               row_number() OVER (ORDER BY u.created_at DESC, u.content_hash) AS tie
        FROM (
            -- the user's memories holding a query term, or those of the scope (one branch runs)
            SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
            FROM recall.memories AS m, q
            WHERE p_scope IS NULL AND m.user_id = p_user_id
              -- found through this user's own words (0030), as in recall.search_keyword
              AND recall.user_terms(m.user_id, m.fts) && recall.user_word_keys(p_user_id, p_words)
              AND ts_match_vq(m.fts, q.query) AND (m.holds IS NULL OR m.holds = 'statement')
            UNION ALL
            SELECT m.id, m.fts, m.doc_len, m.created_at, m.content_hash
            FROM unnest(p_scope) AS s(id)
            JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = s.id
            CROSS JOIN q
            WHERE m.fts @@ q.query AND (m.holds IS NULL OR m.holds = 'statement')
        ) AS u
    ), hits AS MATERIALIZED (
        -- a term in a memory's title (weight A) counts double, in its entities or key phrases
        -- (weight B) one and a half times, as in recall.search_keyword
        SELECT mt.id, mt.doc_len, mt.tie, t.term_no,
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
               q.n AS memories, q.avgdl, NULL::bigint AS tie
        FROM q
        UNION ALL
        SELECT 1, hits.id,
               -- rounded: a tie stays a tie whatever order the terms are summed in (see 0016)
               round(sum(
                   recall.bm25_term(df.df, q.n, hits.doc_len, q.avgdl, hits.boost)
               ) * 1e9) / 1e9,
               array_agg(hits.term_no ORDER BY hits.term_no),
               NULL::float8[], NULL::float8, NULL::float8, min(hits.tie)
        FROM hits JOIN df USING (term_no) CROSS JOIN q
        GROUP BY hits.id
    )
    SELECT r.id, r.bm25, r.matched, r.term_df, r.memories, r.avgdl
    FROM rows AS r
    ORDER BY r.part, r.bm25 DESC, r.tie;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- The second stage's vector side as a version before 0021 calls it (with every vector).
-- body: 0014_search_candidates.sql
CREATE OR REPLACE FUNCTION recall.search_details(
    p_user_id text, p_query vector, p_limit integer, p_ids uuid[]
) RETURNS SETOF recall.search_detail LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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
           m.kind, m.embedding <=> p_query, m.embedding, m.doc_len,
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

-- The second stage's vector side: the user's p_limit nearest memories (exact) and p_ids,
-- each with its distance, its vector when p_vectors, its length, and the turns before and after
-- it in its conversation.
-- body: 0037_scope_ids_only.sql
CREATE OR REPLACE FUNCTION recall.search_details(
    p_user_id text, p_query vector, p_limit integer, p_ids uuid[], p_vectors boolean
) RETURNS SETOF recall.search_detail LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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
    SELECT d.id, d.conversation_id, d.user_message, d.ai_response, d.created_at, d.metadata,
           d.kind, d.distance, d.embedding, d.doc_len, d.prev_id, d.prev_distance, d.next_id,
           d.next_distance
    FROM (
        SELECT m.id, m.conversation_id, m.user_message, m.ai_response, m.created_at,
               m.metadata, m.kind, m.embedding <=> p_query AS distance,
               CASE WHEN p_vectors THEN m.embedding END AS embedding, m.doc_len,
               pv.id AS prev_id, pv.distance AS prev_distance, nx.id AS next_id,
               nx.distance AS next_distance, m.content_hash
        FROM picked
        JOIN recall.memories AS m ON m.user_id = p_user_id AND m.id = picked.id
        -- the turn before and after, in (created_at, content_hash) order: two turns of one
        -- conversation with the same time are in the same order in every database (the
        -- created_at bound keeps the scan on the (user_id, conversation_id, created_at, id)
        -- index)
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
        -- a fence: the order below is a sort of these rows, never an HNSW index's order
        -- (an index over every user's vectors, read in its order, returns only its nearest
        -- few and would drop the rest; migration 0037)
        OFFSET 0
    ) AS d
    ORDER BY d.distance, d.created_at DESC, d.content_hash;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- A large user's scope: the ids of their p_scope nearest memories that hold something, at a
-- distance of at most 2, as recall.search_indexed (through their own HNSW index, p_candidates
-- wide, when p_indexed; its statement, recall.search_nearest_sql, without reading the rows again
-- for their texts) or recall.search_exact returns them. Called by recall.search_scoped, under
-- its owner's rights and row-level security key.
-- body: 0037_scope_ids_only.sql
CREATE OR REPLACE FUNCTION recall.search_scope(
    p_user_id text, p_query vector, p_scope integer, p_candidates integer, p_indexed boolean
) RETURNS uuid[] LANGUAGE plpgsql
SET enable_sort = off
SET hnsw.ef_search = 40
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    nearest uuid[];
BEGIN
    IF p_indexed THEN
        PERFORM set_config('hnsw.ef_search', greatest(p_candidates, p_scope)::text, true);
        EXECUTE format(
            'SELECT coalesce(array_agg(best.id ORDER BY best.distance, best.created_at DESC, '
            || 'best.content_hash), ''{}''::uuid[]) FROM (%s) AS best',
            recall.search_nearest_sql(p_user_id)
        ) INTO nearest USING p_query, greatest(p_candidates, p_scope), 2.0::float8, p_scope;
    ELSE  -- every row of the user scored: their texts joined for the 60 cost little beside it
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'::uuid[]) INTO nearest
        FROM recall.search_exact(p_user_id, p_query, 2.0, p_scope)
            WITH ORDINALITY AS h(id, conversation_id, user_message, ai_response, created_at,
                                 metadata, kind, distance, bm25, ord);
    END IF;
    RETURN nearest;
END;
$$;

-- A large user's second-stage candidates in one call: their p_scope nearest memories, the
-- keyword side over those (recall.search_terms) and the details (recall.search_details) of the
-- first p_near of them and of the best p_best by BM25.
-- body: 0037_scope_ids_only.sql
CREATE OR REPLACE FUNCTION recall.search_scoped(
    p_user_id text, p_query vector, p_scope integer, p_candidates integer, p_indexed boolean,
    p_tsquery text, p_words text[], p_near integer, p_best integer, p_vectors boolean
) RETURNS SETOF recall.search_scoped_row LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    nearest uuid[];
BEGIN
    -- the scope: the ids of the nearest, as the store's own vector search orders them
    nearest := recall.search_scope(p_user_id, p_query, p_scope, p_candidates, p_indexed);
    RETURN QUERY
    WITH terms AS MATERIALIZED (
        -- in recall.search_terms' order: the statistics row, then best first by BM25
        SELECT t.*
        FROM recall.search_terms(p_user_id, p_tsquery, p_words, nearest)
            WITH ORDINALITY AS t(id, bm25, matched, term_df, memories, avgdl, place)
    ), best AS (
        SELECT t.id, t.place FROM terms AS t
        WHERE t.id IS NOT NULL
        ORDER BY t.place
        LIMIT greatest(p_best, 0)
    ), wanted AS (
        SELECT array_cat(nearest[1:greatest(p_near, 0)],
                         coalesce(array_agg(best.id ORDER BY best.place), '{}')) AS ids
        FROM best
    )
    SELECT x.part, x.near, x.id, x.bm25, x.matched, x.term_df, x.memories, x.avgdl,
           x.conversation_id, x.user_message, x.ai_response, x.created_at, x.metadata, x.kind,
           x.distance, x.embedding, x.doc_len, x.prev_id, x.prev_distance, x.next_id,
           x.next_distance
    FROM (
        SELECT CASE WHEN t.id IS NULL THEN 0 ELSE 1 END::smallint AS part, NULL::integer AS near,
               t.id, t.bm25, t.matched, t.term_df, t.memories, t.avgdl,
               NULL::text AS conversation_id, NULL::text AS user_message,
               NULL::text AS ai_response, NULL::timestamptz AS created_at,
               NULL::jsonb AS metadata, NULL::text AS kind, NULL::float8 AS distance,
               NULL::vector AS embedding, NULL::integer AS doc_len,
               NULL::uuid AS prev_id, NULL::float8 AS prev_distance, NULL::uuid AS next_id,
               NULL::float8 AS next_distance, t.place AS sort
        FROM terms AS t
        UNION ALL
        SELECT 2::smallint, array_position(nearest[1:greatest(p_near, 0)], d.id),
               d.id, NULL::float8, NULL::integer[], NULL::float8[], NULL::float8, NULL::float8,
               d.conversation_id, d.user_message, d.ai_response, d.created_at, d.metadata,
               d.kind, d.distance, d.embedding, d.doc_len, d.prev_id, d.prev_distance,
               d.next_id, d.next_distance, d.ordinality
        FROM wanted,
             recall.search_details(p_user_id, p_query, 0, wanted.ids, p_vectors)
                 WITH ORDINALITY AS d
    ) AS x
    ORDER BY x.part, x.sort;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- The user's memories as they stand: a stamp, the xor of a 64-bit hash of each memory's id
-- seeded with its row version (xmin: it changes with every insert and update of the row; a
-- deleted row is gone), so that any write to them changes it; and, unless the stamp is p_stamp
-- (the one the caller's rows were read under), each memory's id and row version. What a search
-- of the version before migration 0036 reads while the query is embedded (recall.held_state
-- since): kept for such a process during a rolling upgrade, and named by
-- recall.distribute_before_0036.
-- body: 0034_held_rows.sql
CREATE OR REPLACE FUNCTION recall.held_versions(p_user_id text, p_stamp bigint)
RETURNS TABLE (stamp bigint, ids uuid[], versions bigint[]) LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
    now_stamp bigint;
BEGIN
    -- each memory's id hashed with its row version as the seed
    SELECT coalesce(bit_xor(uuid_hash_extended(m.id, m.xmin::text::bigint)), 0) INTO now_stamp
    FROM recall.memories AS m
    WHERE m.user_id = p_user_id;
    IF now_stamp IS NOT DISTINCT FROM p_stamp THEN
        RETURN QUERY SELECT now_stamp, NULL::uuid[], NULL::bigint[];
    ELSE
        -- (a write between the two reads makes these newer than the stamp: the next call's
        -- stamp differs, and the caller compares the versions again)
        RETURN QUERY
        SELECT now_stamp, coalesce(array_agg(m.id), '{}'),
               coalesce(array_agg(m.xmin::text::bigint), '{}')
        FROM recall.memories AS m
        WHERE m.user_id = p_user_id;
    END IF;
    PERFORM recall.swap_user_key(previous);
END;
$$;

-- The user's memories of p_ids (every one when NULL), with the columns a search reads, and
-- each memory's lexemes with the boost recall.search_terms gives a query term it holds.
-- body: 0036_held_keyword_side.sql
CREATE OR REPLACE FUNCTION recall.held_rows(p_user_id text, p_ids uuid[])
RETURNS SETOF recall.held_row LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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

-- The user's memories as they stand: a stamp, the row version of the user's row in
-- recall.users, which every write to their memories renews (NULL: no row), and, unless it is
-- p_stamp, each memory's id and row version; and what BM25 reads besides the rows, in the same
-- snapshot as the stamp: N and the mean length as recall.search_terms takes them (NULL for a user without
-- a row in recall.users), and each of p_words' lexeme, in order ('' for a stop word; NULL for a
-- word that is not one lexeme at one position).
-- body: 0036_held_keyword_side.sql
CREATE OR REPLACE FUNCTION recall.held_state(p_user_id text, p_stamp bigint, p_words text[])
RETURNS TABLE (
    stamp bigint, ids uuid[], versions bigint[], lexemes text[], memories float8, avgdl float8
) LANGUAGE plpgsql SECURITY DEFINER
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, public, pg_temp AS $$
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

-- === RecallStore ===

-- Filter values that are dates or times compare as times: an ISO 8601 text with a time and
-- no offset is taken as UTC; anything else is NULL (and so matches no range).
-- body: 0011_store_items.sql
CREATE OR REPLACE FUNCTION recall.store_timestamp(s text) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF s IS NULL OR s !~ '^\d{4}-\d{2}-\d{2}' THEN
        RETURN NULL;
    END IF;
    IF s ~ '\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*([Zz]|[+-]\d{2}(:?\d{2})?)$' THEN
        RETURN s::timestamptz;
    END IF;
    RETURN s::timestamp AT TIME ZONE 'UTC';
EXCEPTION
    WHEN data_exception THEN
        RETURN NULL;
END;
$$;

-- === Citus: recall.distribute() and the bodies it calls, each kept under its own name ===

-- Make this database's schema a distributed one, idempotently (recall.db.migrate runs it
-- after migrating; a no-op without citus). Each migration that distributed more renamed the body
-- before it and called it first: distribute_before_0036 -> distribute_before_0034 ->
-- distribute_before_0021 ->
-- distribute_0018 -> distribute_0014 -> distribute_0013.
-- body: 0036_held_keyword_side.sql
CREATE OR REPLACE FUNCTION recall.distribute() RETURNS integer LANGUAGE plpgsql AS $$
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
$$;


-- body: 0034_held_rows.sql
CREATE OR REPLACE FUNCTION recall.distribute_before_0036() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    distributed integer := recall.distribute_before_0034();
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
    FOREACH f IN ARRAY ARRAY['recall.held_versions(text, bigint)', 'recall.held_rows(text, uuid[])'] LOOP
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
$$;


-- body: 0021_scoped_search.sql
CREATE OR REPLACE FUNCTION recall.distribute_before_0034() RETURNS integer LANGUAGE plpgsql AS $$
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
$$;


-- body: 0019_add_turn_function.sql
CREATE OR REPLACE FUNCTION recall.distribute_before_0021() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    distributed integer := recall.distribute_0018();
    f constant text :=
        'recall.add_turn(text, text, text, text, timestamptz, jsonb, bytea, vector, text, text,'
        ' float8, integer, integer)';
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
        PERFORM create_distributed_function(
            f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
    END IF;
    RETURN distributed;
END;
$$;


-- body: 0018_one_memory_insert.sql
CREATE OR REPLACE FUNCTION recall.distribute_0018() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    distributed integer := recall.distribute_0014();
    f constant text :=
        'recall.insert_memory(text, text, text, text, timestamptz, jsonb, bytea, vector, text, text)';
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
        PERFORM create_distributed_function(
            f::regprocedure, 'p_user_id', colocate_with => 'recall.memories');
    END IF;
    RETURN distributed;
END;
$$;


-- body: 0014_search_candidates.sql
CREATE OR REPLACE FUNCTION recall.distribute_0014() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    distributed integer := recall.distribute_0013();
    f text;
BEGIN
    -- pg_dist_partition exists only with citus: asked in a statement of its own
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN distributed;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'recall.memories'::regclass
    ) THEN
        RETURN distributed;
    END IF;
    FOREACH f IN ARRAY ARRAY[
        'recall.search_terms(text, text, text[], uuid[])',
        'recall.search_details(text, vector, integer, uuid[])'
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
$$;

-- The tables, the counters, the row-level security key and the search functions' plans on
-- Citus (migration 0013's comment says why each differs).
-- body: 0013_citus.sql
CREATE OR REPLACE FUNCTION recall.distribute_0013() RETURNS integer LANGUAGE plpgsql AS $fn$
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
