-- RecallStore's new vectors wait outside its HNSW graphs (issue 56, decision 0052).
--
-- A put into an indexed namespace inserted its vector into the namespace's HNSW graph while the
-- caller waited: at ef_construction 200 most of a put's time, about twice the peer's put, whose
-- graphs are built at pgvector's 64 (docs/benchmarks.md "store-breadth-efc"). Building narrower
-- graphs made puts cheaper and searches dearer: the same recall needed a wider scan.
--
-- Now a vector written where an index that leaves waiting vectors out would take it is written
-- `pending` and joins the graph a moment later, in the background (recall.basestore.pending: an
-- UPDATE of the flag, which inserts the row into the index). Until then every search that goes
-- through an index compares the pending vectors under its prefix exactly (a partial btree index
-- finds them), so a put is searchable as soon as it commits, as before.
--
-- 1. The flag, with a constant default (no table rewrite): every vector written before this is
--    not pending.
-- 2. Where the pending vectors are: a partial index on their namespace.
-- 3. An index built from now on leaves pending vectors out (`AND NOT pending` in its predicate,
--    recall.db.storeindex) and is recorded with `leaves_pending`; one built before holds every
--    vector, so its namespace's vectors are written as before (not pending): a row it already
--    holds would be inserted into it a second time when the flag was cleared.
--
-- RecallStore's tables stay on the coordinator on Citus (migration 0013): recall.distribute()
-- is unchanged.
ALTER TABLE recall.store_vectors ADD COLUMN pending boolean NOT NULL DEFAULT false;

CREATE INDEX IF NOT EXISTS store_vectors_pending_idx ON recall.store_vectors (ns) WHERE pending;

ALTER TABLE recall.store_indexes ADD COLUMN leaves_pending boolean NOT NULL DEFAULT false;
