"""Where a RecallStore search of a prefix over every namespace spends its time, part by part,
against LangGraph's AsyncPostgresStore, on real text, in one run (issue 38).

    python benchmarks/prefix_parts.py [--rounds 3] [--explain 20]

The stores of `benchmarks/basestore.py --data real --items 30000 --namespaces 300 --queries 3
--large 20000,50000 --large-queries 40 --everywhere 60` (100,000 items in 302 namespaces, the
namespaces of 3,055, 20,000 and 50,000 items with an index of their own, the rest in the index
over every namespace), kept between runs in the databases `basestore.py --keep` uses (loaded
here when missing, `harness.storeload`). After a warm-up and the builds it sets off, the 60
searches of the prefix ("users",) go through each variant, the variants in turns (blocks of
25), --rounds times:
- the peer's `asearch`;
- ours: `asearch` (each HNSW scan a statement of its own at its index's calibrated breadth,
  then the statement that merges their candidates), and `asearch` as before this change (one
  statement, every scan at the widest of the breadths);
- the search's statements alone on a connection of their own (`search_items`, the same two
  ways), each scan alone (its knob and its statement) at its own breadth and at the widest,
  and the merge statement alone (given the candidates).
Then EXPLAIN (ANALYZE, BUFFERS) of the one statement at the widest breadth, of each scan at its
own breadth and of the merge statement, for the first --explain questions: median execution
time and shared buffers. recall@10 is against the exact (numpy) answer over every item (ties at
the tenth score count). Writes docs/benchmarks.md (section "prefix-parts").
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import numpy as np
from harness.db import app_connection
from harness.items import PREFIX, Items, Query
from harness.realtext import question_vectors, real_items, turn_vectors
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.storeload import open_loaded, opened
from harness.storephases import OURS, PEER
from harness.storetables import exact_answer
from harness.timing import Call, percentiles, timed, timed_interleaved
from psycopg import AsyncConnection, sql

from recall import RecallStore
from recall.basestore.planning import IndexPlanner
from recall.db.filters import compile_filter
from recall.db.items import (
    IndexedStatements,
    SearchPlan,
    candidate_params,
    indexed_statements,
    search_items,
)
from recall.db.sql import run as run_sql

DIMS = 384
K = 10
SHAPE = {"items": 30_000, "namespaces": 300, "queries": 3, "large": [20_000, 50_000],
         "large_queries": 40, "everywhere": 60}  # fmt: skip


def plan_of(planner: IndexPlanner, q: Query, *, widest: bool) -> SearchPlan:
    """The plan `asearch` makes for `q` over ("users",) (`widest`: every scan at the widest
    breadth among them, as one statement scanned them before this change)."""
    through = planner.through("users", DIMS)
    if through != "every":
        raise SystemExit(
            f"the prefix is not searched through the index over every namespace: {through}"
        )
    ef_search = planner.breadth("users", DIMS, through)
    scans = planner.scans("users", DIMS)
    if widest:
        ef_search = max([ef_search, *(ef for _, ef in scans)])
        scans = tuple((ns, ef_search) for ns, _ in scans)
    return SearchPlan(prefix="users", filter=compile_filter(None), limit=K, offset=0,
                      mode="semantic", query=q.vector, dims=DIMS, through=through,
                      ef_search=ef_search, scans=scans)  # fmt: skip


def widened(store: RecallStore) -> None:
    """Make `store` search as before this change: its planner hands every scan the widest
    breadth, so the search runs one statement."""
    planner = store._planner
    breadth, scans = planner.breadth, planner.scans

    def widest(prefix: str, dims: int) -> int:
        return max([breadth(prefix, dims, "every"), *(ef for _, ef in scans(prefix, dims))])

    planner.breadth = lambda prefix, dims, through: (  # type: ignore[method-assign]
        widest(prefix, dims) if through == "every" else breadth(prefix, dims, through)
    )
    planner.scans = lambda prefix, dims: tuple(  # type: ignore[method-assign]
        (ns, widest(prefix, dims)) for ns, _ in scans(prefix, dims)
    )


def asearch_call(store: Any, q: Query) -> Call:
    """A store's whole `asearch` of ("users",)."""
    return lambda: store.asearch(("users",), query=q.text, limit=K)


def statement_call(conn: AsyncConnection[Any], plan: SearchPlan) -> Call:
    """The search's statements as `search_items` runs them."""
    return lambda: search_items(conn, plan)


def scan_call(conn: AsyncConnection[Any], statement: sql.Composed, params: dict[str, Any],
              ef: int) -> Call:  # fmt: skip
    """One scan alone: its knob and its statement, in one transaction."""

    async def call() -> list[Any]:
        async with conn.transaction(), conn.pipeline():
            await run_sql(conn, "store_search_knobs", {"ef_search": ef})
            cur = await conn.execute(statement, params, prepare=True)
        return await cur.fetchall()

    return call


def merge_call(conn: AsyncConnection[Any], stmts: IndexedStatements, near: list[Any]) -> Call:
    """The merge statement alone, given the scans' candidates."""
    params = {**stmts.params, **candidate_params(near)}

    async def call() -> list[Any]:
        cur = await conn.execute(stmts.merge, params, prepare=True)
        return await cur.fetchall()

    return call


async def explain(conn: AsyncConnection[Any], statement: sql.Composed, params: dict[str, Any],
                  ef: int) -> tuple[float, int]:  # fmt: skip
    """EXPLAIN (ANALYZE, BUFFERS) of `statement` after its knob: execution ms, shared hits
    plus reads."""
    async with conn.transaction():
        await run_sql(conn, "store_search_knobs", {"ef_search": ef})
        cur = await conn.execute(
            sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}").format(statement), params
        )
        row = await cur.fetchone()
    assert row is not None
    top = row[0][0]
    plan = top["Plan"]
    return float(top["Execution Time"]), int(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"])


def recall_of(rows: Sequence[Any], truth: tuple[set[tuple[Any, str]], int]) -> float:
    top, want = truth
    got = set()
    for r in rows:
        ns = tuple(r.namespace) if hasattr(r, "namespace") else tuple(r.ns.split("."))
        got.add((ns, r.key))
    return len(got & top) / want


async def main() -> None:
    """Open (or load) both stores, time the variants in turns, EXPLAIN the parts; print and
    write."""
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--explain", type=int, default=20)
    args = options.parse_args()
    revision = git_revision()
    shape = argparse.Namespace(**SHAPE, keep=True, data="real")
    rng = np.random.default_rng(shape.items)
    spare, (_texts, asked) = await turn_vectors(), question_vectors()
    items: Items
    items, _ = real_items(spare, asked, shape.items, shape.namespaces, shape.queries, rng,
                          large=shape.large, per_large=shape.large_queries,
                          everywhere=shape.everywhere)  # fmt: skip
    questions = [q for q in items.queries if q.namespace == PREFIX]
    truth = [exact_answer(items, q) for q in questions]
    async with AsyncExitStack() as stack:
        stores = {system: (await open_loaded(stack, system, shape, items))
                  for system in (OURS, PEER)}  # fmt: skip
        ours = stores[OURS][0]
        assert isinstance(ours, RecallStore)
        peer = stores[PEER][0]
        calls = {s: [asearch_call(stores[s][0], q) for q in questions] for s in (OURS, PEER)}
        for each in calls.values():
            await timed(each)
        await ours.wait_for_index_builds()
        await ours._planner.refresh_now()
        await ours.wait_for_index_builds()
        before = await stack.enter_async_context(opened(OURS, stores[OURS][1].url, items))
        assert isinstance(before, RecallStore)
        await before._planner.refresh_now()
        await timed([asearch_call(before, q) for q in questions])
        await before.wait_for_index_builds()  # its count of the prefix
        widened(before)
        planner = ours._planner
        new_plans = [plan_of(planner, q, widest=False) for q in questions]
        old_plans = [plan_of(planner, q, widest=True) for q in questions]
        breadths = {"(every namespace)": new_plans[0].ef_search} | dict(new_plans[0].scans)
        widest = old_plans[0].ef_search
        conns = [await app_connection(stores[OURS][1].url) for _ in range(4)]
        variants: dict[str, list[Call]] = {
            "peer: asearch": [asearch_call(peer, q) for q in questions],
            "ours: asearch, each scan at its own breadth": calls[OURS],
            f"ours: asearch, one statement at {widest} (before)":
                [asearch_call(before, q) for q in questions],
            "ours: statements, each scan at its own breadth":
                [statement_call(conns[0], p) for p in new_plans],
            f"ours: one statement, every scan at {widest} (before)":
                [statement_call(conns[1], p) for p in old_plans],
        }  # fmt: skip
        statements = [indexed_statements(p, DIMS) for p in new_plans]
        for i, (scan, _) in enumerate(statements[0].scans):
            name = scan.ns or "(every namespace)"
            for ef in sorted({scan.ef_search, widest}):
                variants[f"scan alone: {name}, ef_search {ef}"] = [
                    scan_call(conns[2], st.scans[i][1], st.params, ef) for st in statements
                ]
        nears = []
        for st in statements:
            near: list[Any] = []
            for scan, statement in st.scans:
                near += await scan_call(conns[3], statement, st.params, scan.ef_search)()
            nears.append(near)
        variants["merge statement alone (given the candidates)"] = [
            merge_call(conns[3], st, near) for st, near in zip(statements, nears, strict=True)
        ]
        await timed_interleaved(variants)  # warm-up
        rounds = [await timed_interleaved(variants, first_turn=r) for r in range(args.rounds)]
        explained: dict[str, list[tuple[float, int]]] = {}
        for p_old, st in list(zip(old_plans, statements, strict=True))[: args.explain]:
            old = indexed_statements(p_old, DIMS)
            key = f"one statement, every scan at {widest} (before)"
            explained.setdefault(key, []).append(
                await explain(conns[0], old.single, old.params, widest)
            )
            near = []
            for scan, statement in st.scans:
                key = f"scan: {scan.ns or '(every namespace)'}, ef_search {scan.ef_search}"
                explained.setdefault(key, []).append(
                    await explain(conns[0], statement, st.params, scan.ef_search)
                )
                near += await scan_call(conns[3], statement, st.params, scan.ef_search)()
            explained.setdefault("merge statement", []).append(
                await explain(conns[0], st.merge, {**st.params, **candidate_params(near)}, 40)
            )
        for conn in conns:
            await conn.close()
    report(args, revision, rounds, truth, breadths, explained)


def report(
    args: argparse.Namespace,
    revision: str,
    rounds: list[dict[str, tuple[list[float], list[Any]]]],
    truth: list[tuple[set[tuple[Any, str]], int]],
    breadths: dict[str, int],
    explained: dict[str, list[tuple[float, int]]],
) -> None:
    """The timing table (medians of the rounds' p50 / p95 and of their ratios to the peer's)
    and the EXPLAIN table."""
    rows = []
    for name in rounds[0]:
        p50s, p95s, r50, r95, recall = [], [], [], [], []
        for measured in rounds:
            times, results = measured[name]
            peer = percentiles(measured["peer: asearch"][0], (50, 95))
            p50, p95 = percentiles(times, (50, 95))
            p50s.append(p50)
            p95s.append(p95)
            r50.append(p50 / peer[0])
            r95.append(p95 / peer[1])
            if "asearch" in name or ("statement" in name and "merge" not in name):
                recall += [recall_of(r, t) for r, t in zip(results, truth, strict=True)]
        rows.append([
            name,
            f"{statistics.fmean(recall):.4f}" if recall else "",
            f"{statistics.median(p50s):.2f} / {statistics.median(p95s):.2f}",
            f"{statistics.median(r50):.3f}",
            f"{statistics.median(r95):.3f}",
        ])  # fmt: skip
    timing = table(["variant", "recall@10", "p50 / p95 ms", "p50 / peer", "p95 / peer"], rows)
    explain_rows = [
        [name, f"{statistics.median(ms for ms, _ in got):.2f}",
         f"{statistics.median(b for _, b in got):,.0f}"]
        for name, got in explained.items()
    ]  # fmt: skip
    explain_table = table(["statement", "execution ms (median)", "shared buffers (median)"],
                          explain_rows)  # fmt: skip
    listed = ", ".join(f"{ns} {ef}" for ns, ef in breadths.items())
    body = f"""## A RecallStore search of a prefix over every namespace, part by part (real text)

`python benchmarks/prefix_parts.py --rounds {args.rounds} --explain {args.explain}` on
{machine()}, commit {revision}.

The stores of `benchmarks/basestore.py --data real` (100,000 items, 302 namespaces), 60 searches
of ("users",), the variants in turns (blocks of 25), {args.rounds} rounds after a warm-up; times
are the medians of the rounds' p50 and p95, ratios the medians of the rounds' ratios to the
peer's `asearch`. Calibrated breadths: {listed}. "Before" runs every scan at the widest of
them in one statement, as the store did before this change.

{timing}

EXPLAIN (ANALYZE, BUFFERS), the first {len(next(iter(explained.values())))} questions, each
after its own `hnsw.ef_search`:

{explain_table}
"""
    publish("prefix-parts", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
