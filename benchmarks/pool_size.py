"""Connection pool size under concurrent searches, as ratios measured in one run.

    python benchmarks/pool_size.py [--rows 100000] [--sizes 2,4,10,20] [--clients 8,32]
                                   [--queries 400] [--rounds 8]

Loads --rows memories as the latency benchmark does (its skewed users, LoCoMo turn pairs as
texts, clustered synthetic vectors), vacuums and checkpoints, then opens one store per pool
size (`connection_pool_size`), all on the same database and sharing one embedder. For each
number of concurrent clients, every pool size runs the same --queries searches of typical
users (semantic, limit 3, precomputed query vectors: the database and the pool only), the
clients taking the next query from a shared list until it is done. The sizes take turns,
in an order rotated each round; round 0 opens the pools' connections and warms the caches and
is not counted. Reported: throughput (queries/s) and per-query latency percentiles, as medians
over the rounds, and each as a ratio to the default size in the same run. Writes
docs/benchmarks.md (section "pool-size").
"""

from __future__ import annotations

import argparse
import asyncio
import time
from contextlib import AsyncExitStack

import numpy as np
from harness.corpus import conversation_pairs
from harness.data import Query, load, make_data, queries_for, search_call
from harness.db import fresh_database, settle
from harness.report import git_revision, machine, publish, table
from harness.run import counts, parser, run
from harness.timing import percentiles, rotated

from recall.config import Settings
from recall.db.pool import open_pool
from recall.store import MemoryStore


async def burst(
    store: MemoryStore, queries: list[Query], clients: int
) -> tuple[float, list[float]]:
    """Run `queries` on `clients` concurrent clients; return (queries/s, latencies in ms)."""
    pending = iter(queries)
    latencies: list[float] = []

    async def client() -> None:
        for user, vector in pending:  # a shared iterator: each query is taken once
            t0 = time.perf_counter()
            await search_call(store, user, vector)()
            latencies.append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return len(latencies) / (time.perf_counter() - t0), latencies


async def main() -> None:
    """Load, then time each pool size under each number of clients; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--rows", type=int, default=100_000)
    options.add_argument("--sizes", default="2,4,10,20", help="pool sizes to compare")
    options.add_argument("--clients", default="8,32", help="concurrent clients")
    options.add_argument("--queries", type=int, default=400, help="searches per burst")
    options.add_argument("--rounds", type=int, default=8, help="counted rounds (after a warm-up)")
    args = options.parse_args()
    default = Settings().connection_pool_size
    sizes = counts(args.sizes, default=default, option="--sizes")
    client_counts = [int(c) for c in args.clients.split(",")]
    revision = git_revision()
    rng = np.random.default_rng(args.rows)
    url = await fresh_database("recall_bench_pool_size")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    # (clients, size) -> per round: (queries/s, [latencies])
    runs: dict[tuple[int, int], list[tuple[float, list[float]]]] = {}
    async with MemoryStore.connect(settings) as loader:
        data = await make_data(args.rows, False, loader, rng, conversation_pairs(args.data))
        await load(loader, data)
        await settle(url)
        queries = queries_for(data, data.typical(), args.queries, rng)
        async with AsyncExitStack() as stack:
            stores: dict[int, MemoryStore] = {}
            for size in sizes:
                pool = await open_pool(url, max_size=size)
                stores[size] = MemoryStore(pool, loader.embedder, settings)
                stack.push_async_callback(stores[size].close)
            for round_ in range(args.rounds + 1):  # round 0 warms up and is not counted
                for clients in client_counts:
                    # each order of the sizes counts equally often when --rounds is a
                    # multiple of the number of sizes
                    for size in rotated(sizes, round_ - 1):
                        result = await burst(stores[size], queries, clients)
                        if round_:
                            runs.setdefault((clients, size), []).append(result)
    report(args, revision, sizes, client_counts, default, runs)


def summary(results: list[tuple[float, list[float]]]) -> tuple[float, float, float, float]:
    """Medians over rounds of: queries/s, and the p50, p95 and p99 latency of each round."""
    rates = [rate for rate, _ in results]
    p50, p95, p99 = (
        float(np.median(p)) for p in zip(*(percentiles(lat) for _, lat in results), strict=True)
    )
    return float(np.median(rates)), p50, p95, p99


def report(
    args: argparse.Namespace,
    revision: str,
    sizes: list[int],
    client_counts: list[int],
    default: int,
    runs: dict[tuple[int, int], list[tuple[float, list[float]]]],
) -> None:
    """The table: medians over rounds, and ratios to the default size."""
    rows: list[list[object]] = []
    for clients in client_counts:
        base_rate, _, base_p95, _ = summary(runs[(clients, default)])
        for size in sizes:
            rate, p50, p95, p99 = summary(runs[(clients, size)])
            rows.append([
                clients,
                f"{size}{' (default)' if size == default else ''}",
                f"{rate:,.0f}",
                f"{p50:.2f}",
                f"{p95:.2f}",
                f"{p99:.2f}",
                f"{rate / base_rate:.2f}",
                f"{p95 / base_p95:.2f}",
            ])  # fmt: skip
    headers = ["clients", "pool size", "q/s", "p50 ms", "p95 ms", "p99 ms",
               "q/s / default", "p95 / default"]  # fmt: skip
    body = f"""## Connection pool size under concurrent searches

`python benchmarks/pool_size.py --rows {args.rows} --sizes {args.sizes} --clients
{args.clients} --queries {args.queries} --rounds {args.rounds}` on {machine()}, commit
{revision}. One store per pool size on the same {args.rows:,}-memory database (LoCoMo
texts, clustered synthetic vectors), the sizes taking turns in a rotated order; each burst is
{args.queries} semantic searches of typical users (precomputed query vectors) shared by the
clients. Figures are medians over {args.rounds} rounds after a warm-up round; the ratios
compare with the default pool size ({default}) in the same run. Decision 0013.

{table(headers, rows)}
"""
    publish("pool-size", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
