-- RecallStore's searches filter vectors by dimension (each store compares only vectors of its
-- own). Filtering on the expression vector_dims(embedding) gave the planner no statistics: it
-- took the default 0.5% selectivity, estimated a handful of vectors per namespace, and chose a
-- nested loop that compared every vector with every item (n² rows: 135 ms for a namespace of
-- 2,130 items, benchmarks/basestore.py). A stored column has statistics.
ALTER TABLE recall.store_vectors
    ADD COLUMN dims integer GENERATED ALWAYS AS (vector_dims(embedding)) STORED;
