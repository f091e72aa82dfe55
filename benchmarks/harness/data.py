"""Synthetic memories at any scale: skewed users whose memories hold real LoCoMo turn pairs as
texts and clustered unit vectors (or the model's embeddings of the texts), loaded through
`MemoryStore.add_turns`; queries near a user's memories and their exact answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recall.store import MemoryStore

from .timing import Call

DIMS = 384
CENTERS = 300  # clusters the synthetic vectors gather around
BATCH = 5000  # turns per `add_turns` batch when loading
Query = tuple[str, np.ndarray]  # (user, unit query vector)


@dataclass
class Data:
    """The users (name -> number of memories), each memory's texts and vector, and after
    `load` the memories' ids, in the same order per user."""

    users: dict[str, int]
    texts: dict[str, list[tuple[str, str]]]  # (user_message, ai_response) per memory
    vectors: dict[str, np.ndarray]
    ids: dict[str, list[str]] = field(default_factory=dict)
    real: bool = False

    def typical(self) -> list[str]:
        """The users of 10 to 1,000 memories."""
        return [u for u in self.users if not u.startswith("large")]

    def large(self) -> list[str]:
        """The large users (min(50,000, N/4) memories each)."""
        return [u for u in self.users if u.startswith("large")]


def unit(rows: np.ndarray) -> np.ndarray:
    """`rows` scaled to unit length, as float32."""
    scaled: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return scaled.astype(np.float32)


def typical_sizes(total: int, rng: np.random.Generator) -> list[int]:
    """Sizes of typical users (10-1,000 memories, log-uniform) that add up to `total`."""
    sizes: list[int] = []
    while total > 0:
        size = int(min(total, np.exp(rng.uniform(np.log(10), np.log(1000)))))
        sizes.append(size)
        total -= size
    return sizes


def skewed_users(n: int, rng: np.random.Generator) -> dict[str, int]:
    """`n` memories among users as in use: a quarter of them held by large users of
    min(50,000, n/4) memories each ("large-0", ...), the rest by typical users ("user-0", ...)."""
    big = min(50_000, n // 4)
    n_big = max(1, (n // 4) // big)
    users = {f"large-{i}": big for i in range(n_big)}
    sizes = typical_sizes(n - big * n_big, rng)
    users.update({f"user-{i}": size for i, size in enumerate(sizes)})
    return users


async def make_data(
    n: int, real: bool, store: MemoryStore, rng: np.random.Generator, pairs: list[tuple[str, str]]
) -> Data:
    """`n` memories of skewed users. Each user's texts are consecutive `pairs` from a random
    start (cycled, numbered so that no two of a user's memories are equal); vectors are the
    store's embeddings of the texts when `real`, else clustered synthetic unit vectors."""
    users = skewed_users(n, rng)
    centers = unit(rng.normal(size=(CENTERS, DIMS)))
    texts, vectors = {}, {}
    for user, size in users.items():
        start = int(rng.integers(len(pairs)))
        picked = (pairs[(start + j) % len(pairs)] for j in range(size))
        texts[user] = [(f"{said} ({j})", replied) for j, (said, replied) in enumerate(picked)]
        if not real:
            picks = centers[rng.integers(0, len(centers), size)]
            vectors[user] = unit(picks + 0.45 * rng.normal(size=(size, DIMS)) / np.sqrt(DIMS / 8))
    if real:
        for user in users:
            embedded = await store.embedder.embed_documents([f"{a}\n{b}" for a, b in texts[user]])
            vectors[user] = np.array(embedded, dtype=np.float32)
    return Data(users, texts, vectors, real=real)


def turns(data: Data, tag: str = "") -> Iterator[dict[str, Any]]:
    """The data's memories as `add_turns` items with their vectors, user by user as in a file
    (as `recall import` reads one); `tag` appended to every user message makes them new."""
    for user, texts in data.texts.items():
        for (said, replied), vector in zip(texts, data.vectors[user], strict=True):
            yield {"user_id": user, "user_message": said + tag, "ai_response": replied,
                   "embedding": vector}  # fmt: skip


async def load(store: MemoryStore, data: Data) -> None:
    """Every user's turns in one import through `MemoryStore.add_turns`; each memory's id goes
    to `data.ids`."""
    ids = iter(await store.add_turns(turns(data), batch_size=BATCH))
    for user, texts in data.texts.items():
        data.ids[user] = [next(ids) for _ in texts]


def queries_for(data: Data, users: list[str], count: int, rng: np.random.Generator) -> list[Query]:
    """`count` queries, the users in turn: each a unit vector near one of the user's memories."""
    out = []
    for i in range(count):
        user = users[i % len(users)]
        base = data.vectors[user][rng.integers(len(data.vectors[user]))]
        out.append((user, unit((base + 0.6 * unit(rng.normal(size=(1, DIMS)))[0])[None, :])[0]))
    return out


def exact_top(data: Data, user: str, q: np.ndarray, k: int = 3) -> set[str]:
    """The ids of the user's `k` memories nearest to `q` (cosine, exact: numpy)."""
    sims = data.vectors[user] @ q
    return {data.ids[user][j] for j in np.argsort(-sims)[:k]}


def search_call(store: MemoryStore, user: str, q: np.ndarray) -> Call:
    """One semantic search of the store, limit 3, no threshold, the query vector given (the
    database and the pool only, no embedding)."""
    return lambda: store.search(
        user, "q", limit=3, similarity_threshold=0.0, mode="semantic", query_vector=q
    )
