-- Read-your-writes on a streaming replica (docs/decisions/0021-read-replica.md): where the
-- primary's WAL ends after a write, and how far a standby has replayed it, as byte positions.

-- name: wal_written
-- The end of the WAL inserted so far: past the commit record of every transaction this
-- session has finished, whatever synchronous_commit says.
SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint;

-- name: wal_replayed
-- NULL when the server is not a standby (a primary, or a logical replica). Asked of
-- pg_is_in_recovery() first: a primary that went through crash recovery, or a promoted
-- standby, keeps the last position it replayed in pg_last_wal_replay_lsn() for good, and
-- would read as a standby that never catches up.
SELECT CASE WHEN pg_is_in_recovery()
            THEN (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint END;
