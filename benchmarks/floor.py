"""Where a typical user's search time goes, against the budget of issue 6's last target
(a database p95 5x lower than LangGraph's store at 100k rows), measured in one run.

    python benchmarks/floor.py [--rows 100000] [--queries 500]

The latency benchmark's database at --rows (its skewed users, LoCoMo texts, clustered synthetic
vectors, the large users' HNSW indexes), with LangGraph's AsyncPostgresStore loaded beside it
from the same memories and vectors. The latency benchmark's typical-user queries then go
through five measurements that take turns in blocks of 25 (the order turning each block):

- LangGraph: `AsyncPostgresStore.asearch`, limit 3;
- ours: `MemoryStore.search`, as the latency benchmark times it;
- raw call: the statement the store sends (`recall.search_exact`) on one psycopg connection as
  role recall_app: no pool, no input checks, no `Memory` objects;
- server only: that statement's execution time inside PostgreSQL (EXPLAIN ANALYZE with timing
  and buffers off): no network, no client;
- round trip: `SELECT 1` on that connection, the least a query costs the client.

Then, as the table owner and server side only, the exact search's scan of one user's rows
(distances, top 3; no row-level security, threshold or texts, planned per query) in three
forms, in turns on the same queries: as shipped (cosine distance over the heap rows); inner
product (`<#>`, which ranks unit vectors as cosine does); and an index-only scan of a covering
index (user_id) INCLUDE (id, embedding), built for the run on a copy of those three columns
and dropped after. The covering index is a best case: freshly built, every page all-visible,
no writes since. Every form must return the store's top 3 for every query.
Writes docs/benchmarks.md (section "floor").
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import git_revision, machine, publish, run, table
from latency import (
    BLOCK,
    indexed_database,
    langgraph_side,
    our_call,
    queries_for,
    timed,
    timed_interleaved,
)
from overheads import app_connection
from pgvector.psycopg import register_vector_async

from recall.config import Settings
from recall.db.pool import connect_once
from recall.db.sql import query
from recall.store import MemoryStore

EXPLAIN = b"EXPLAIN (ANALYZE, TIMING OFF, BUFFERS OFF, FORMAT JSON) "
SCAN = """SELECT b.id FROM (
    SELECT s.id, s.embedding {op} %(query)s AS distance
    FROM {relation} AS s WHERE s.user_id = %(user_id)s
    OFFSET 0
) AS b ORDER BY b.distance, b.id LIMIT 3"""
# label, distance operator, relation scanned
FORMS = [
    ("shipped scan: cosine, heap rows", "<=>", "recall.memories"),
    ("inner product, heap rows", "<#>", "recall.memories"),
    ("cosine, covering index (index-only scan)", "<=>", "recall.floor_vectors"),
]
BUCKETS = [(10, 99), (100, 499), (500, 1000)]
LANGGRAPH = "LangGraph asearch"
SERVER = "server only (EXPLAIN ANALYZE)"
ROUND_TRIP = "round trip (SELECT 1)"


def server_ms(plan: list[dict[str, Any]]) -> float:
    """The execution time of an EXPLAIN (ANALYZE, FORMAT JSON) result, in ms."""
    return float(plan[0]["Execution Time"])


def scan_node(node: dict[str, Any]) -> str:
    """The plan's leaf scan: its type and index, e.g. "Index Only Scan on some_idx"."""
    while node.get("Plans"):
        node = node["Plans"][0]
    return f"{node['Node Type']} on {node.get('Index Name', node.get('Relation Name', '?'))}"


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def explained(conn: Any, sql: bytes, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = await conn.execute(EXPLAIN + sql, params)
    row = await cur.fetchone()
    assert row is not None
    return list(row[0])


def explain_call(conn: Any, sql: bytes, params: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    """One EXPLAIN ANALYZE of `sql` with `params`, as a call to time."""
    return lambda: explained(conn, sql, params)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    revision = git_revision()
    rng = np.random.default_rng(args.rows)
    started = time.perf_counter()
    url, data, _indexed = await indexed_database("recall_bench_floor", args.rows, rng)
    typical = [u for u in data.users if not u.startswith("large")]
    qs = queries_for(data, typical, args.queries, rng)
    params = [
        {"user_id": u, "query": q, "max_distance": 1.0, "limit": 3} for u, q in qs
    ]  # the store's parameters for similarity_threshold=0, limit 3
    search = query("search_exact")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with AsyncExitStack() as stack:
        raw = await app_connection(url)
        stack.push_async_callback(raw.close)
        owner = await connect_once(url)
        stack.push_async_callback(owner.close)
        await register_vector_async(owner)
        store = await stack.enter_async_context(MemoryStore.connect(settings))
        side = await stack.enter_async_context(langgraph_side(url, data))

        def raw_call(pp: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
            async def call() -> Any:
                cur = await raw.execute(search, pp)
                return await cur.fetchall()

            return call

        async def round_trip() -> Any:
            return await (await raw.execute(b"SELECT 1")).fetchall()

        calls: dict[str, list[Callable[[], Awaitable[Any]]]] = {
            LANGGRAPH: side.calls("floor", qs),
            "ours: MemoryStore.search": [our_call(store, u, q) for u, q in qs],
            "raw call (one connection)": [raw_call(pp) for pp in params],
            SERVER: [explain_call(raw, search, pp) for pp in params],
            ROUND_TRIP: [round_trip for _ in qs],
        }
        for system_calls in calls.values():  # first touch of every user's pages
            await timed(system_calls)
        measured = await timed_interleaved(calls)
        ours_ids = [[m.id for m in res] for res in measured["ours: MemoryStore.search"][1]]
        raw_ids = [[str(r[0]) for r in res] for res in measured["raw call (one connection)"][1]]
        if ours_ids != raw_ids or not all(ours_ids):
            raise SystemExit("the raw call and the store disagree on a query's results")
        times = {name: ms for name, (ms, _) in measured.items()}
        times[SERVER] = [server_ms(plan) for plan in measured[SERVER][1]]
        forms = await scan_forms(owner, params, ours_ids)
        load_s = side.load_s
    report(args, revision, data.users, qs, times, forms, time.perf_counter() - started, load_s)


async def scan_forms(
    owner: Any, params: list[dict[str, Any]], expected: list[list[str]]
) -> dict[str, tuple[list[float], str]]:
    """Server-only times of the scan in each of FORMS, in turns, with the leaf scans the
    planner used (counted over all queries). Every form must return `expected`, the store's
    top 3, for every query (their first ones, where the store's stopped at similarity 0).

    The covering index goes on a copy of the memories' (user_id, id, embedding), so that the
    heap forms keep a plan of the memories' own indexes: on the memories table itself, the
    planner would take the new index for them too."""
    await owner.execute(
        "CREATE TABLE recall.floor_vectors AS SELECT user_id, id, embedding FROM recall.memories"
    )
    try:
        await owner.execute(
            "CREATE INDEX ON recall.floor_vectors (user_id) INCLUDE (id, embedding)"
        )
        await owner.execute("VACUUM (ANALYZE) recall.floor_vectors")  # all-visible, as settled
        await owner.execute("CHECKPOINT")  # the copy's pages written now, not during the timings
        calls: dict[str, list[Callable[[], Awaitable[Any]]]] = {}
        for label, op, relation in FORMS:
            sql = SCAN.format(op=op, relation=relation).encode()
            for pp, ids in zip(params, expected, strict=True):
                cur = await owner.execute(sql, pp)
                # the store's list stops at distance 1 (similarity 0); the scan has no threshold
                if [str(r[0]) for r in await cur.fetchall()][: len(ids)] != ids:
                    raise SystemExit(f"{label}: not the store's top 3 for {pp['user_id']}")
            calls[label] = [explain_call(owner, sql, pp) for pp in params]
        measured = await timed_interleaved(calls)
    finally:
        await owner.execute("DROP TABLE IF EXISTS recall.floor_vectors")
    return {
        label: ([server_ms(plan) for plan in plans], leaf_scans(plans))
        for label, (_ms, plans) in measured.items()
    }


def leaf_scans(plans: list[list[dict[str, Any]]]) -> str:
    """The leaf scans of EXPLAIN results, with how many queries used each."""
    used = Counter(scan_node(plan[0]["Plan"]) for plan in plans)
    return "; ".join(f"{scan} ({n})" for scan, n in used.most_common())


def report(
    args: argparse.Namespace,
    revision: str,
    sizes: dict[str, int],
    qs: list[tuple[str, np.ndarray]],
    times: dict[str, list[float]],
    forms: dict[str, tuple[list[float], str]],
    elapsed_s: float,
    load_s: float,
) -> None:
    theirs = p(times[LANGGRAPH], 95)
    rows: list[list[object]] = [
        [name, *(f"{p(ms, q):.3f}" for q in (50, 95, 99)),
         "-" if name == ROUND_TRIP else f"{theirs / p(ms, 95):.2f}x"]
        for name, ms in times.items()
    ]  # fmt: skip
    server = times[SERVER]
    by_size = []
    for low, high in BUCKETS:
        picked = [ms for ms, (u, _q) in zip(server, qs, strict=True) if low <= sizes[u] <= high]
        if picked:
            by_size.append(
                [f"{low}-{high}", len(picked), f"{p(picked, 50):.3f}", f"{p(picked, 95):.3f}"]
            )
    base50, base95 = p(forms[FORMS[0][0]][0], 50), p(forms[FORMS[0][0]][0], 95)
    form_rows: list[list[object]] = [
        [label, scans, f"{p(ms, 50):.3f}", f"{p(ms, 95):.3f}",
         f"{p(ms, 50) / base50:.2f} / {p(ms, 95) / base95:.2f}"]
        for label, (ms, scans) in forms.items()
    ]  # fmt: skip
    body = f"""## Where a typical user's search time goes (the 5x target's budget)

`python benchmarks/floor.py --rows {args.rows} --queries {args.queries}` on {machine()},
commit {revision}, {elapsed_s / 60:.0f} min ({load_s / 60:.0f} of them loading LangGraph's
store). The latency benchmark's {args.rows:,}-row database (clustered synthetic vectors) with
LangGraph's store beside it; {args.queries}
typical-user queries through each measurement, taking turns in blocks of {BLOCK}, after a
first pass that touches every user's pages. 5x LangGraph's p95 leaves **{theirs / 5:.3f} ms**
at p95 for ours.

{table(["measure", "p50 ms", "p95 ms", "p99 ms", "LangGraph p95 / this p95"], rows)}

Server-only time of the exact search by the user's number of memories:

{table(["memories", "queries", "p50 ms", "p95 ms"], by_size)}

The scan of one user's rows (distances and top 3 only: no row-level security, threshold or
texts; planned per query) in three forms, server only, as the table owner, in turns on the
same queries. Each returned the store's top 3 for every query. The covering index is a best
case: freshly built, all-visible, no writes since.

{table(["form", "leaf scans (queries)", "p50 ms", "p95 ms", "/ shipped (p50 / p95)"], form_rows)}
"""
    publish("floor", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
