"""Synthetic LangGraph store items: namespaces of skewed sizes, one clustered unit vector per
item, queries near a namespace's topics and their exact answers, and the `embed` function that
hands any store those precomputed vectors (no model)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from langgraph.store.base import PutOp

from .data import DIMS, unit

TOPICS = 300  # topic centres shared by every namespace (users talk about the same things)
NOISE = 0.45 / np.sqrt(DIMS / 8)  # per-coordinate noise around a centre, as harness.data's memories
SIGMA = 1.5  # of the lognormal namespace sizes: 1 to a few thousand items at 100k in 1,000
BUCKETS = ((1, 9), (10, 99), (100, 999), (1000, 9999), (10_000, None))  # sizes reported apart
PREFIX = -1  # `Query.namespace` of a search over every namespace (the prefix ("users",))


@dataclass(frozen=True, slots=True)
class Query:
    """One search: the namespace searched (as the prefix; `PREFIX`: every namespace, under
    ("users",)), the query's text and unit vector."""

    namespace: int
    text: str
    vector: np.ndarray


@dataclass
class Items:
    """The namespaces, their items' vectors (one row per item, namespace after namespace) and
    the queries; `vectors_of` maps every item and query text to its vector."""

    namespaces: list[tuple[str, ...]]
    sizes: np.ndarray
    starts: np.ndarray  # the first row of each namespace in `vectors`
    vectors: np.ndarray
    queries: list[Query]
    vectors_of: dict[str, np.ndarray]
    large_from: int = 0  # the first of the extra large namespaces (`make_items(large=...)`)

    def rows(self, j: int) -> np.ndarray:
        """Namespace `j`'s item vectors (row i is the item of key `key(i)`)."""
        start = int(self.starts[j])
        return self.vectors[start : start + int(self.sizes[j])]

    def puts(self) -> Iterator[PutOp]:
        """Every item as a `PutOp`: value `{"text": "item-<j>-<i>", "n": i}`."""
        for j, ns in enumerate(self.namespaces):
            for i in range(int(self.sizes[j])):
                yield PutOp(ns, key(i), {"text": item_text(j, i), "n": i})

    def exact_top(self, query: Query, k: int = 10) -> list[str]:
        """The keys of the `k` items of the query's namespace nearest to it (cosine, exact)."""
        sims = self.rows(query.namespace) @ query.vector
        return [key(int(i)) for i in np.argsort(-sims)[:k]]

    def exact_top_everywhere(self, query: Query, k: int = 10) -> list[tuple[tuple[str, ...], str]]:
        """The (namespace, key) of the `k` items of every namespace nearest to the query."""
        rows = np.argsort(-(self.vectors @ query.vector))[:k]
        found = []
        for row in rows:
            j = int(np.searchsorted(self.starts, row, side="right")) - 1
            found.append((self.namespaces[j], key(int(row) - int(self.starts[j]))))
        return found

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The stores' `embed`: each text's precomputed vector, looked up."""
        return [self.vectors_of[t].tolist() for t in texts]


def key(i: int) -> str:
    """The key of a namespace's i-th item."""
    return f"k{i:05d}"


def item_text(j: int, i: int) -> str:
    """The indexed text of namespace j's i-th item."""
    return f"item-{j}-{i}"


def bucket(size: int) -> str:
    """The label of the size bucket a namespace of `size` items falls in."""
    for low, high in BUCKETS:
        if size >= low and (high is None or size <= high):
            return f"{low:,}-{high:,}" if high is not None else f"{low:,}+"
    raise ValueError(f"no bucket for a namespace of {size} items")


def bucket_labels() -> list[str]:
    """Every bucket's label, smallest namespaces first."""
    return [bucket(low) for low, _high in BUCKETS]


def skewed_sizes(total: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` namespace sizes (lognormal, at least 1) that add up to `total`.

    Raises:
        ValueError: fewer items than namespaces.
    """
    if total < count:
        raise ValueError(f"{total} items cannot fill {count} namespaces")
    weights = rng.lognormal(0.0, SIGMA, count)
    sizes = np.maximum(1, np.floor(weights / weights.sum() * total)).astype(np.int64)
    # the rounding's difference goes to (or comes from) the largest namespaces, one item each
    order = np.argsort(-sizes)
    diff, turn = total - int(sizes.sum()), 0
    while diff:
        j = order[turn % count]
        step = 1 if diff > 0 else -1
        if sizes[j] + step >= 1:
            sizes[j] += step
            diff -= step
        turn += 1
    out: np.ndarray = sizes
    return out


def make_items(
    total: int,
    count: int,
    per_namespace: int,
    rng: np.random.Generator,
    *,
    large: Sequence[int] = (),
    per_large: int = 0,
    everywhere: int = 0,
) -> Items:
    """`total` items in `count` namespaces ("users", "u0000", "memories"), ... of skewed sizes,
    then one namespace of each size in `large` (with `per_large` queries each, more than the
    others' so that their percentiles mean something), and `everywhere` queries over every
    namespace (`PREFIX`).
    Each namespace talks about 1 to 8 of the shared topics; an item's vector is one of them
    plus noise, and each of the `per_namespace` queries of a namespace is a held-out vector
    drawn the same way (near one of its topics, not one of its items). Queries come shuffled,
    so that each block of a timed run mixes namespaces of every size."""
    sizes = np.concatenate([skewed_sizes(total, count, rng), np.array(large, dtype=np.int64)])
    total, count = int(sizes.sum()), len(sizes)
    centres = unit(rng.normal(size=(TOPICS, DIMS)))
    topics = [rng.choice(TOPICS, size=int(rng.integers(1, 9)), replace=False) for _ in sizes]
    picks = np.concatenate([rng.choice(t, size=int(n)) for t, n in zip(topics, sizes, strict=True)])
    vectors = unit(centres[picks] + NOISE * rng.normal(size=(total, DIMS)))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    namespaces: list[tuple[str, ...]] = [("users", f"u{j:04d}", "memories") for j in range(count)]
    vectors_of = {
        item_text(j, i): vectors[int(starts[j]) + i] for j in range(count) for i in range(sizes[j])
    }
    queries = []
    for j in range(count):
        asked = per_large if j >= count - len(large) else per_namespace
        near = centres[rng.choice(topics[j], size=asked)]
        for q, vector in enumerate(unit(near + NOISE * rng.normal(size=near.shape))):
            queries.append(Query(j, f"query-{j}-{q}", vector))
            vectors_of[f"query-{j}-{q}"] = vector
    near = centres[rng.choice(TOPICS, size=everywhere)]
    for q, vector in enumerate(unit(near + NOISE * rng.normal(size=near.shape))):
        queries.append(Query(PREFIX, f"query-all-{q}", vector))
        vectors_of[f"query-all-{q}"] = vector
    order = rng.permutation(len(queries))
    shuffled = [queries[i] for i in order]
    return Items(namespaces, sizes, starts, vectors, shuffled, vectors_of, count - len(large))
