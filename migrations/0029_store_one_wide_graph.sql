-- RecallStore's index over every namespace holds every vector again (issue 56, decision 0053).
--
-- Since migration 0022 that index left out the vectors of namespaces with an index of their own
-- (`AND NOT own_index`), to spare a put into a large namespace its second graph insert; a prefix
-- over every namespace then scanned that index, then each namespace's own index, and merged:
-- four times the peer's shared buffers a search (3,187 against 714 at breadth 40, 70,000
-- vectors), 5.8x its p95. Since migration 0028 a put's vector joins its graphs in the
-- background, so the second insert no longer waits on the put, and one graph over every vector
-- answers a prefix in one scan (762 buffers at breadth 40, recall@10 0.951 against the peer's
-- 0.932).
--
-- An index over every namespace built from now on holds `embedding::halfvec(<dims>)` `WHERE dims
-- = <dims> AND NOT pending` under a new name (store_vectors_hnsw_every_<dims>,
-- recall.db.storeindex: halfvec, so that a namespace's scan, whose predicate it meets too, can
-- only take the namespace's own index), and the old ones are dropped here: each write still
-- inserted into them, and no search reads them any more. A
-- store searches wide prefixes by the exact scan until the planner has built the new index,
-- which the first such search sets off (in the background, as for a new store), or
-- `RecallStore.build_indexes(every_namespace=True)` builds now. The `own_index` column is no
-- longer written or read; it stays, so that a process of the version before, still running
-- while this one starts, can write (a later migration may drop it).
--
-- RecallStore's tables stay on the coordinator on Citus (migration 0013): a plain DROP INDEX.
DO $$
DECLARE
    old text;
BEGIN
    FOR old IN
        SELECT c.relname FROM pg_class AS c
        WHERE c.relnamespace = 'recall'::regnamespace AND c.relkind = 'i'
          AND c.relname LIKE 'store\_vectors\_hnsw\_all\_%'
    LOOP
        EXECUTE format('DROP INDEX recall.%I', old);
    END LOOP;
    DELETE FROM recall.store_indexes WHERE ns = '';
END
$$;
