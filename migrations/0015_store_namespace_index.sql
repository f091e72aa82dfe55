-- RecallStore's approximate indexes (docs/basestore.md, decision 0023). Small namespaces keep
-- the exact scan; a namespace that reaches `store_index_threshold` vectors gets a partial HNSW
-- index of its own (`WHERE ns = '<namespace>' AND dims = <dims>`), and a store whose searches
-- meet prefixes of `store_wide_threshold` vectors or more gets one partial HNSW index over
-- every namespace (`WHERE dims = <dims>`, recorded with ns = ''). The indexes themselves are
-- built by recall.db.storeindex with CREATE INDEX CONCURRENTLY (not in a migration, which runs
-- in a transaction); this table records the finished ones, so that every process can choose
-- its plan from it. A search through an index re-checks every candidate's exact cosine and
-- falls back to the exact scan when the index yields fewer results than the page needs.
CREATE TABLE recall.store_indexes (
    -- the namespace (labels joined by '.'), or '' for the index over every namespace
    ns text COLLATE "C" NOT NULL,
    dims integer NOT NULL CHECK (dims > 0),
    index_name text NOT NULL UNIQUE,
    built_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ns, dims)
);
