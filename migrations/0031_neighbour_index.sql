-- The turns before and after a candidate are found by one index descent each (issue 56,
-- decision 0057).
--
-- Since migration 0023 the second stage's calls (recall.search_details, recall.search_scoped)
-- take a candidate's neighbours in its conversation in (created_at, content_hash) order: the
-- turn before is the last with a smaller (created_at, content_hash), the turn after the first
-- with a larger. memories_conversation_idx (migration 0003) holds (user_id, conversation_id,
-- created_at, id): each of the two look-ups per candidate scanned the rows of the same
-- created_at and sorted them by content_hash (an incremental sort, rows filtered out), and the
-- turns of an imported conversation often share one time (LoCoMo's sessions do). An index in
-- the look-ups' own order takes the row comparison as its bound and its first entry is the
-- neighbour: the details call's server time 0.88 and 0.90 -> 0.72 and 0.76 ms p50 for LoCoMo
-- users (two runs, the two indexes in turns), the same rows for 300 of 300 questions; a user
-- whose turns each have their own time gains nothing (a large user's scoped call 2.71 and
-- 2.74 -> 2.80 and 2.78 ms, within the noise).
--
-- It replaces memories_conversation_idx rather than joining it (one more index for every write
-- to keep): the readers of a conversation in (created_at, id) order (the tracker's turns_after,
-- one page at a time) bound it by created_at through the new one and order the few rows of one
-- instant by id themselves.
--
-- On Citus each statement that reaches the shards runs alone (EXECUTE): Citus passes a
-- statement's own text on, and this file's text holds two. The shard commands run one at a
-- time, as in migration 0030 (a setting plain PostgreSQL keeps as an unused placeholder).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

DO $do$
BEGIN
    EXECUTE 'CREATE INDEX memories_neighbours_idx'
            ' ON recall.memories (user_id, conversation_id, created_at, content_hash)';
    EXECUTE 'DROP INDEX recall.memories_conversation_idx';
END
$do$;
