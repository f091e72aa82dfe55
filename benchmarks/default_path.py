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
The same calls with the query vector given time the database and ranking work alone. The peer
(issue 36): LangGraph's AsyncPostgresStore in a database of its own on the same server, each
user's memories the items of namespace (user, "memories") with their texts and the same vectors
(looked up when stored, not embedded again), `asearch(namespace, query=text, limit=3)` with the
query embedded by the same model in every call, as ours. A warm-up pass over the first calls
of every path comes first. Writes docs/benchmarks.md (section "default-path").
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import numpy as np
from harness import longmemeval as lme
from harness.bootstrap import shown
from harness.corpus import Corpus, load
from harness.db import fresh_database, settle
from harness.regimes import LARGE, SEED, Vectors, embed, full, large_user, turn_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import BLOCK, Call, percentiles, ratio_interval, timed, timed_interleaved
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig

from recall.config import DEFAULT_EMBEDDING_MODEL, RetrievalMode, Settings
from recall.embeddings import Vector
from recall.store import MemoryStore

WARM = 50  # calls of each path before the timed run
PEER = "peer: AsyncPostgresStore.asearch"
PATHS = ("default", "semantic", "default, vector given", "semantic, vector given", PEER)
# issue 56's targets for default / semantic
TARGETS = {
    "LoCoMo full users": "<= 1.25 (p50 and p95), semantic + 1.5 ms (p50)",
    "large user": "<= 1.5 (p50 and p95)",
}
NAMESPACE = "memories"
LARGE_FROM = {
    "locomo": "The large user holds LoCoMo turn pairs cycled and numbered, each vector its "
    "pair's embedding plus noise, asked a seeded sample of LoCoMo's questions",
    "longmemeval": "The large user holds distinct turns of LongMemEval dev's haystacks (whole "
    "haystacks in the file's order, each turn once: `harness.longmemeval.one_user`), asked the "
    "questions of the haystacks it holds, each several times in turns",
}
PEER_LIMIT = 3  # the store's default limit
PEER_BATCH = 2000  # puts per `abatch` when loading the peer


class PeerEmbeddings(Embeddings):
    """The store's model for the peer: a stored text's vector is looked up (the one our store
    holds for it), a query is embedded by the model in every call, in a worker thread as our
    store embeds one."""

    def __init__(self, model: Embeddings, stored: dict[str, Any]) -> None:
        self.model = model
        self.stored = stored

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Each text's stored vector (the model's for a text not stored)."""
        return [
            np.asarray(self.stored[t], dtype=np.float32).tolist()
            if t in self.stored
            else self.model.embed_query(t)
            for t in texts
        ]

    def embed_query(self, text: str) -> list[float]:
        """The query's vector by the model."""
        return list(self.model.embed_query(text))

    async def aembed_query(self, text: str) -> list[float]:
        """As `embed_query`, in a worker thread."""
        return await asyncio.to_thread(self.embed_query, text)


def item_text(item: dict[str, Any]) -> str:
    """The text the peer stores for a memory: its two sides."""
    return f"{item['user_message']}\n{item['ai_response']}"


@asynccontextmanager
async def peer_store(
    url: str, model: Embeddings, items: list[dict[str, Any]]
) -> AsyncIterator[AsyncPostgresStore]:
    """The peer on `url`, loaded with `items` (our memories, their vectors), open until the
    block ends."""
    stored = {item_text(item): item["embedding"] for item in items}
    index: PostgresIndexConfig = {
        "dims": len(items[0]["embedding"]),
        "embed": PeerEmbeddings(model, stored),
        "fields": ["text"],
    }
    async with AsyncPostgresStore.from_conn_string(url, index=index) as peer:
        await peer.setup()
        for start in range(0, len(items), PEER_BATCH):
            batch = items[start : start + PEER_BATCH]
            await peer.abatch([
                PutOp((item["user_id"], NAMESPACE), f"m{start + j}", {"text": item_text(item)})
                for j, item in enumerate(batch)
            ])  # fmt: skip
        yield peer


def calls(
    store: MemoryStore, peer: AsyncPostgresStore, asked: list[tuple[str, str, Vector]]
) -> dict[str, list[Call]]:
    """Each path's call per (user, text, vector): the defaults and semantic-only, the text
    embedded (cache off), then the same with the vector given; the peer's search."""

    def call(user: str, text: str, vector: Vector, path: str) -> Call:
        if path == PEER:
            return lambda: peer.asearch((user, NAMESPACE), query=text, limit=PEER_LIMIT)
        given = vector if path.endswith("vector given") else None
        if path.startswith("semantic"):
            return lambda: store.search(user, text, mode="semantic", query_vector=given)
        return lambda: store.search(user, text, query_vector=given)

    return {path: [call(u, t, v, path) for u, t, v in asked] for path in PATHS}


async def measure(
    store: MemoryStore, peer: AsyncPostgresStore, asked: list[tuple[str, str, Vector]]
) -> dict[str, list[float]]:
    """A warm-up pass over the first `WARM` calls of every path, then every path's calls
    taking turns in blocks: each path's times in ms."""
    by_path = calls(store, peer, asked)
    for path_calls in by_path.values():
        await timed(path_calls[:WARM])
    return {path: times for path, (times, _found) in (await timed_interleaved(by_path)).items()}


def rows(label: str, users: str, times: dict[str, list[float]]) -> list[list[str]]:
    """The table's rows of one set of users: each path's p50 and p95, and the default's ratio
    to semantic-only (end to end, and with the vector given)."""
    p = {path: percentiles(times[path], [50, 95]) for path in PATHS}
    out = []
    for path in PATHS:
        if path == PEER:
            continue
        against = "semantic, vector given" if path.endswith("vector given") else "semantic"
        ratio = [
            f"{a / b:.2f} [{lo:.2f}, {hi:.2f}]"
            for q, a, b in zip((50, 95), p[path], p[against], strict=True)
            for lo, hi in [ratio_interval(times[path], times[against], q)]
        ]
        target = TARGETS[label] if path == "default" else "-"
        out.append([label, users, path, *(f"{v:.2f}" for v in p[path]), *ratio, target])
    return out


def peer_rows(label: str, times: dict[str, list[float]]) -> list[list[str]]:
    """The peer table's rows of one set of users: the peer's p50 and p95, and the default
    path's and semantic-only's ratio to it."""
    peer = percentiles(times[PEER], [50, 95])
    out = [[label, PEER, *(f"{v:.2f}" for v in peer), "1.00", "1.00", "-"]]
    for path in ("default", "semantic"):
        p = percentiles(times[path], [50, 95])
        ratio = [f"{a / b:.2f}" for a, b in zip(p, peer, strict=True)]
        target = "<= 1.0 (p95)" if path == "default" else "-"
        out.append([label, path, *(f"{v:.2f}" for v in p), *ratio, target])
    return out


def locomo_asked(corpus: Corpus, vectors: Vectors) -> list[tuple[str, str, Vector]]:
    """The LoCoMo users' own questions, with their vectors."""
    return [(user, text, vectors.queries[n])
            for n, (user, text, *_rest) in enumerate(corpus.questions)]  # fmt: skip


def sampled(own: list[tuple[str, str, Vector]], queries: int) -> list[tuple[str, str, Vector]]:
    """A seeded sample of `queries` LoCoMo questions, asked of the large user."""
    picked = random.Random(SEED).sample(range(len(own)), min(queries, len(own)))
    return [(LARGE, own[n][1], own[n][2]) for n in picked]


async def quality(
    store: MemoryStore, asked: list[tuple[str, Vector, frozenset[str]]]
) -> list[list[str]]:
    """The real large user's questions (text, vector, the ids of its answer sessions'
    memories) at the defaults and semantic-only: a memory of an answer session returned
    (reach), and first; bootstrap intervals over the questions."""
    out = []
    groups = list(range(len(asked)))
    modes: tuple[RetrievalMode | None, ...] = (None, "semantic")  # None: the store's default
    for mode in modes:
        reach, first = [], []
        for text, vector, answer in asked:
            got = await store.search(LARGE, text, query_vector=vector, mode=mode)
            hits = [str(m.id) in answer for m in got]
            reach.append(float(any(hits)))
            first.append(float(bool(hits) and hits[0]))
        path = "default" if mode is None else "semantic"
        out.append([path, str(len(asked)), shown(reach, groups), shown(first, groups)])
    return out


async def main() -> None:
    """Load both sets of users, time the paths; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--size", type=int, default=50_000, help="the large user's memories")
    options.add_argument("--queries", type=int, default=400, help="questions to the large user")
    options.add_argument(
        "--model", default=DEFAULT_EMBEDDING_MODEL, help="RECALL_EMBEDDING_MODEL for the store"
    )
    options.add_argument("--large-from", choices=("locomo", "longmemeval"), default="locomo",
                         help="the large user: LoCoMo pairs cycled with noisy vectors, or "
                         "distinct turns of LongMemEval dev's haystacks asked their own "
                         "questions in turns (issue 56)")  # fmt: skip
    args = options.parse_args()
    revision = git_revision()
    corpus = load(args.data)
    regime = full(corpus)
    url = await fresh_database("recall_bench_default_path")
    peer_url = await fresh_database("recall_bench_default_path_peer")
    settings = Settings(database_url=url, embedding_cache_ttl=0, embedding_model=args.model)
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        vectors = await embed(store, corpus, echoes=False)
        items = list(turn_items(corpus, regime, vectors))
        await store.add_turns(items, batch_size=2000)
        started = time.perf_counter()
        own = locomo_asked(corpus, vectors)
        placed: list[tuple[str, Vector, frozenset[int]]] = []
        if args.large_from == "longmemeval":
            large_items, placed = await lme.asked_user(store.embedder, args.size, LARGE)
            turns = max(1, args.queries // len(placed))  # each question asked that many times
            large = [(LARGE, text, vector) for _ in range(turns) for text, vector, _a in placed]
        else:
            rng = np.random.default_rng(SEED)
            large_items = list(large_user(corpus, vectors, args.size, rng))
            large = sampled(own, args.queries)
        ids = [str(i) for i in await store.add_turns(large_items, batch_size=5000)]
        # each question's answer sessions as the ids their turns were stored under
        real = [(text, vector, frozenset(ids[k] for k in answer))
                for text, vector, answer in placed]  # fmt: skip
        indexed = await store.optimize()
        print(f"large user: {len(large_items)} memories, index {indexed}, "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        await settle(url)
        started = time.perf_counter()
        peer_items = items + large_items
        async with peer_store(peer_url, store.embedder.embeddings, peer_items) as peer:
            print(f"peer: {len(peer_items)} items, {time.perf_counter() - started:.0f} s")
            await settle(peer_url, "store", "store_vectors")
            full_times = await measure(store, peer, own)
            large_times = await measure(store, peer, large)
        judged = await quality(store, real) if real else []
    sizes = f"{len(regime.users())} users, {len(full_times[PEER])} questions"
    table_rows = rows("LoCoMo full users", sizes, full_times)
    table_rows += rows(
        "large user",
        f"1 user of {len(large_items):,}, {len(large_times[PEER])} questions",
        large_times,
    )
    peer_table = peer_rows("LoCoMo full users", full_times) + peer_rows("large user", large_times)
    command = " ".join(["python benchmarks/default_path.py"] + [
        f"{name} {value}" for name, value, default in
        [("--size", args.size, 50_000), ("--queries", args.queries, 400),
         ("--model", args.model, DEFAULT_EMBEDDING_MODEL),
         ("--large-from", args.large_from, "locomo")] if value != default
    ])  # fmt: skip
    headers = ["users", "asked", "path", "p50 ms", "p95 ms", "p50 ratio to semantic",
               "p95 ratio to semantic", "target (ratio)"]  # fmt: skip
    peer_headers = ["users", "path", "p50 ms", "p95 ms", "p50 ratio to the peer",
                    "p95 ratio to the peer", "target (ratio)"]  # fmt: skip
    body = f"""## The default path against semantic-only, end to end

`{command}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}, {args.model}.
`store.search(user, text)` at the store's defaults ("default": limit {settings.max_memories},
threshold {settings.similarity_threshold}, mode {settings.mode} today) against
`store.search(user, text, mode="semantic")`, the query embedded in every call (embedding cache
off); then both with the query vector given (database and ranking only). Same users and
questions, the four paths taking turns in blocks of {BLOCK} in one run, after a warm-up pass
of {WARM} calls each. {LARGE_FROM[args.large_from]}, with its own HNSW index; the LoCoMo users
hold their conversation (targets: issue 56). Each ratio with its 95% bootstrap interval (the
calls resampled in pairs, the same question on both paths):

{table(headers, table_rows)}

Against the peer, LangGraph's `AsyncPostgresStore.asearch` (its default index: HNSW over every
namespace's vectors, cosine; limit {PEER_LIMIT}), the same users and questions, its query
embedded by the same model in every call, taking turns with the paths above:

{table(peer_headers, peer_table)}
"""
    if judged:
        body += f"""
The large user's quality: each of its {len(real)} questions once, at the defaults and
semantic-only; a hit is a memory of one of the question's answer sessions (bootstrap 95%
intervals over the questions):

{table(["path", "questions", "reach %", "first %"], judged)}
"""
    section = "default-path" if args.large_from == "locomo" else "default-path-real"
    publish(section, body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
