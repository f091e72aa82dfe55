-- recall.RecallStore, a LangGraph BaseStore (docs/basestore.md, decision 0019): items by
-- namespace and key, and one vector per indexed text of an item.
--
-- A namespace is kept as its labels joined by '.' (a label may not contain '.', NUL or be
-- empty: LangGraph's own rule, checked before any write). In the C collation a prefix is then
-- a range of the primary key that stops at segment boundaries: ("a",) is `ns = 'a' OR
-- (ns >= 'a.' AND ns < 'a/')` ('/' follows '.'), so ("ab",) never matches and '_' or '%' in
-- a label are plain characters, not LIKE wildcards.

CREATE TABLE recall.store_items (
    ns text COLLATE "C" NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- minutes as a float: a 30-second TTL stays 30 seconds when it is refreshed on read
    ttl_minutes float8 CHECK (ttl_minutes IS NULL OR ttl_minutes > 0),
    expires_at timestamptz,
    -- the indexed text of the item, for keyword and hybrid search (BM25, as for memories)
    fts tsvector NOT NULL DEFAULT ''::tsvector,
    doc_len integer NOT NULL DEFAULT 0,
    PRIMARY KEY (ns, key)
);

CREATE INDEX store_items_expiry_idx ON recall.store_items (expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX store_items_fts_idx ON recall.store_items USING gin (fts);

-- One row per text an item's indexed fields yield (`tags[*]` yields one per element). The
-- dimension is free: each RecallStore declares its own (`dims`), and searches compare only
-- vectors of that dimension.
CREATE TABLE recall.store_vectors (
    ns text COLLATE "C" NOT NULL,
    key text NOT NULL,
    field text NOT NULL,
    ord integer NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (ns, key, field, ord),
    FOREIGN KEY (ns, key) REFERENCES recall.store_items (ns, key) ON DELETE CASCADE
);

-- Filter values that are dates or times compare as times: an ISO 8601 text with a time and no
-- offset is taken as UTC, as recall.basestore does with naive datetimes; anything else is NULL
-- (and so matches no range).
CREATE FUNCTION recall.store_timestamp(s text) RETURNS timestamptz
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
