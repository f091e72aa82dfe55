-- Each RecallStore index's own breadth (issue 38, decision 0030): when an index is built, and
-- again when it has grown by a quarter, recall.db.calibration probes it with points drawn from
-- its own vectors and records the smallest hnsw.ef_search whose recall@10 against the exact
-- scan reaches the target, the recall measured there and how many vectors the index held;
-- searches through the index use that breadth. NULL: not yet calibrated (searches use the
-- rule of decision 0023).
ALTER TABLE recall.store_indexes
    ADD COLUMN ef_search integer CHECK (ef_search BETWEEN 1 AND 1000),
    ADD COLUMN calibrated_recall float8 CHECK (calibrated_recall BETWEEN 0 AND 1),
    ADD COLUMN calibrated_vectors bigint CHECK (calibrated_vectors >= 0),
    ADD COLUMN calibrated_at timestamptz;
