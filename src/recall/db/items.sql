-- RecallStore's items (migration 0011): a LangGraph BaseStore's get, put, delete, search,
-- namespace listing and TTL sweep. Blocks with {scope}, {vscope} or {filter} are completed by
-- recall.db.items with psycopg.sql: {scope} is the namespace prefix as a key range (or TRUE),
-- {filter} the compiled value filter (recall.db.filters); every value is still a parameter.

-- name: store_get
SELECT ns, key, value, created_at, updated_at
FROM recall.store_items
WHERE ns = %(ns)s AND key = ANY(%(keys)s::text[])
  AND (expires_at IS NULL OR expires_at > now())

-- name: store_refresh
-- a read pushes the expiry of the items it returned (those with a TTL) forward
UPDATE recall.store_items AS i
SET expires_at = now() + make_interval(secs => i.ttl_minutes * 60)
FROM unnest(%(ns)s::text[], %(keys)s::text[]) AS r (ns, key)
WHERE i.ns = r.ns AND i.key = r.key AND i.ttl_minutes IS NOT NULL
  AND i.expires_at > now()

-- name: store_upsert
-- an expired item that the sweeper has not yet removed is replaced as a new one
INSERT INTO recall.store_items AS i (ns, key, value, ttl_minutes, expires_at, fts, doc_len)
VALUES (
    %(ns)s, %(key)s, %(value)s, %(ttl)s::float8,
    now() + make_interval(secs => %(ttl)s::float8 * 60),
    to_tsvector('english'::regconfig, %(text)s::text),
    recall.tsvector_tokens(to_tsvector('english'::regconfig, %(text)s::text))
)
ON CONFLICT (ns, key) DO UPDATE SET
    value = excluded.value,
    ttl_minutes = excluded.ttl_minutes,
    expires_at = excluded.expires_at,
    fts = excluded.fts,
    doc_len = excluded.doc_len,
    updated_at = now(),
    created_at = CASE WHEN i.expires_at <= now() THEN now() ELSE i.created_at END

-- name: store_drop_vectors
DELETE FROM recall.store_vectors WHERE ns = %(ns)s AND key = %(key)s

-- name: store_copy_vectors
-- pending (migration 0028): the index that takes it leaves waiting vectors out, so it joins the
-- graph later (store_join_graphs)
COPY recall.store_vectors (ns, key, field, ord, embedding, pending)
FROM STDIN (FORMAT BINARY)

-- name: store_join_graphs
-- Pending vectors (migration 0028) join their HNSW graphs: up to %(batch)s of them have the flag
-- cleared, which inserts each into the indexes whose predicate it now meets. Rows another
-- session is clearing (or deleting) are skipped, not waited for. Returns how many it cleared.
WITH batch AS (
    SELECT v.ns, v.key, v.field, v.ord
    FROM recall.store_vectors AS v
    WHERE v.pending
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE recall.store_vectors AS v SET pending = false
FROM batch AS b
WHERE v.ns = b.ns AND v.key = b.key AND v.field = b.field AND v.ord = b.ord

-- name: store_delete
DELETE FROM recall.store_items WHERE ns = %(ns)s AND key = %(key)s

-- name: store_sweep
DELETE FROM recall.store_items WHERE expires_at IS NOT NULL AND expires_at <= now()

-- name: store_namespaces
SELECT DISTINCT i.ns
FROM recall.store_items AS i
WHERE {scope} AND (i.expires_at IS NULL OR i.expires_at > now())
ORDER BY i.ns

-- name: store_search_recent
-- no query (or no index): the newest first
SELECT i.ns, i.key, i.value, i.created_at, i.updated_at, NULL::float8 AS score,
       i.ttl_minutes IS NOT NULL AS expires
FROM recall.store_items AS i
WHERE {scope} AND (i.expires_at IS NULL OR i.expires_at > now()) AND {filter}
ORDER BY i.updated_at DESC, i.ns, i.key
LIMIT %(limit)s OFFSET %(offset)s

-- name: store_search_semantic
-- Exact: every vector under the prefix is compared (no approximate index, so nothing comes back
-- short), and an item counts once, with its best text's cosine. Items without a vector (put
-- with index=False) follow the scored ones, with no score. The distances are computed first
-- (MATERIALIZED), so the grouping sorts small rows, not 1.5 KB vectors.
WITH distances AS MATERIALIZED (
    SELECT v.ns, v.key, v.embedding <=> %(query)s::vector AS distance
    FROM recall.store_vectors AS v
    WHERE {vscope} AND v.dims = %(dims)s
), scored AS (
    SELECT ns, key, 1 - min(distance) AS score FROM distances GROUP BY ns, key
)
SELECT i.ns, i.key, i.value, i.created_at, i.updated_at, s.score,
       i.ttl_minutes IS NOT NULL AS expires
FROM recall.store_items AS i
LEFT JOIN scored AS s ON s.ns = i.ns AND s.key = i.key
WHERE {scope} AND (i.expires_at IS NULL OR i.expires_at > now()) AND {filter}
ORDER BY s.score DESC NULLS LAST, i.updated_at DESC, i.ns, i.key
LIMIT %(limit)s OFFSET %(offset)s

-- name: store_search_ranked
-- Keyword and hybrid. BM25: each term scored by recall.bm25_term, as the memories' keyword
-- search scores it, over the items under the prefix that pass the filter. "keyword": a page of
-- every such item, the best by BM25 first (the others after it, with no score). "hybrid": the
-- fusion's candidates, which recall.search.fusion ranks in Python as it ranks the memories'
-- (recall.basestore.hybrid): the %(candidates)s nearest items by their best vector's cosine
-- and the %(candidates)s best by BM25, each with its best vector's cosine distance, its BM25 and
-- its place in each list (from 0, ties to the newer item, then by namespace and key; NULL
-- outside a list). Exact: every item is scored. %(query)s is NULL in keyword mode, which then
-- compares no vector. `stats` is computed once (MATERIALIZED): inlined, the planner put it
-- inside the loop over the BM25 hits and counted the items again for each hit (9.5 of 9.6 ms
-- for a namespace of 214 items).
WITH items AS MATERIALIZED (
    SELECT i.ns, i.key, i.value, i.created_at, i.updated_at, i.fts, i.doc_len,
           i.ttl_minutes IS NOT NULL AS expires
    FROM recall.store_items AS i
    WHERE {scope} AND (i.expires_at IS NULL OR i.expires_at > now()) AND {filter}
), stats AS MATERIALIZED (
    SELECT greatest(count(*), 1)::float8 AS n, greatest(avg(doc_len), 1.0)::float8 AS avgdl
    FROM items
), terms AS MATERIALIZED (
    SELECT DISTINCT ON (tq::text) tq
    FROM unnest(%(words)s::text[]) AS w,
         LATERAL (SELECT to_tsquery('english', quote_literal(w)) AS tq) AS x
    WHERE numnode(tq) > 0
), hits AS (
    SELECT it.ns, it.key, it.doc_len, t.tq::text AS term
    FROM items AS it JOIN terms AS t ON it.fts @@ t.tq
), df AS (
    SELECT term, count(*)::float8 AS df FROM hits GROUP BY term
), bm AS (
    SELECT h.ns, h.key, sum(recall.bm25_term(df.df, st.n, h.doc_len, st.avgdl, 1.0)) AS bm25
    FROM hits AS h JOIN df USING (term) CROSS JOIN stats AS st
    GROUP BY h.ns, h.key
), distances AS MATERIALIZED (
    SELECT v.ns, v.key, v.embedding <=> %(query)s::vector AS distance
    FROM recall.store_vectors AS v
    WHERE {vscope} AND v.dims = %(dims)s AND %(query)s::vector IS NOT NULL
), vr AS (
    SELECT it.ns, it.key, min(d.distance) AS distance,
           row_number() OVER (
               ORDER BY 1 - min(d.distance) DESC, it.updated_at DESC, it.ns, it.key
           ) - 1 AS r
    FROM distances AS d
    JOIN items AS it ON it.ns = d.ns AND it.key = d.key
    GROUP BY it.ns, it.key, it.updated_at
), kr AS (
    SELECT bm.ns, bm.key, bm.bm25,
           row_number() OVER (ORDER BY bm.bm25 DESC, it.updated_at DESC, it.ns, it.key) - 1 AS r
    FROM bm JOIN items AS it ON it.ns = bm.ns AND it.key = bm.key
)
SELECT it.ns, it.key, it.value, it.created_at, it.updated_at, kr.bm25 AS score, it.expires,
       vr.distance,
       CASE WHEN vr.r < %(candidates)s THEN vr.r END AS vector_rank,
       CASE WHEN kr.r < %(candidates)s THEN kr.r END AS keyword_rank
FROM items AS it
LEFT JOIN vr ON vr.ns = it.ns AND vr.key = it.key
LEFT JOIN kr ON kr.ns = it.ns AND kr.key = it.key
WHERE %(mode)s::text = 'keyword' OR vr.r < %(candidates)s OR kr.r < %(candidates)s
ORDER BY kr.bm25 DESC NULLS LAST, it.updated_at DESC, it.ns, it.key
LIMIT %(limit)s OFFSET %(offset)s

-- name: store_search_indexed
-- Through an HNSW index (migration 0015; recall.db.storeindex): the nearest `candidates` vectors
-- of the index's scan (`near`) whose items are live and pass the filter, then every candidate's
-- exact cosine, ranked as store_search_semantic ranks. <near> is the index's predicate and the
-- prefix (`v.ns = '<namespace>'` for a namespace's own index, the prefix's range for the index
-- over every namespace), <order> the index's expression to the query (recall.db.storeindex.scan_order);
-- NOT v.pending: the vectors in the graph (an index built since migration 0028 leaves the
-- pending ones out, and its predicate must follow from the statement's text). <rest> is what
-- the scan does not cover, compared exactly, all of it: the pending vectors under the prefix
-- (migration 0028: in no graph yet, found by their own index) and, through a namespace's own
-- index, its children (the index over every namespace holds every other vector: migration
-- 0029). <dims> is the dimension as a constant: with the scan's predicate in constants too, a
-- generic plan still proves the partial index's predicate, so the statement is prepared once
-- per index and connection (issue 38). The caller falls back to store_search_semantic when this
-- returns less than a full page (an item counted once however many vectors it has).
WITH near AS MATERIALIZED (
    SELECT v.ns, v.key, v.embedding <=> %(query)s::vector AS distance
    FROM recall.store_vectors AS v
    JOIN recall.store_items AS i ON i.ns = v.ns AND i.key = v.key
    WHERE {near} AND NOT v.pending AND v.dims = {dims}
      AND (i.expires_at IS NULL OR i.expires_at > now()) AND {filter}
    ORDER BY {order}
    LIMIT %(candidates)s
), rest AS MATERIALIZED (
    SELECT v.ns, v.key, v.embedding <=> %(query)s::vector AS distance
    FROM recall.store_vectors AS v
    JOIN recall.store_items AS i ON i.ns = v.ns AND i.key = v.key
    WHERE ({rest}) AND v.dims = {dims}
      AND (i.expires_at IS NULL OR i.expires_at > now()) AND {filter}
), scored AS (
    SELECT ns, key, 1 - min(distance) AS score
    FROM (SELECT * FROM near UNION ALL SELECT * FROM rest) AS c
    GROUP BY ns, key
), page AS (
    SELECT i.ns, i.key, i.value, i.created_at, i.updated_at, s.score,
           i.ttl_minutes IS NOT NULL AS expires
    FROM scored AS s
    JOIN recall.store_items AS i ON i.ns = s.ns AND i.key = s.key
    ORDER BY s.score DESC, i.updated_at DESC, i.ns, i.key
    LIMIT %(limit)s OFFSET %(offset)s
), boundary AS (
    -- the scan's farthest candidate, when it was cut at `candidates` (else it saw everything
    -- its index holds under the prefix)
    SELECT CASE WHEN count(*) >= %(candidates)s THEN 1 - max(distance) END AS score FROM near
)
-- A page whose last score does not beat the cut scan's farthest candidate may hold a tie that
-- goes on past the candidates, which the index (in its own, physical order) cut: nothing is
-- returned, and the caller's exact scan breaks the tie by date, namespace and key, as always.
SELECT p.* FROM page AS p
WHERE NOT EXISTS (
    SELECT 1 FROM boundary AS b WHERE b.score IS NOT NULL AND (SELECT min(score) FROM page) <= b.score
)
ORDER BY p.score DESC, p.updated_at DESC, p.ns, p.key

-- name: store_session_knobs
-- store_search_knobs for the session: what a read outside a transaction scans with, set on a
-- pooled connection when its breadth changes (recall.db.items). Nothing on the pool RecallStore
-- opens relies on pgvector's defaults: its other scans set their own knobs for their
-- transaction (a pool given to RecallStore(pool) is its own, as open_pool makes it).
SELECT set_config('hnsw.ef_search', %(ef_search)s::text, false),
       set_config('hnsw.iterative_scan', 'relaxed_order', false)

-- name: store_search_knobs
-- for the rest of the transaction: how far an HNSW scan looks, and that it goes on past that
-- (in roughly nearest-first order) while the filter or the prefix rejects what it finds
SELECT set_config('hnsw.ef_search', %(ef_search)s::text, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true)

-- name: store_prefix_size
-- How many vectors lie under a prefix, counted up to %(cap)s (the plan needs no more).
SELECT count(*) FROM (
    SELECT 1 FROM recall.store_vectors AS v WHERE {vscope} LIMIT %(cap)s
) AS under

-- name: store_indexes
-- the finished indexes (migration 0015), each with how many vectors it holds (an estimate,
-- counted by the build and by every vacuum since) and its calibration (migration 0020)
SELECT x.ns, x.dims, x.index_name, greatest(c.reltuples, 0)::bigint AS vectors,
       x.ef_search, x.calibrated_recall, x.calibrated_vectors, x.leaves_pending,
       -- whether it holds its vectors as halfvec (recall.db.storeindex.scan_order)
       EXISTS (SELECT 1 FROM pg_index AS h JOIN pg_opclass AS o ON o.oid = h.indclass[0]
               WHERE h.indexrelid = c.oid AND o.opcname = 'halfvec_cosine_ops') AS halved
FROM recall.store_indexes AS x
LEFT JOIN pg_class AS c ON c.relname = x.index_name AND c.relnamespace = 'recall'::regnamespace
ORDER BY x.ns, x.dims

-- name: store_vector_estimate
SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'recall.store_vectors'::regclass

-- name: store_namespaces_due
-- namespaces with at least %(threshold)s vectors of this dimension and no index of their own
SELECT v.ns
FROM recall.store_vectors AS v
WHERE v.dims = %(dims)s
  AND NOT EXISTS (
      SELECT 1 FROM recall.store_indexes AS x WHERE x.ns = v.ns AND x.dims = %(dims)s
  )
GROUP BY v.ns
HAVING count(*) >= %(threshold)s
ORDER BY count(*) DESC, v.ns

-- name: store_wide_vectors
-- what the index over every namespace holds (migration 0029): every vector
SELECT count(*) FROM recall.store_vectors WHERE dims = %(dims)s

-- name: store_namespace_vectors
SELECT count(*) FROM recall.store_vectors WHERE ns = %(ns)s AND dims = %(dims)s

-- name: store_index_record
-- leaves_pending (migration 0028): read from the index's own predicate, so an index that a build
-- before 0028 left behind unrecorded (CREATE INDEX ... IF NOT EXISTS keeps it) is not taken for
-- one that leaves pending vectors out
INSERT INTO recall.store_indexes (ns, dims, index_name, leaves_pending)
SELECT %(ns)s, %(dims)s, %(index_name)s,
       coalesce(pg_get_expr(i.indpred, i.indrelid) LIKE '%%NOT pending%%', false)
FROM (SELECT to_regclass(format('recall.%%I', %(index_name)s::text)) AS oid) AS named
LEFT JOIN pg_index AS i ON i.indexrelid = named.oid
ON CONFLICT (ns, dims) DO UPDATE
SET index_name = excluded.index_name, built_at = now(), leaves_pending = excluded.leaves_pending

-- name: store_calibration_sample
-- calibration (migration 0020): a random sample of the vectors an index holds ({near}: the
-- namespace, or TRUE for the index over every namespace)
SELECT v.embedding FROM recall.store_vectors AS v
WHERE {near} AND v.dims = %(dims)s
ORDER BY random()
LIMIT %(sample)s

-- name: store_calibration_exact
-- the exact nearest vectors of a sampled one (the column itself, not the index's expression:
-- no index can answer), with their distances
SELECT v.ns, v.key, v.field, v.ord, v.embedding <=> %(query)s::vector AS distance
FROM recall.store_vectors AS v
WHERE {near} AND v.dims = %(dims)s
ORDER BY v.embedding <=> %(query)s::vector
LIMIT %(k)s

-- name: store_calibration_indexed
-- the same through the index, as wide as hnsw.ef_search ({order}: the index's expression to the
-- query, recall.db.storeindex.scan_order; {dims} a constant)
SELECT v.ns, v.key, v.field, v.ord, v.embedding <=> %(query)s::vector AS distance
FROM recall.store_vectors AS v
WHERE {near} AND v.dims = {dims}
ORDER BY {order}
LIMIT %(k)s

-- name: store_index_calibrated
UPDATE recall.store_indexes
SET ef_search = %(ef_search)s, calibrated_recall = %(recall)s,
    calibrated_vectors = %(vectors)s, calibrated_at = now()
WHERE ns = %(ns)s AND dims = %(dims)s

-- name: store_namespace_vectors_upto
-- a namespace's vectors of one dimension, counted up to %(cap)s (what a write-set build needs)
SELECT count(*) FROM (
    SELECT 1 FROM recall.store_vectors WHERE ns = %(ns)s AND dims = %(dims)s LIMIT %(cap)s
) AS own

-- name: store_analyze
-- fresh statistics before a namespace's index is built (as the owner): right after a bulk load
-- the planner has none, and the exact scans that answer until the index is ready would join
-- the new rows by nested loops (issue 38: 270 ms for 2,000 vectors, from 2 ms)
ANALYZE recall.store_items, recall.store_vectors

-- name: repeatable_read
-- the first statement of a transaction that must read one snapshot throughout (calibration)
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ
