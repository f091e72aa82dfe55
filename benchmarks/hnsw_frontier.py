"""What an HNSW scan costs at recall@10 >= 0.99 on basestore.py's large namespaces, against
the peer's own index scan, in one run.

    python benchmarks/hnsw_frontier.py [--builds 16:200,32:400] [--efs 40,100,200,400,1000]
                                       [--rounds 2]

The same data as `benchmarks/basestore.py` (its defaults: 100,000 items in 1,000 namespaces,
one namespace of 20,000 and one of 50,000, 40 queries each, 100 queries of every namespace),
as bare vectors: one table, no store around it. Two copies of the table:
- the peer's shape (LangGraph's AsyncPostgresStore): one HNSW index over every vector with
  pgvector's defaults (m 16, ef_construction 64), searched with its default ef_search (40) and
  the namespace filtered afterwards (`WHERE ns = ... ORDER BY distance LIMIT 21`: its
  statement's vector part);
- ours: each large namespace's own partial HNSW index and one over every vector (the plans of
  `RecallStore`, decision 0023), built with each --builds `m:ef_construction`, searched with
  each --efs ef_search (`LIMIT 10`, the index's order).
Each build is timed, and so is a put into the namespace of 50,000 (200 single-row inserts into
its index and the one over every vector, against the peer's into its one index, in turns).
For each build, the peer's scan and each ef_search take turns in blocks of 25 queries
(`harness.timing.timed_interleaved`), --rounds times, so each ratio is measured at the same time.
recall@10 is against the exact (numpy) top 10. The row that matters per build is the cheapest
ef_search reaching 0.99: its time over the peer's scan is a floor for `RecallStore`'s ratio in
basestore.py, since the store does all of this scan and more (the exact re-check, the items'
join, its Python), while the peer's scan is part of what the peer does.
Writes docs/benchmarks.md (section "hnsw-frontier").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from harness.db import drop_database, fresh_database
from harness.items import PREFIX, Items, Query, make_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import Call, percentiles, timed_interleaved
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, sql

from recall.db.pool import connect_once

DATABASE = "recall_bench_hnsw_frontier"
PEER = "peer: one index, ef_search 40, filter after"
K = 10
PEER_LIMIT = 2 * K + 1  # the peer's expanded_limit for one vector per item


def build_pairs(text: str) -> list[tuple[int, int]]:
    """`m:ef_construction` pairs, comma-separated."""
    pairs = []
    for part in text.split(","):
        m, efc = part.split(":")
        pairs.append((int(m), int(efc)))
    return pairs


async def load(conn: AsyncConnection[Any], items: Items) -> None:
    """Both tables: (namespace number, row, vector) for every item."""
    for name in ("ours", "peer"):
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {} (ns int NOT NULL, id int NOT NULL, embedding vector(384))"
            ).format(sql.Identifier(name))
        )
        copy_sql = sql.SQL("COPY {} (ns, id, embedding) FROM STDIN WITH (FORMAT BINARY)")
        async with conn.cursor() as cur, cur.copy(copy_sql.format(sql.Identifier(name))) as copy:
            copy.set_types(["int4", "int4", "vector"])
            for j in range(len(items.namespaces)):
                for i, vector in enumerate(items.rows(j)):
                    await copy.write_row((j, i, vector.astype(np.float32)))
        await conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(name)))


async def build(conn: AsyncConnection[Any], where: int | None, m: int, efc: int) -> float:
    """Our HNSW index of namespace `where` (None: every vector); its build's seconds."""
    name = f"ours_{'all' if where is None else where}"
    predicate = sql.SQL("") if where is None else sql.SQL(" WHERE ns = {}").format(where)
    t0 = time.perf_counter()
    await conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
    await conn.execute(
        sql.SQL(
            "CREATE INDEX {} ON ours USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = {}, ef_construction = {}){}"
        ).format(sql.Identifier(name), m, efc, predicate)
    )
    return time.perf_counter() - t0


def searches(
    conn: AsyncConnection[Any], table_name: str, queries: Sequence[Query], ef: int, limit: int
) -> list[Call]:
    """One call per query: the nearest `limit` (namespace, row) under its namespace (or every
    namespace), through `table_name`'s index scanning `ef` wide."""
    calls: list[Call] = []
    for q in queries:
        where = (
            sql.SQL("") if q.namespace == PREFIX else sql.SQL("WHERE ns = {}").format(q.namespace)
        )
        statement = sql.SQL(
            "SELECT ns, id FROM {} {} ORDER BY embedding <=> %(q)s::vector(384) LIMIT {}"
        ).format(sql.Identifier(table_name), where, limit)

        async def call(statement: sql.Composed = statement, vector: Any = q.vector) -> Any:
            async with conn.transaction():
                await conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
                cur = await conn.execute(statement, {"q": vector.astype(np.float32)})
                return await cur.fetchall()

        calls.append(call)
    return calls


def writes(conn: AsyncConnection[Any], table_name: str, ns: int, count: int) -> list[Call]:
    """`count` single-row inserts into namespace `ns` of `table_name` (each its own statement,
    autocommit), of new vectors: what a put into a large namespace costs the indexes."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    statement = sql.SQL("INSERT INTO {} (ns, id, embedding) VALUES (%s, %s, %s)").format(
        sql.Identifier(table_name)
    )
    calls: list[Call] = []
    for i, vector in enumerate(vectors):

        async def call(i: int = i, vector: Any = vector) -> None:
            await conn.execute(statement, (ns, -1 - i, vector))

        calls.append(call)
    return calls


def recall_at_k(items: Items, queries: Sequence[Query], found: Sequence[Any]) -> float:
    """Mean recall@10 of the first 10 rows found against the exact top 10."""
    scores = []
    for q, rows in zip(queries, found, strict=True):
        if q.namespace == PREFIX:
            top = items.exact_top_everywhere(q, K)
            truth = {(items.namespaces.index(ns), key) for ns, key in top}
        else:
            truth = {(q.namespace, key) for key in items.exact_top(q, K)}
        got = {(int(ns), f"k{int(i):05d}") for ns, i in rows[:K]}
        scores.append(len(got & truth) / K)
    return float(np.mean(scores))


async def main() -> None:
    """Build the data and the two tables, then build by build: index, sweep, print."""
    options = parser(__doc__)
    options.add_argument("--builds", type=build_pairs, default=build_pairs("16:200,32:400"))
    options.add_argument(
        "--efs", type=lambda t: [int(x) for x in t.split(",")], default=[40, 100, 200, 400, 1000]
    )
    options.add_argument("--rounds", type=int, default=2)
    args = options.parse_args()
    revision = git_revision()
    items = make_items(
        100_000, 1000, 5, np.random.default_rng(100_000),
        large=[20_000, 50_000], per_large=40, everywhere=100,
    )  # fmt: skip
    groups = {
        f"one namespace of {int(items.sizes[j]):,}": [q for q in items.queries if q.namespace == j]
        for j in range(items.large_from, len(items.namespaces))
    }
    groups[f"prefix over every namespace ({int(items.sizes.sum()):,})"] = [
        q for q in items.queries if q.namespace == PREFIX
    ]
    url = await fresh_database(DATABASE)
    rows: list[list[object]] = []
    builds: list[list[object]] = []
    conn = await connect_once(url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await register_vector_async(conn)
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await load(conn, items)
        t0 = time.perf_counter()
        await conn.execute("CREATE INDEX peer_all ON peer USING hnsw (embedding vector_cosine_ops)")
        peer_build = time.perf_counter() - t0
        print(f"peer's index: {peer_build:.0f} s", flush=True)
        for m, efc in args.builds:
            built: dict[int | None, float] = {
                j: await build(conn, j, m, efc)
                for j in range(items.large_from, len(items.namespaces))
            }
            built[None] = await build(conn, None, m, efc)
            print(f"m {m}, ef_construction {efc}: built in {sum(built.values()):.0f} s", flush=True)
            # a put into the largest namespace: its own index and the one over every vector,
            # against the peer's one index, in turns; the rows are deleted after
            largest = len(items.namespaces) - 1
            put = await timed_interleaved(
                {name: writes(conn, name, largest, WRITES) for name in ("ours", "peer")}
            )
            for name in ("ours", "peer"):
                delete = sql.SQL("DELETE FROM {} WHERE id < 0")
                await conn.execute(delete.format(sql.Identifier(name)))
            ours50, ours95 = percentiles(put["ours"][0], (50, 95))
            peer50, peer95 = percentiles(put["peer"][0], (50, 95))
            builds.append([
                f"{m} / {efc}", f"{built[largest]:.0f}", f"{built[None]:.0f}",
                f"{ours50:.2f} / {ours95:.2f}", f"{peer50:.2f} / {peer95:.2f}",
                f"{ours50 / peer50:.2f}",
            ])  # fmt: skip
            print(table(BUILD_HEADERS, builds[-1:]), flush=True)
            for label, queries in groups.items():
                calls = {PEER: searches(conn, "peer", queries, 40, PEER_LIMIT)}
                for ef in args.efs:
                    calls[f"ef_search {ef}"] = searches(conn, "ours", queries, ef, K)
                times: dict[str, list[float]] = {name: [] for name in calls}
                found: dict[str, list[Any]] = {}
                for r in range(args.rounds):
                    out = await timed_interleaved(calls, first_turn=r)
                    for name, (ms, res) in out.items():
                        times[name].extend(ms)
                        found[name] = res
                peer_p50, peer_p95 = percentiles(times[PEER], (50, 95))
                peer_recall = recall_at_k(items, queries, found[PEER])
                reached = False
                for name in calls:
                    if name == PEER:
                        continue
                    p50, p95 = percentiles(times[name], (50, 95))
                    rec = recall_at_k(items, queries, found[name])
                    first = rec >= 0.99 and not reached
                    reached = reached or rec >= 0.99
                    rows.append([
                        label, f"{m} / {efc}", name, f"{rec:.4f}", f"{p50:.2f} / {p95:.2f}",
                        f"{peer_recall:.4f}", f"{peer_p50:.2f} / {peer_p95:.2f}",
                        f"{p50 / peer_p50:.2f}",
                        f"{p95 / peer_p95:.2f}" + (" (cheapest at 0.99)" if first else ""),
                    ])  # fmt: skip
                print(table(HEADERS, rows[-len(args.efs) :]), flush=True)
    finally:
        await conn.close()
        await drop_database(DATABASE)
    report(args, revision, rows, builds, peer_build)


WRITES = 200  # single-row inserts timed per build
BUILD_HEADERS = [
    "m / ef_construction", "build of the 50,000's index s", "build over every vector s",
    "insert ours p50 / p95 ms", "insert peer p50 / p95 ms", "p50 ours/peer",
]  # fmt: skip
HEADERS = [
    "searched", "m / ef_construction", "our scan", "recall@10 ours", "ours p50 / p95 ms",
    "recall@10 peer", "peer p50 / p95 ms", "p50 ours/peer", "p95 ours/peer",
]  # fmt: skip


def report(
    args: argparse.Namespace,
    revision: str,
    rows: list[list[object]],
    builds: list[list[object]],
    peer_build: float,
) -> None:
    """The section for docs/benchmarks.md."""
    body = f"""## The HNSW frontier on basestore.py's large namespaces

`python benchmarks/hnsw_frontier.py --builds {",".join(f"{m}:{e}" for m, e in args.builds)}
--efs {",".join(map(str, args.efs))} --rounds {args.rounds}` on {machine()}, commit {revision}.

The vectors of `benchmarks/basestore.py` (its defaults), bare: no store, one table per side.
The peer's shape is one HNSW index over every vector (pgvector's defaults, built in
{peer_build:.0f} s) scanned 40 wide with the namespace filtered afterwards, `LIMIT 21`; ours
is a partial index per large namespace and one over every vector, scanned `ef_search` wide,
`LIMIT 10`. Each row's ratio is measured in turns with the peer's scan, in the same run. The
cheapest `ef_search` at recall@10 >= 0.99 is a floor for `RecallStore`'s p95 ratio in the
"basestore" section: the store runs this scan and more, the peer this scan and more.

{table(HEADERS, rows)}

What each build costs: its time, and a put into the namespace of 50,000 ({WRITES} single-row
inserts of new vectors, each its own statement, into its own index and the one over every
vector; the peer's into its one index), in turns:

{table(BUILD_HEADERS, builds)}
"""
    publish("hnsw-frontier", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
