"""The default path's end-to-end cost (issue 29): `store.search(user, text)` at the store's
defaults against the semantic-only path (`mode="semantic"`), the query embedded in every call
(embedding cache off), the same users and questions, in one run taking turns in blocks of 25.

    python benchmarks/default_path.py [--size 50000] [--queries 400] [--model NAME]

Two sets of users, in one database:
- LoCoMo's full regime (benchmarks/harness/regimes.py): each dev conversation one user (about 300
  memories), asked its own questions;
- one user as large as benchmarks/latency.py's largest (--size memories, 50,000 by default):
  LoCoMo turn pairs cycled and numbered as harness/data.py makes a user's texts, each vector its
  pair's embedding by the store's model plus a little noise (so no two are equal; real texts
  and real-model geometry, without embedding 50,000 texts), its HNSW index built
  (`MemoryStore.optimize`), asked --queries LoCoMo questions (a seeded sample).
The same calls with the query vector given time the database and ranking work alone. A warm-up
pass over the first calls of every path comes first. Writes docs/benchmarks.md (section
"default-path").
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
from harness.corpus import Corpus, load
from harness.db import fresh_database, settle
from harness.regimes import SEED, Vectors, embed, full, turn_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import BLOCK, Call, percentiles, timed, timed_interleaved

from recall.config import DEFAULT_EMBEDDING_MODEL, Settings
from recall.embeddings import Vector
from recall.store import MemoryStore

LARGE = "large-0"  # as latency.py names its largest users
NOISE = 0.3  # per-vector noise on the pair's embedding: cosine to it about 0.96
WARM = 50  # calls of each path before the timed run
PATHS = ("default", "semantic", "default, vector given", "semantic, vector given")
TARGETS = {"LoCoMo full users": "<= 1.5 (p50 and p95)", "large user": "<= 2 (p95)"}


def large_user(
    corpus: Corpus, vectors: Vectors, size: int, rng: np.random.Generator
) -> Iterator[dict[str, Any]]:
    """`size` memories of one user: the corpus's pairs from a random start, cycled and
    numbered (no two equal), each vector its pair's plus noise, scaled to unit length."""
    start = int(rng.integers(len(corpus.turns)))
    for j in range(size):
        i = (start + j) % len(corpus.turns)
        turn = corpus.turns[i]
        base = np.asarray(vectors.pairs[i], dtype=np.float32)
        noisy = base + NOISE * rng.normal(size=base.shape).astype(np.float32) / np.sqrt(base.size)
        yield {"user_id": LARGE, "user_message": f"{turn['user_message']} ({j})",
               "ai_response": turn["ai_response"], "created_at": turn["created_at"],
               "embedding": noisy / np.linalg.norm(noisy)}  # fmt: skip


def calls(store: MemoryStore, asked: list[tuple[str, str, Vector]]) -> dict[str, list[Call]]:
    """Each path's call per (user, text, vector): the defaults and semantic-only, the text
    embedded (cache off), then the same with the vector given."""

    def call(user: str, text: str, vector: Vector, path: str) -> Call:
        given = vector if path.endswith("vector given") else None
        if path.startswith("semantic"):
            return lambda: store.search(user, text, mode="semantic", query_vector=given)
        return lambda: store.search(user, text, query_vector=given)

    return {path: [call(u, t, v, path) for u, t, v in asked] for path in PATHS}


async def measure(
    store: MemoryStore, asked: list[tuple[str, str, Vector]]
) -> dict[str, list[float]]:
    """A warm-up pass over the first `WARM` calls of every path, then every path's calls
    taking turns in blocks: each path's times in ms."""
    by_path = calls(store, asked)
    for path_calls in by_path.values():
        await timed(path_calls[:WARM])
    return {path: times for path, (times, _found) in (await timed_interleaved(by_path)).items()}


def rows(label: str, users: str, times: dict[str, list[float]]) -> list[list[str]]:
    """The table's rows of one set of users: each path's p50 and p95, and the default's ratio
    to semantic-only (end to end, and with the vector given)."""
    p = {path: percentiles(times[path], [50, 95]) for path in PATHS}
    out = []
    for path in PATHS:
        base = p["semantic, vector given" if path.endswith("vector given") else "semantic"]
        ratio = [f"{a / b:.2f}" for a, b in zip(p[path], base, strict=True)]
        target = TARGETS[label] if path == "default" else "-"
        out.append([label, users, path, *(f"{v:.2f}" for v in p[path]), *ratio, target])
    return out


async def main() -> None:
    """Load both sets of users, time the paths; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--size", type=int, default=50_000, help="the large user's memories")
    options.add_argument("--queries", type=int, default=400, help="questions to the large user")
    options.add_argument(
        "--model", default=DEFAULT_EMBEDDING_MODEL, help="RECALL_EMBEDDING_MODEL for the store"
    )
    args = options.parse_args()
    revision = git_revision()
    corpus = load(args.data)
    regime = full(corpus)
    url = await fresh_database("recall_bench_default_path")
    settings = Settings(database_url=url, embedding_cache_ttl=0, embedding_model=args.model)
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        vectors = await embed(store, corpus, echoes=False)
        await store.add_turns(turn_items(corpus, regime, vectors), batch_size=2000)
        started = time.perf_counter()
        rng = np.random.default_rng(SEED)
        await store.add_turns(large_user(corpus, vectors, args.size, rng), batch_size=5000)
        indexed = await store.optimize()
        print(f"large user: {args.size} memories, index {indexed}, "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        await settle(url)
        own = [(user, text, vectors.queries[n])
               for n, (user, text, *_rest) in enumerate(corpus.questions)]  # fmt: skip
        picked = random.Random(SEED).sample(range(len(own)), min(args.queries, len(own)))
        large = [(LARGE, own[n][1], own[n][2]) for n in picked]
        full_times = await measure(store, own)
        large_times = await measure(store, large)
    sizes = f"{len(regime.users())} users, {len(own)} questions"
    table_rows = rows("LoCoMo full users", sizes, full_times)
    table_rows += rows(
        "large user", f"1 user of {args.size:,}, {len(large)} questions", large_times
    )
    command = " ".join(["python benchmarks/default_path.py"] + [
        f"{name} {value}" for name, value, default in
        [("--size", args.size, 50_000), ("--queries", args.queries, 400),
         ("--model", args.model, DEFAULT_EMBEDDING_MODEL)] if value != default
    ])  # fmt: skip
    headers = ["users", "asked", "path", "p50 ms", "p95 ms", "p50 ratio to semantic",
               "p95 ratio to semantic", "target (ratio)"]  # fmt: skip
    body = f"""## The default path against semantic-only, end to end

`{command}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}, {args.model}.
`store.search(user, text)` at the store's defaults ("default": limit {settings.max_memories},
threshold {settings.similarity_threshold}, mode {settings.retrieval_mode} today) against
`store.search(user, text, mode="semantic")`, the query embedded in every call (embedding cache
off); then both with the query vector given (database and ranking only). Same users and
questions, the four paths taking turns in blocks of {BLOCK} in one run, after a warm-up pass
of {WARM} calls each. The large user holds LoCoMo turn pairs cycled and numbered, each vector
its pair's embedding plus noise, with its own HNSW index; the LoCoMo users hold their
conversation (target: issue 29):

{table(headers, table_rows)}
"""
    publish("default-path", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
