"""Real-text store items for `benchmarks/basestore.py --data real`: namespaces whose vectors are
bge-small embeddings of LongMemEval's user turns (each with the reply that follows it,
`harness.longmemeval`), and searches that are LongMemEval's real questions, embedded by the same
model as a store embeds a query.

The 42,841 turn vectors come from `.recall/longmemeval-vectors.npz` when it is there (read only,
never written here); without it they are embedded first (`harness.longmemeval.vectors`: about an
hour on 2 cores, which is why CI never runs this). Each namespace holds a random sample of the
turns (no turn twice in one namespace; namespaces share turns, as users ask alike). A namespace
larger than the pool of turns holds every turn plus normalised midpoints of two random turns
(said in the report). The 195 questions are embedded on each run (seconds)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import longmemeval as lme
from .items import PREFIX, Items, Query, item_text, skewed_sizes


async def turn_vectors() -> np.ndarray:
    """Every distinct turn's bge-small vector (float32, normalised), from the cache if present."""
    if lme.VECTORS.exists():  # a benchmark's cache, read once
        with np.load(lme.VECTORS) as saved:
            return np.asarray(saved["vectors"], dtype=np.float32)
    from recall.config import Settings
    from recall.embeddings import configured_embeddings, embedder_for

    settings = Settings()
    embedder = embedder_for(configured_embeddings(settings, None), settings)
    table = await lme.vectors(embedder, lme.load())
    return np.vstack(list(table.values())).astype(np.float32)


def question_vectors() -> tuple[list[str], np.ndarray]:
    """LongMemEval's dev questions and their bge-small query vectors (as a store embeds a
    query: `embed_query`)."""
    from recall.embeddings import BgeSmallEmbeddings

    questions = [r.question for r in lme.load()]
    model = BgeSmallEmbeddings()
    vectors = np.array([model.embed_query(q) for q in questions], dtype=np.float32)
    return questions, vectors


def namespace_rows(pool: np.ndarray, size: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """`size` rows for one namespace: distinct turns, then midpoints once the turns run out;
    how many are midpoints."""
    if size <= len(pool):
        return pool[rng.choice(len(pool), size=size, replace=False)], 0
    extra = size - len(pool)
    a, b = rng.integers(0, len(pool), size=(2, extra))
    mids = pool[a] + pool[b]
    mids /= np.linalg.norm(mids, axis=1, keepdims=True)
    return np.vstack([pool[rng.permutation(len(pool))], mids]), extra


def real_items(
    pool: np.ndarray,
    questions: np.ndarray,
    total: int,
    count: int,
    per_namespace: int,
    rng: np.random.Generator,
    *,
    large: Sequence[int] = (),
    per_large: int = 0,
    everywhere: int = 0,
) -> tuple[Items, int]:
    """`total` items in `count` namespaces of skewed sizes (as `harness.items.make_items`), then
    one namespace of each size in `large`; their rows sampled from `pool`, their queries from
    `questions` (a namespace asks distinct ones), `everywhere` of them over every namespace.
    Returns the items and how many rows are midpoints (0 unless a namespace outgrows `pool`)."""
    sizes = np.concatenate([skewed_sizes(total, count, rng), np.array(large, dtype=np.int64)])
    count = len(sizes)
    parts, midpoints = [], 0
    for size in sizes:
        rows, extra = namespace_rows(pool, int(size), rng)
        parts.append(rows)
        midpoints += extra
    vectors = np.vstack(parts)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    namespaces: list[tuple[str, ...]] = [("users", f"u{j:04d}", "memories") for j in range(count)]
    vectors_of = {
        item_text(j, i): vectors[int(starts[j]) + i] for j in range(count) for i in range(sizes[j])
    }
    queries = []
    for j in range(count):
        asked = per_large if j >= count - len(large) else per_namespace
        picks = rng.choice(len(questions), size=min(asked, len(questions)), replace=False)
        for q, pick in enumerate(picks):
            queries.append(Query(j, f"query-{j}-{q}", questions[pick]))
            vectors_of[f"query-{j}-{q}"] = questions[pick]
    picks = rng.choice(len(questions), size=min(everywhere, len(questions)), replace=False)
    for q, pick in enumerate(picks):
        queries.append(Query(PREFIX, f"query-all-{q}", questions[pick]))
        vectors_of[f"query-all-{q}"] = questions[pick]
    order = rng.permutation(len(queries))
    shuffled = [queries[i] for i in order]
    items = Items(namespaces, sizes, starts, vectors, shuffled, vectors_of, count - len(large))
    return items, midpoints
