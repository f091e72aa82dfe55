"""The indexed search's candidate count (`hnsw_ef_search`): recall@3 and time, in one run.

    python benchmarks/ef_search.py [--rows 200000] [--efs 10,20,40,64,100,200] [--queries 500]

Loads --rows memories as the latency benchmark does (its skewed users: one of
min(50,000, rows / 4) memories, the rest of 10 to 1,000; LoCoMo turn pairs as texts, clustered
synthetic vectors), builds the large user's HNSW index (`MemoryStore.optimize`), and searches
that user (limit 3) through `recall.search_indexed` with each candidate count, the counts
taking turns in blocks of 25 queries (order turning each block), 2 rounds after a warm-up
round, as role recall_app. recall@3 is against an exact (numpy) search over the user's
memories. The vectors are synthetic: clustered, which may be easier for HNSW than real
embeddings (decision 0013). Writes docs/benchmarks.md (section "ef-search").
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from harness.data import exact_top, indexed_database, queries_for
from harness.db import app_connection
from harness.report import git_revision, machine, publish, table
from harness.run import counts, parser, run
from harness.timing import BLOCK, Call, blocks, percentiles, timed_interleaved
from psycopg import AsyncConnection

from recall.config import Settings
from recall.db.sql import query


def indexed_call(conn: AsyncConnection[Any], user: str, q: np.ndarray, ef: int) -> Call:
    """One `recall.search_indexed` call: limit 3, no distance bound, `ef` candidates."""
    params = {"user_id": user, "query": q, "limit": 3, "max_distance": 2.0, "candidates": ef}

    async def call() -> list[Any]:
        cur = await conn.execute(query("search_indexed"), params)
        return await cur.fetchall()

    return call


async def main() -> None:
    """Load, build the large user's index, then time each candidate count; print and write."""
    options = parser(__doc__)
    options.add_argument("--rows", type=int, default=200_000)
    options.add_argument("--efs", default="10,20,40,64,100,200", help="candidate counts to compare")
    options.add_argument("--queries", type=int, default=500)
    options.add_argument("--rounds", type=int, default=2, help="counted passes (after a warm-up)")
    args = options.parse_args()
    default = Settings().hnsw_ef_search
    efs = counts(args.efs, default=default, option="--efs")
    revision = git_revision()
    rng = np.random.default_rng(args.rows)
    url, data, indexed = await indexed_database("recall_bench_ef_search", args.rows, rng)
    if len(indexed) != 1:
        raise SystemExit(
            f"--rows {args.rows} gives {len(indexed)} users with an index of their own; this "
            "benchmark needs exactly one (--rows from 80,000 to 399,999)"
        )
    [large] = indexed
    queries = queries_for(data, [large], args.queries, rng)
    truth = [exact_top(data, user, q) for user, q in queries]  # once, for every count and round
    conn = await app_connection(url)
    times: dict[int, list[float]] = {ef: [] for ef in efs}
    hits = dict.fromkeys(efs, 0)
    try:
        calls = {ef: [indexed_call(conn, user, q, ef) for user, q in queries] for ef in efs}
        for round_ in range(args.rounds + 1):  # round 0 warms up and is not counted
            # the turns go on across rounds, so each count goes first equally often
            measured = await timed_interleaved(calls, first_turn=round_ * blocks(len(queries)))
            if round_:
                for ef, (ms, found) in measured.items():
                    times[ef] += ms
                    hits[ef] += sum(
                        len({str(r[0]) for r in rows} & top)
                        for rows, top in zip(found, truth, strict=True)
                    )
    finally:
        await conn.close()
    report(args, revision, data.users[large], efs, default, times, hits, args.rounds * len(queries))


def report(
    args: argparse.Namespace,
    revision: str,
    size: int,
    efs: list[int],
    default: int,
    times: dict[int, list[float]],
    hits: dict[int, int],
    searches: int,
) -> None:
    """The table: recall@3 and percentiles per count, and ratios to the default."""
    d50, d95 = percentiles(times[default], [50, 95])
    rows = []
    for ef in efs:
        p50, p95 = percentiles(times[ef], [50, 95])
        label = f"{ef}{' (default)' if ef == default else ''}"
        rows.append([label, f"{hits[ef] / (3 * searches):.4f}", f"{p50:.2f}", f"{p95:.2f}",
                     f"{p50 / d50:.2f}", f"{p95 / d95:.2f}"])  # fmt: skip
    body = f"""## The indexed search's candidate count (ef_search)

`python benchmarks/ef_search.py --rows {args.rows} --efs {args.efs} --queries {args.queries}
--rounds {args.rounds}` on {machine()}, commit {revision}. Searches (limit 3) of the one
user of {size:,} memories, with its own HNSW index, among {args.rows:,} memories (LoCoMo
texts, clustered synthetic vectors), through `recall.search_indexed` as role recall_app; the
counts take turns in blocks of {BLOCK}, {args.rounds} rounds after a warm-up round. recall@3
is against an exact search over the user's memories. Decision 0013.

{table(["ef_search", "recall@3", "p50 ms", "p95 ms", "p50 / default", "p95 / default"], rows)}
"""
    publish("ef-search", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
