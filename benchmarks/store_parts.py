"""Where a RecallStore search of one large namespace spends its time, part by part, against
LangGraph's AsyncPostgresStore, on real text, in one run.

    python benchmarks/store_parts.py [--items 20000] [--rounds 3]

One namespace of --items bge-small vectors of LongMemEval user turns (`harness.realtext`) goes
into both stores (RecallStore builds and calibrates its index as the load ends; the peer keeps
its index during the load), then every one of LongMemEval's 195 questions is asked through
each variant, the variants taking turns in blocks of 25 (`harness.timing.timed_interleaved`),
--rounds times:
- the peer's `asearch` (its whole path);
- ours: `asearch` (the whole path); the indexed statement alone on a connection of its own,
  prepared as the store runs it (the namespace and dimension as constants), planned per call
  as before issue 38 (`prepare=False`), and prepared without the exact probe of the
  namespace's children; the bare HNSW scan (`ORDER BY ... LIMIT 10`) at the calibrated breadth
  and at the breadth decision 0023's rule gave an index of this size; the bare scan of a halfvec
  index built beside the store's (issue 38's quantised form, not shipped) at the calibrated
  breadth.
recall@10 is against the exact (numpy) answer. Writes docs/benchmarks.md (section
"store-parts").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from harness.db import app_connection, drop_database, fresh_database, settle
from harness.realtext import question_vectors, turn_vectors
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import Call, percentiles, timed_interleaved
from langgraph.store.base import IndexConfig, PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from psycopg import AsyncConnection, sql

from recall import RecallStore
from recall.basestore.planning import MAX_BREADTH, MIN_BREADTH, VECTORS_PER_EF
from recall.config import Settings
from recall.db.pool import connect_once
from recall.db.sql import query
from recall.db.sql import run as run_sql

NS = ("kb", "notes")
DIMS = 384
K = 10
BATCH = 2000
PEER = "peer: asearch"
OURS = "ours: asearch"


def indexed_statement(dims: int, *, literal: bool, children: bool) -> sql.Composed:
    """`store_search_indexed` as the store composes it (`literal`: the namespace, its
    children's range and the dimension as constants; `children`: with the exact probe of the
    namespace's children)."""
    near = (
        sql.SQL("v.ns = {}").format(sql.Literal(".".join(NS)))
        if literal
        else sql.SQL("v.ns = %(ns)s")
    )
    ns = ".".join(NS)
    rest: sql.Composable = sql.SQL("FALSE")
    if children and literal:
        rest = sql.SQL("(v.ns >= {} AND v.ns < {})").format(
            sql.Literal(ns + "."), sql.Literal(ns + "/")
        )
    elif children:
        rest = sql.SQL("(v.ns >= %(ns_lo)s AND v.ns < %(ns_hi)s)")
    dimension = sql.Literal(dims) if literal else sql.SQL("%(dims)s")
    scan = sql.SQL(query("store_search_indexed_scan").decode()).format(
        near=near,
        part=sql.Literal(0),
        filter=sql.SQL("TRUE"),
        vtype=sql.SQL("vector({})").format(sql.Literal(dims)),
        dims=dimension,
    )
    return sql.SQL(query("store_search_indexed").decode()).format(
        scans=scan, rest=rest, filter=sql.SQL("TRUE"), dims=dimension
    )


def statement_call(
    conn: AsyncConnection[Any], statement: sql.Composed, vector: np.ndarray, ef: int, prepare: bool
) -> Call:
    """The knobs and one indexed statement, in one transaction, as `search_items` runs them."""
    ns = ".".join(NS)
    params = {"ns": ns, "ns_lo": ns + ".", "ns_hi": ns + "/", "query": vector, "dims": DIMS,
              "candidates": 40, "limit": K, "offset": 0}  # fmt: skip

    async def call() -> list[str]:
        async with conn.transaction(), conn.pipeline():
            await run_sql(conn, "store_search_knobs", {"ef_search": ef})
            cur = await conn.execute(statement, params, prepare=prepare)
        return [str(row[1]) for row in await cur.fetchall()]

    return call


def search_call(store: Any, text: str) -> Call:
    """A store's whole `asearch` of the namespace."""
    return lambda: store.asearch(NS, query=text, limit=K)


def scan_call(
    conn: AsyncConnection[Any], vector: np.ndarray, ef: int, vtype: str = "vector"
) -> Call:
    """The bare HNSW scan of the namespace's index (`vtype` "halfvec": of the halfvec index
    built beside it, the query cast to halfvec), `ef` wide."""
    statement = sql.SQL(
        "SELECT key FROM recall.store_vectors WHERE ns = {} AND dims = {} "
        "ORDER BY embedding::{}({}) <=> %(q)s::vector({})::{}({}) LIMIT {}"
    ).format(
        sql.Literal(".".join(NS)),
        sql.Literal(DIMS),
        sql.SQL(vtype),
        sql.Literal(DIMS),
        sql.Literal(DIMS),
        sql.SQL(vtype),
        *(sql.Literal(v) for v in (DIMS, K)),
    )

    async def call() -> list[str]:
        async with conn.transaction():
            await run_sql(conn, "store_search_knobs", {"ef_search": ef})
            cur = await conn.execute(statement, {"q": vector})
        return [str(row[0]) for row in await cur.fetchall()]

    return call


async def build_halfvec(url: str) -> float:
    """A halfvec HNSW index (`m`, `ef_construction` as the store's) over the namespace beside
    its own, for the bare halfvec scan (issue 38, move 3: not shipped); its build's seconds."""
    settings = Settings()
    conn = await connect_once(url)
    try:
        t0 = time.perf_counter()
        await conn.execute(
            sql.SQL(
                "CREATE INDEX store_parts_halfvec ON recall.store_vectors USING hnsw "
                "((embedding::halfvec({})) halfvec_cosine_ops) WITH (m = {}, ef_construction = {}) "
                "WHERE ns = {} AND dims = {}"
            ).format(
                sql.Literal(DIMS),
                sql.Literal(settings.hnsw_m),
                sql.Literal(settings.hnsw_ef_construction),
                sql.Literal(".".join(NS)),
                sql.Literal(DIMS),
            )
        )
        await conn.execute("ANALYZE recall.store_vectors")
        return time.perf_counter() - t0
    finally:
        await conn.close()


async def main() -> None:
    """Load both stores, time the variants in turns; print and write."""
    options = parser(__doc__)
    options.add_argument("--items", type=int, default=20_000)
    options.add_argument("--rounds", type=int, default=3)
    args = options.parse_args()
    revision = git_revision()
    pool, (_texts, asked) = await turn_vectors(), question_vectors()
    rng = np.random.default_rng(args.items)
    rows = pool[rng.choice(len(pool), size=min(args.items, len(pool)), replace=False)]
    table_of = {f"t{i}": v for i, v in enumerate(rows)} | {f"q{i}": v for i, v in enumerate(asked)}

    async def embed(texts: Sequence[str]) -> list[list[float]]:
        return [table_of[t].tolist() for t in texts]

    sims = asked @ rows.T
    truth = [set(np.argsort(-s)[:K].tolist()) for s in sims]
    urls = {
        who: await fresh_database(f"recall_bench_store_parts_{who}") for who in ("ours", "peer")
    }
    ops = [PutOp(NS, f"k{i:05d}", {"text": f"t{i}"}) for i in range(len(rows))]
    settings = Settings(database_url=urls["ours"], embedding_cache_ttl=0)
    ours_index: IndexConfig = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    peer_index: PostgresIndexConfig = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    try:
        async with (
            RecallStore.connect(urls["ours"], index=ours_index, settings=settings) as ours,
            AsyncPostgresStore.from_conn_string(urls["peer"], index=peer_index) as peer,
        ):
            await peer.setup()
            for store in (peer, ours):
                for start in range(0, len(ops), BATCH):
                    await store.abatch(ops[start : start + BATCH])
            t0 = time.perf_counter()
            await ours.wait_for_index_builds()
            await ours._planner.refresh_now()
            await ours.wait_for_index_builds()  # a calibration the growth called for
            waited = time.perf_counter() - t0
            await settle(urls["ours"], "recall.store_items", "recall.store_vectors")
            await settle(urls["peer"], "public.store", "public.store_vectors")
            await ours._planner.refresh_now()
            ns = ".".join(NS)
            calibrated = ours._planner.breadth(ns, DIMS, "namespace")
            rule = min(MAX_BREADTH, max(MIN_BREADTH, -(-len(rows) // VECTORS_PER_EF)))
            conns = [await app_connection(urls["ours"]) for _ in range(5)]
            variants: dict[str, list[Call]] = {
                PEER: [search_call(peer, f"q{i}") for i in range(len(asked))],
                OURS: [search_call(ours, f"q{i}") for i in range(len(asked))],
            }
            shapes = {
                "ours: statement, prepared per index": (conns[0], True, True, True),
                "ours: statement, planned per call (before)": (conns[1], False, True, False),
                "ours: statement, prepared, no children probe": (conns[2], True, False, True),
            }
            for name, (conn, literal, children, prepare) in shapes.items():
                statement = indexed_statement(DIMS, literal=literal, children=children)
                variants[name] = [statement_call(conn, statement, q, calibrated, prepare)
                                  for q in asked]  # fmt: skip
            variants[f"bare HNSW scan, ef_search {calibrated} (calibrated)"] = [
                scan_call(conns[3], q, calibrated) for q in asked
            ]
            variants[f"bare HNSW scan, ef_search {rule} (decision 0023's rule)"] = [
                scan_call(conns[4], q, rule) for q in asked
            ]
            half_s = await build_halfvec(urls["ours"])
            conns.append(await app_connection(urls["ours"]))
            variants[f"bare halfvec HNSW scan, ef_search {calibrated} (not shipped)"] = [
                scan_call(conns[5], q, calibrated, "halfvec") for q in asked
            ]
            await timed_interleaved(variants)  # warm-up
            rounds = [await timed_interleaved(variants, first_turn=r) for r in range(args.rounds)]
            for conn in conns:
                await conn.close()
    finally:
        for who in ("ours", "peer"):
            await drop_database(f"recall_bench_store_parts_{who}")
    report(args, revision, rounds, truth, waited, calibrated, half_s)


def _keys(result: Any) -> set[int]:
    keys = [r.key if hasattr(r, "key") else r for r in result]
    return {int(str(k)[1:]) for k in keys}


def report(
    args: argparse.Namespace,
    revision: str,
    rounds: list[dict[str, tuple[list[float], list[Any]]]],
    truth: list[set[int]],
    waited: float,
    calibrated: int,
    half_s: float,
) -> None:
    """One row per variant: recall@10, p50 / p95 and their ratios to the peer's, medians of
    the rounds' ratios."""
    rows = []
    for name in rounds[0]:
        p50s, p95s, ratios50, ratios95, recall = [], [], [], [], []
        for measured in rounds:
            times, results = measured[name]
            peer50, peer95 = percentiles(measured[PEER][0], [50, 95])
            p50, p95 = percentiles(times, [50, 95])
            p50s.append(p50)
            p95s.append(p95)
            ratios50.append(p50 / peer50)
            ratios95.append(p95 / peer95)
            recall += [len(_keys(r) & t) / K for r, t in zip(results, truth, strict=True)]
        rows.append([
            name, f"{np.mean(recall):.4f}", f"{np.median(p50s):.2f} / {np.median(p95s):.2f}",
            f"{np.median(ratios50):.3f}", f"{np.median(ratios95):.3f}",
        ])  # fmt: skip
    headers = ["variant", "recall@10", "p50 / p95 ms", "p50 / peer", "p95 / peer"]
    body = f"""## A RecallStore search of one large namespace, part by part (real text)

`python benchmarks/store_parts.py --items {args.items} --rounds {args.rounds}` on {machine()},
commit {revision}.

One namespace of {args.items:,} bge-small vectors of LongMemEval user turns in RecallStore
and in LangGraph's AsyncPostgresStore, 195 LongMemEval questions through each variant, the
variants in turns (blocks of 25), {args.rounds} rounds after a warm-up; times are the medians of
the rounds' p50 and p95, ratios the medians of the rounds' ratios to the peer's `asearch`.
Our index was built during the load and calibrated ({waited:.0f} s waited after the load):
ef_search {calibrated}. The statement rows run `store_search_indexed` with its knobs in one
transaction on a connection of their own; the bare scan is the index's scan alone (its ten
nearest, no re-check); the halfvec index was built after the timing's load, in {half_s:.1f} s.

{table(headers, rows)}
"""
    publish("store-parts", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
