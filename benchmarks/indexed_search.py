"""The indexed search (a user with an HNSW index of their own) before and after migration 0010,
as ratios measured in one run.

    python benchmarks/indexed_search.py [--rows 200000] [--queries 500] [--rounds 5]

Loads --rows memories the way the latency benchmark does (its skewed users: one of
min(50,000, rows / 4) memories, the rest of 10 to 1,000; LoCoMo turn pairs as texts, clustered
synthetic vectors), builds the large user's HNSW index (`MemoryStore.optimize`), and searches
that user (limit 3, the default candidate list of 100) in two ways, phase after phase:

- before: the store's path until migration 0010, seven round trips: BEGIN, the row-level
  security key, a savepoint, the candidate count and `enable_sort = off`, the statement
  (unprepared, so planned for this user), RELEASE, COMMIT;
- after: `recall.search_indexed(...)`, one call that sets the same things and runs the same
  statement (`recall.search_indexed_sql`).

Both as role recall_app on one connection each, as the store runs; both must return the same
rows in the same order. Writes docs/benchmarks.md (section "indexed-search"); decision 0012.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import git_revision, machine, publish, run, table
from latency import indexed_database, queries_for
from overheads import app_connection, pcts

from recall.db.rls import scope
from recall.db.sql import query

BLOCK = 25  # searches per variant before switching to the other
EF_SEARCH = 100  # the default hnsw_ef_search


async def statement_before(conn: Any, user_id: str) -> bytes:
    """The statement migration 0010 runs, with the named parameters the store sent before."""
    cur = await conn.execute(b"SELECT recall.search_indexed_sql(%s)", [user_id])
    row = await cur.fetchone()
    names = {"1": "query", "2": "candidates", "3": "max_distance", "4": "limit"}
    return re.sub(r"\$([1-4])\b", lambda m: f"%({names[m.group(1)]})s", str(row[0])).encode()


async def before(conn: Any, statement: bytes, params: dict[str, Any]) -> list[Any]:
    async with scope(conn, user_id=params["user_id"]), conn.transaction():
        await conn.execute(
            b"SELECT set_config('hnsw.ef_search', %s, true),"
            b" set_config('enable_sort', 'off', true)",
            [str(params["candidates"])],
        )
        cur = await conn.execute(statement, params, prepare=False)
        return await cur.fetchall()


async def after(conn: Any, params: dict[str, Any]) -> list[Any]:
    cur = await conn.execute(query("search_indexed"), params)
    return await cur.fetchall()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5, help="passes over the query list")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.rows)
    url, data, indexed = await indexed_database("recall_bench_indexed_search", args.rows, rng)
    [large] = indexed
    queries = [
        {"user_id": u, "query": q, "max_distance": 2.0, "limit": 3, "candidates": EF_SEARCH}
        for u, q in queries_for(data, [large], args.queries, rng)
    ]
    old, new = await app_connection(url), await app_connection(url)
    times: dict[str, list[float]] = {"before": [], "after": []}
    try:
        statement = await statement_before(old, large)
        for round_ in range(args.rounds + 1):  # the first round warms up and is not counted
            for start in range(0, len(queries), BLOCK):
                block = queries[start : start + BLOCK]
                turn = (start // BLOCK + round_) % 2
                order = ("before", "after") if turn else ("after", "before")
                found: dict[str, list[Any]] = {}
                for label in order:
                    found[label] = []
                    for params in block:
                        t0 = time.perf_counter()
                        rows = (
                            await before(old, statement, params)
                            if label == "before"
                            else await after(new, params)
                        )
                        elapsed = (time.perf_counter() - t0) * 1000
                        found[label].append(rows)
                        if round_:
                            times[label].append(elapsed)
                if found["before"] != found["after"]:
                    raise SystemExit("the two ways returned different rows")
    finally:
        await old.close()
        await new.close()
    report(args, data.users[large], times)


def report(args: argparse.Namespace, size: int, times: dict[str, list[float]]) -> None:
    b50, b95 = pcts(times["before"])
    rows = []
    for label, how in (
        ("before", "scoped transaction, 7 round trips (until migration 0010)"),
        ("after", "recall.search_indexed, one call (migration 0010)"),
    ):
        p50, p95 = pcts(times[label])
        rows.append([how, f"{p50:.3f}", f"{p95:.3f}", f"{p50 / b50:.2f}", f"{p95 / b95:.2f}"])
    body = f"""## The indexed search as one call (migration 0010)

`python benchmarks/indexed_search.py --rows {args.rows} --queries {args.queries} --rounds
{args.rounds}` on {machine()}, commit {git_revision()}. Searches (limit 3, {EF_SEARCH}
candidates) of the one user of {size:,} memories, with its own HNSW index, among {args.rows:,}
memories (LoCoMo texts, clustered synthetic vectors); role recall_app, one connection per way,
the two ways alternating in blocks of {BLOCK}, {args.rounds} rounds after a warm-up round.
Both ways returned the same rows in the same order.

{table(["how", "p50 ms", "p95 ms", "p50 / before", "p95 / before"], rows)}
"""
    publish("indexed-search", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
