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
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import counts, git_revision, machine, publish, rotated, run, table
from latency import exact_top, indexed_database, queries_for
from overheads import app_connection, pcts

from recall.config import Settings
from recall.db.sql import query

BLOCK = 25


def search_params(user: str, q: np.ndarray, ef: int) -> dict[str, Any]:
    """`recall.search_indexed`'s arguments: limit 3, no distance bound, `ef` candidates."""
    return {"user_id": user, "query": q, "limit": 3, "max_distance": 2.0, "candidates": ef}


async def main() -> None:
    """Load, build the large user's index, then time each candidate count; print and write."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--efs", default="10,20,40,64,100,200", help="candidate counts to compare")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2, help="counted passes (after a warm-up)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    default = Settings().hnsw_ef_search
    efs = counts(args.efs, default=default, option="--efs")
    revision = git_revision()  # the code that runs, whatever changes during the run
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
        turn = 0  # counts blocks across rounds, so each count goes first equally often
        for round_ in range(args.rounds + 1):  # round 0 warms up and is not counted
            for start in range(0, len(queries), BLOCK):
                block = list(
                    zip(queries[start : start + BLOCK], truth[start : start + BLOCK], strict=True)
                )
                for ef in rotated(efs, turn):
                    for (user, q), top in block:
                        params = search_params(user, q, ef)
                        t0 = time.perf_counter()
                        cur = await conn.execute(query("search_indexed"), params)
                        rows = await cur.fetchall()
                        elapsed = (time.perf_counter() - t0) * 1000
                        if round_:
                            times[ef].append(elapsed)
                            hits[ef] += len({str(r[0]) for r in rows} & top)
                turn += 1
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
    d50, d95 = pcts(times[default])
    rows = []
    for ef in efs:
        p50, p95 = pcts(times[ef])
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
