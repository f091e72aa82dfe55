"""Latency, recall and throughput at 10k / 100k / 1M memories, side by side with LangGraph's
AsyncPostgresStore (pgvector HNSW, cosine) on the same data and vectors.

    python benchmarks/latency.py [--sizes 10000,100000,1000000] [--queries 500]
                                 [--writes 300] [--embedded 2000]

Users are skewed: most hold 10-1,000 memories (log-uniform), a few hold min(50,000, N/4).
Each memory's texts are a real turn pair from LoCoMo (--data; cycled, numbered so that no two
of a user's memories are equal), so rows have a chat's size on disk. Vectors are real
all-MiniLM-L6-v2 embeddings of those texts up to --real-upto rows, clustered synthetic unit
vectors above (the table says which). Everything is loaded through `MemoryStore.add_turns`.
Each query list runs twice: percentiles are over the second pass (--queries queries, caches
warm); the first pass, the first touch of each user's pages, is reported on its own row. In
the second pass our searches and LangGraph's take turns in blocks of 25 queries, so the
ours/theirs ratio is measured at the same time, not minutes apart. Then: the hybrid search,
the retrieval node end to end (query embedding included), --writes single `add_turn` calls,
a bulk import of --embedded turns that the model embeds, and concurrent searches.
Writes docs/benchmarks.md (section "latency").
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from harness.corpus import conversation_pairs
from harness.data import DIMS, Data, Query, exact_top, load, make_data, queries_for, search_call
from harness.db import fresh_database, settle
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import BLOCK, Call, percentiles, timed, timed_interleaved, timed_warm
from langchain_core.messages import HumanMessage
from langgraph.store.base import PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import ANNIndexConfig, HNSWConfig, PostgresIndexConfig

from recall.config import RetrievalMode, Settings
from recall.nodes import create_retrieve_memories_node
from recall.store import MemoryStore

TOPICS = ["hiking", "cooking", "the dog", "work", "a trip", "music", "the garden", "books",
          "health", "family", "movies", "coffee", "running", "painting", "the car"]  # fmt: skip
CLIENTS = (1, 8, 32)  # concurrent clients searching at once
LANGGRAPH_BATCH = 2000  # PutOps per `abatch` when loading LangGraph's store


@dataclass(frozen=True, slots=True)
class LangGraphSide:
    """LangGraph's AsyncPostgresStore loaded with the same memories and vectors."""

    store: AsyncPostgresStore
    lookup: dict[str, list[float]]  # text -> vector: its `embed` returns ours, no model
    load_s: float

    def calls(self, label: str, qs: list[Query]) -> list[Call]:
        """One `asearch` (limit 3) per query, its vector looked up by a key of its own."""

        def call(n: int, user: str, q: np.ndarray) -> Call:
            key = f"query {label} {n}"
            self.lookup[key] = q.tolist()
            return lambda: self.store.asearch(("memories", user), query=key, limit=3)

        return [call(n, user, q) for n, (user, q) in enumerate(qs)]


@asynccontextmanager
async def langgraph_side(url: str, data: Data) -> AsyncIterator[LangGraphSide]:
    """LangGraph's store on the same database, loaded with `data` through `abatch` (HNSW,
    cosine, m 16, ef_construction 200), vacuumed and checkpointed; open until the block ends."""
    lookup: dict[str, list[float]] = {}

    async def embed(texts: Sequence[str]) -> list[list[float]]:
        return [lookup[t] for t in texts]

    hnsw: HNSWConfig = {"kind": "hnsw", "m": 16, "ef_construction": 200}
    index: PostgresIndexConfig = {
        "dims": DIMS, "embed": embed, "fields": ["text"], "distance_type": "cosine",
        # HNSWConfig narrows its base's `kind`, so mypy does not take it for an ANNIndexConfig
        "ann_index_config": cast(ANNIndexConfig, hnsw),
    }  # fmt: skip
    async with AsyncPostgresStore.from_conn_string(url, index=index) as lg:
        await lg.setup()
        t0 = time.perf_counter()
        ops: list[PutOp] = []
        for user, texts in data.texts.items():
            for j, (said, replied) in enumerate(texts):
                text = f"{said}\n{replied}"
                lookup[text] = data.vectors[user][j].tolist()
                ops.append(PutOp(("memories", user), data.ids[user][j], {"text": text}))
                if len(ops) >= LANGGRAPH_BATCH:
                    await lg.abatch(ops)
                    ops = []
        if ops:
            await lg.abatch(ops)
        load_s = time.perf_counter() - t0
        await settle(url, "store", "store_vectors")  # as ours: before any timing
        yield LangGraphSide(lg, lookup, load_s)


@dataclass(frozen=True, slots=True)
class Searched:
    """One system's searches of a query list: the measured pass, the first pass, recall@3
    against the exact top 3, and how many searches returned fewer than 3 results."""

    warm: list[float]
    first: list[float]
    recall: float
    short: int


async def compare(
    store: MemoryStore, side: LangGraphSide | None, data: Data, label: str, qs: list[Query]
) -> dict[str, Searched]:
    """Our searches of `qs` and LangGraph's ("ours", "theirs"): the first pass, each system's
    first touch of each user's pages, system by system; then the measured pass with the
    systems taking turns in blocks."""
    by_system = {"ours": [search_call(store, u, q) for u, q in qs]}
    if side is not None:
        by_system["theirs"] = side.calls(label, qs)
    first = {name: (await timed(calls))[0] for name, calls in by_system.items()}
    warm = await timed_interleaved(by_system)
    truth = [exact_top(data, u, q) for u, q in qs]  # once, for both systems
    out = {}
    for name, (times, found) in warm.items():
        ids = [{m.id for m in res} if name == "ours" else {r.key for r in res} for res in found]
        hits = sum(len(got & top) for got, top in zip(ids, truth, strict=True))
        short = sum(len(res) < 3 for res in found)
        out[name] = Searched(times, first[name], hits / (3 * len(qs)), short)
    return out


async def node_times(
    store: MemoryStore, settings: Settings, qs: list[Query]
) -> list[tuple[RetrievalMode, list[float]]]:
    """The retrieval node end to end (the query embedded, cache off), per mode, warm."""
    out: list[tuple[RetrievalMode, list[float]]] = []
    modes: tuple[RetrievalMode, ...] = ("semantic", "hybrid")
    for mode in modes:
        node = create_retrieve_memories_node(store, mode=mode, settings=settings)

        def node_call(u: str, i: int, node: Any = node) -> Call:
            text = f"what did we say about {TOPICS[i % len(TOPICS)]} {i}?"
            config = {"configurable": {"langgraph_auth_user": {"identity": u}}}
            return lambda: node({"messages": [HumanMessage(text)]}, config)

        _first, times, _ = await timed_warm([node_call(u, i) for i, (u, _q) in enumerate(qs)])
        out.append((mode, times))
    return out


async def write_times(store: MemoryStore, pairs: list[tuple[str, str]], count: int) -> list[float]:
    """`count` single `add_turn` calls (the model warm, every turn new)."""

    def write_call(i: int) -> Call:
        said, replied = pairs[i % len(pairs)]
        return lambda: store.add_turn("writer", f"{said} ({i})", replied)

    times, _ = await timed([write_call(i) for i in range(count)])
    return times


async def embedding_import_rate(
    store: MemoryStore, pairs: list[tuple[str, str]], count: int
) -> float:
    """Turns per second of an `add_turns` import of `count` turns that the model embeds."""
    batch = [
        {"user_id": "bulk-embed", "user_message": f"{said} ({i})", "ai_response": replied}
        for i, (said, replied) in enumerate(pairs[k % len(pairs)] for k in range(count))
    ]
    t0 = time.perf_counter()
    await store.add_turns(batch, batch_size=1000)
    return len(batch) / (time.perf_counter() - t0)


async def concurrency(store: MemoryStore, qs: list[Query]) -> list[tuple[int, float, float]]:
    """(clients, searches per second, p95 ms) with CLIENTS concurrent clients searching."""
    out = []
    for clients in CLIENTS:
        per_client = max(20, 400 // clients)
        lat: list[float] = []

        async def client(c: int, per_client: int = per_client, lat: list[float] = lat) -> None:
            for k in range(per_client):
                u, q = qs[(c * per_client + k) % len(qs)]
                t = time.perf_counter()
                await search_call(store, u, q)()
                lat.append((time.perf_counter() - t) * 1000)

        t0 = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        wall = time.perf_counter() - t0
        out.append((clients, len(lat) / wall, percentiles(lat, [95])[0]))
    return out


def pct(values: list[float]) -> list[str]:
    """p50, p95 and p99 with two decimals."""
    return [f"{v:.2f}" for v in percentiles(values)]


def search_rows(
    label: str, key: str, ours: Searched, theirs: Searched | None
) -> list[list[object]]:
    """The measured and the first-touch rows of one query list."""
    row: list[object] = [label, f"db search, {key} user", *pct(ours.warm), f"{ours.recall:.3f}"]
    cold: list[object] = [label, f"db search, {key} user, first touch", *pct(ours.first), "-"]
    if theirs is None:
        return [[*row, "-", "-", "-"], [*cold, "-", "-", "-"]]
    p95 = percentiles(ours.warm, [95])[0] / percentiles(theirs.warm, [95])[0]
    first95 = percentiles(ours.first, [95])[0] / percentiles(theirs.first, [95])[0]
    return [
        [*row, " / ".join(pct(theirs.warm)), f"{theirs.recall:.3f} ({theirs.short} short)",
         f"{p95:.3f}"],
        [*cold, " / ".join(pct(theirs.first)), "-", f"{first95:.3f}"],
    ]  # fmt: skip


async def run_size(n: int, args: argparse.Namespace) -> list[list[object]]:
    """Every measurement at `n` memories, as the table's rows."""
    rng = np.random.default_rng(n)
    url = await fresh_database(f"recall_bench_latency_{n}")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        pairs = conversation_pairs(args.data)
        data = await make_data(n, n <= args.real_upto, store, rng, pairs)
        t0 = time.perf_counter()
        await load(store, data)
        import_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        indexed = await store.optimize()
        hnsw_s = time.perf_counter() - t0
        await settle(url)
        bytes_per = (await store.stats())["bytes"] / n
        qs = {
            "typical": queries_for(data, data.typical(), args.queries, rng),
            "largest": queries_for(data, data.large(), args.queries, rng),
        }
        async with AsyncExitStack() as stack:
            # LangGraph's store holds the same memories before either system is timed
            side = (
                await stack.enter_async_context(langgraph_side(url, data))
                if n <= args.langgraph_upto
                else None
            )
            searched = {label: await compare(store, side, data, label, items)
                        for label, items in qs.items()}  # fmt: skip
        hybrid = [
            lambda u=u, q=q: store.search(
                u, "hiking and coffee", similarity_threshold=0.0, mode="hybrid", query_vector=q
            )
            for u, q in qs["typical"]
        ]
        _first, hybrid_times, _ = await timed_warm(hybrid)
        nodes = await node_times(store, settings, qs["typical"])
        writes = await write_times(store, pairs, args.writes)
        embed_rate = await embedding_import_rate(store, pairs, args.embedded)
        conc = await concurrency(store, qs["typical"])

    label = f"{n:,} ({'real MiniLM' if data.real else 'synthetic clustered'})"
    rows: list[list[object]] = []
    for key, by_system in searched.items():
        rows += search_rows(label, key, by_system["ours"], by_system.get("theirs"))
    none = ["-"] * 4
    rows.append([label, "db search, hybrid, typical", *pct(hybrid_times), *none])
    rows += [[label, f"node end to end ({mode}, embedding)", *pct(times), *none]
             for mode, times in nodes]  # fmt: skip
    rows.append([label, "add_turn (embedding included)", *pct(writes), *none])
    extra = (f"bulk import {n / import_s:,.0f} turns/s precomputed, {embed_rate:,.0f} turns/s "
             f"with embedding; HNSW for {len(indexed)} large users {hnsw_s:.1f} s; "
             f"{bytes_per:,.0f} bytes per memory (table + indexes)")  # fmt: skip
    if side is not None:
        extra += f"; LangGraph store load {n / side.load_s:,.0f} items/s"
    conc_text = ", ".join(f"{c} clients: {tp:,.0f} q/s, p95 {p95:.2f} ms" for c, tp, p95 in conc)
    rows.append([label, "writes and size", extra, "", "", "", "", "", ""])
    rows.append([label, "concurrency (db search)", conc_text, "", "", "", "", "", ""])
    return rows


async def main() -> None:
    """Every size in turn; print the table and write it."""
    options = parser(__doc__, data=True)
    options.add_argument("--sizes", default="10000,100000,1000000")
    options.add_argument("--queries", type=int, default=500)
    options.add_argument("--real-upto", type=int, default=10_000)
    options.add_argument("--langgraph-upto", type=int, default=100_000)
    options.add_argument("--writes", type=int, default=300, help="single add_turn calls")
    options.add_argument("--embedded", type=int, default=2000, help="turns of the embedded import")
    args = options.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    revision = git_revision()
    rows = []
    for n in sizes:
        started = time.perf_counter()
        rows += await run_size(n, args)
        print(f"size {n}: {time.perf_counter() - started:.0f} s", flush=True)
    headers = ["rows", "measure", "p50 ms", "p95 ms", "p99 ms", "recall@3",
               "LangGraph p50/p95/p99 ms", "LangGraph recall@3", "p95 ours/theirs"]  # fmt: skip
    body = f"""## Latency at scale, side by side with LangGraph's AsyncPostgresStore

`python benchmarks/latency.py --sizes {args.sizes} --queries {args.queries}` on {machine()},
commit {revision}. recall@3 is against an exact (numpy) search over the user's own
memories; "short" counts LangGraph queries that returned fewer than 3 results. Same database,
same vectors, same users and queries for both systems. Every query list runs twice; the
figures are the second pass, in which the two systems take turns in blocks of {BLOCK} queries
(the order turning each block), and the "first touch" rows give the first pass (each user's
pages read for the first time: from disk or the OS cache), system by system. Memories hold real
LoCoMo turn pairs as texts; both systems' tables are vacuumed and analyzed after loading,
and a CHECKPOINT writes the load's dirty pages before each system's timings.

{table(headers, rows)}
"""
    publish("latency", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
