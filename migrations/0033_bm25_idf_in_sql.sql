-- BM25's idf written once, in SQL (issue 56): recall.bm25_idf and recall.bm25_idfs.
--
-- The idf, ln(1 + (n - df + 0.5) / (df + 0.5)), was written in recall.bm25_term (migration
-- 0026) and again in Python (recall.search.bm25.idf), where the second stage turned the query
-- terms' document frequencies from recall.search_terms into the idf its features weigh. The
-- idf is now its own function, which bm25_term calls, and the keyword side's statement reads
-- each term's idf from it (recall.bm25_idfs: 0 for a term none of the user's memories holds,
-- as the features take it, with recall.bm25_idf(0, n) beside it for such a term's weight), so
-- Python computes none of BM25.
--
-- bm25_term's expression is the same term for term, so every score is the same to the last
-- bit; a one-expression SQL function that is IMMUTABLE, not SECURITY DEFINER and without SET
-- clauses is inlined into its caller, and so is the function it calls, so neither costs a
-- call per term (tests/integration/test_bm25_sql.py reads the plan). CREATE OR REPLACE keeps
-- bm25_term's owner, grants and (on Citus) distribution; it has no SECURITY DEFINER or SET
-- clause to keep. On Citus the two new functions are created on the workers too, as 0026's was.
CREATE FUNCTION recall.bm25_idf(p_df float8, p_n float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ln(1 + (p_n - p_df + 0.5) / (p_df + 0.5))
$$;

CREATE OR REPLACE FUNCTION recall.bm25_term(
    p_df float8, p_n float8, p_doc_len integer, p_avgdl float8, p_boost float8
) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_boost * recall.bm25_idf(p_df, p_n)
           * 2.2 / (1 + 1.2 * (0.25 + 0.75 * p_doc_len / p_avgdl))
$$;

-- Each query term's idf among n memories, in the terms' order, 0 for a term no memory holds
-- (df 0). STRICT: the keyword side's rows other than its statistics row pass NULL and get
-- NULL without running the body.
CREATE FUNCTION recall.bm25_idfs(p_dfs float8[], p_n float8) RETURNS float8[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ARRAY(
        SELECT CASE WHEN u.df > 0 THEN recall.bm25_idf(u.df, p_n) ELSE 0 END
        FROM unnest(p_dfs) WITH ORDINALITY AS u(df, ord)
        ORDER BY u.ord
    )
$$;
