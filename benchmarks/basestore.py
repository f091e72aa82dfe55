"""RecallStore against LangGraph's AsyncPostgresStore, as BaseStores, in one run.

    python benchmarks/basestore.py [--items 100000] [--namespaces 1000] [--queries 5]
                                   [--large 20000,50000] [--large-queries 40]
                                   [--everywhere 100] [--rounds 3] [--keep]

The same --items items in --namespaces namespaces ("users", "u0000", "memories"), ... of
skewed sizes (lognormal: from 1 item to a few thousand), each value `{"text": "item-<j>-<i>",
"n": i}`, go into both stores, each on a database of its own, through `abatch` in batches of
2,000 puts. Vectors are precomputed (384 dimensions, clustered: 300 topics shared by every
namespace, 1 to 8 of them per namespace, plus noise); both stores get the same `embed`, which
looks each text's vector up, and the same IndexConfig (`dims` 384, `fields` ["text"]; the
peer's defaults otherwise: HNSW, cosine). Then --queries searches per namespace, each a
held-out vector near one of its topics: `asearch(namespace, query=..., limit=10)`, the prefix
being the whole namespace. Then one namespace of each --large size (--large-queries searches
each), and --everywhere searches of the prefix ("users",), which holds every namespace. A
warm-up pass, store by store (RecallStore's index builds, which searches set off, are waited
for and timed, then a second warm-up), then --rounds measured passes in
which the two stores take turns in blocks of 25 searches (the order turning each block), so
the ratios are measured at the same time, not minutes apart. recall@10 is against an exact
(numpy) cosine search of the namespace; a search is short when it returns fewer than
min(10, items in the namespace) items. Without --keep the two databases are dropped at the
end; with it they stay, and a run with the same --items and --namespaces reuses them.
Writes docs/benchmarks.md (section "basestore").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from harness.data import DIMS
from harness.db import drop_database, fresh_database, kept_database, settle
from harness.items import PREFIX, Items, Query, bucket, bucket_labels, make_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import BLOCK, Call, blocks, percentiles, timed, timed_interleaved
from langgraph.store.base import BaseStore, IndexConfig, PutOp
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from psycopg import sql

from recall import RecallStore
from recall.config import Settings
from recall.db.pool import connect_once

OURS, PEER = "RecallStore", "AsyncPostgresStore"
TABLES = {OURS: ("recall.store_items", "recall.store_vectors"), PEER: ("store", "store_vectors")}
BATCH = 2000  # puts per `abatch` when loading
K = 10


@dataclass
class Loaded:
    """A store's database: its URL, and the load's seconds (None: kept from a run before)."""

    url: str
    load_s: float | None


async def item_count(url: str, items_table: str) -> int:
    """The rows of `items_table` (-1 when there is no such table yet)."""
    conn = await connect_once(url)
    try:
        name = sql.Identifier(*items_table.split("."))
        cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name))
        row = await cur.fetchone()
        return int(row[0]) if row else -1
    except psycopg.errors.UndefinedTable:
        return -1
    finally:
        await conn.close()


def database_name(system: str, args: argparse.Namespace) -> str:
    """The database of one store's data at this size."""
    who = "recall" if system == OURS else "langgraph"
    large = "_".join(str(n) for n in args.large)
    return f"recall_bench_basestore_{who}_{args.items}_{args.namespaces}_{large}"


@asynccontextmanager
async def opened(system: str, url: str, items: Items) -> AsyncIterator[BaseStore]:
    """One store on `url`, with the shared `embed` (the precomputed vectors), open until the
    block ends."""
    if system == OURS:
        index: IndexConfig = {"dims": DIMS, "embed": items.embed, "fields": ["text"]}
        # the query cache off: the peer has none, and each search's embed call is timed
        settings = Settings(database_url=url, embedding_cache_ttl=0)
        async with RecallStore.connect(url, index=index, settings=settings) as ours:
            yield ours
    else:
        peer_index: PostgresIndexConfig = {"dims": DIMS, "embed": items.embed, "fields": ["text"]}
        async with AsyncPostgresStore.from_conn_string(url, index=peer_index) as peer:
            await peer.setup()
            yield peer


async def load(system: str, store: BaseStore, items: Items, url: str) -> float:
    """Every item through `abatch` in batches of BATCH puts, then the tables vacuumed, analyzed
    and checkpointed (before any timing); the load's seconds."""
    t0 = time.perf_counter()
    ops: list[PutOp] = []
    for op in items.puts():
        ops.append(op)
        if len(ops) >= BATCH:
            await store.abatch(ops)
            ops = []
    if ops:
        await store.abatch(ops)
    load_s = time.perf_counter() - t0
    await settle(url, *TABLES[system])
    return load_s


async def open_loaded(
    stack: AsyncExitStack, system: str, args: argparse.Namespace, items: Items
) -> tuple[BaseStore, Loaded]:
    """One store, open until `stack` closes, on a fresh database loaded with `items`, or (with
    --keep) on the database a run before loaded with the same items."""
    name = database_name(system, args)
    url, existed = (await kept_database(name)) if args.keep else ("", False)
    reuse = existed and await item_count(url, TABLES[system][0]) == int(items.sizes.sum())
    url = url if reuse else await fresh_database(name)
    store = await stack.enter_async_context(opened(system, url, items))
    load_s = None if reuse else await load(system, store, items, url)
    print(f"{system}: {'reused' if load_s is None else f'loaded in {load_s:.0f} s'}", flush=True)
    return store, Loaded(url, load_s)


def search_call(store: BaseStore, items: Items, q: Query) -> Call:
    """One search: the query's whole namespace as the prefix, its text (embedded by lookup),
    limit 10."""
    prefix = ("users",) if q.namespace == PREFIX else items.namespaces[q.namespace]
    return lambda: store.asearch(prefix, query=q.text, limit=K)


@dataclass
class Tally:
    """One store's searches of one size bucket: times (ms), recall@10 per search, short
    searches."""

    times: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    short: int = 0


def tally(
    items: Items, truth: list[set[tuple[tuple[str, ...], str]]], rounds: list[Any]
) -> dict[str, dict[str, Tally]]:
    """Per store, per size bucket ("all" included): every measured search's time, recall@10
    against the exact top min(10, size), and whether it came back short. Results count by
    namespace and key (every namespace has the same keys)."""
    out: dict[str, dict[str, Tally]] = {}
    for measured in rounds:
        for system, (times, found) in measured.items():
            by_bucket = out.setdefault(system, {})
            for q, ms, res, top in zip(items.queries, times, found, truth, strict=True):
                got = {(tuple(r.namespace), r.key) for r in res}
                for label in labels(items, q):
                    t = by_bucket.setdefault(label, Tally())
                    t.times.append(ms)
                    t.recall.append(len(got & top) / len(top))
                    t.short += len(res) < len(top)
    return out


def labels(items: Items, q: Query) -> list[str]:
    """The rows a search counts in: its size bucket (or the prefix over every namespace),
    the row of its --large namespace if it is one, and "all"."""
    if q.namespace == PREFIX:
        return [EVERYWHERE]
    size = int(items.sizes[q.namespace])
    large = [f"one namespace of {size:,}"] if q.namespace >= items.large_from else []
    return [bucket(size), *large, "all"]


EVERYWHERE = "prefix over every namespace"


def ratio(ours: Sequence[float], peer: Sequence[float], q: float) -> float:
    """Our `q` percentile over the peer's."""
    return percentiles(ours, [q])[0] / percentiles(peer, [q])[0]


def bucket_rows(items: Items, tallies: dict[str, dict[str, Tally]]) -> list[list[object]]:
    """One row per size bucket (smallest first), then every search."""
    rows: list[list[object]] = []
    large = [f"one namespace of {int(n):,}" for n in items.sizes[items.large_from :]]
    for label in [*bucket_labels(), *large, EVERYWHERE, "all"]:
        if label not in tallies[OURS]:
            continue
        ours, peer = tallies[OURS][label], tallies[PEER][label]
        if label == EVERYWHERE:
            sizes = [int(s) for s in items.sizes]
        elif label in large:
            sizes = [int(label.rsplit(" ", 1)[1].replace(",", ""))]
        else:
            sizes = [int(s) for s in items.sizes if label == "all" or bucket(int(s)) == label]
        o50, o95 = percentiles(ours.times, [50, 95])
        p50, p95 = percentiles(peer.times, [50, 95])
        rows.append([
            label, f"{len(sizes):,} ({sum(sizes):,} items)", f"{len(ours.times):,}",
            f"{np.mean(ours.recall):.4f} / {np.mean(peer.recall):.4f}",
            f"{ours.short:,} / {peer.short:,}",
            f"{o50:.2f} / {o95:.2f}", f"{p50:.2f} / {p95:.2f}",
            f"{o50 / p50:.3f}", f"{o95 / p95:.3f}",
        ])  # fmt: skip
    return rows


def round_rows(rounds: list[Any]) -> list[list[object]]:
    """Every search of each measured round: percentiles and ratios, then their medians."""
    rows: list[list[object]] = []
    values = []
    for n, measured in enumerate(rounds, 1):
        ours, peer = measured[OURS][0], measured[PEER][0]
        row = [*percentiles(ours, [50, 95]), *percentiles(peer, [50, 95])]
        row += [row[0] / row[2], row[1] / row[3]]
        values.append(row)
        rows.append([n, *(f"{v:.2f}" for v in row[:4]), *(f"{v:.3f}" for v in row[4:])])
    medians = np.median(np.array(values), axis=0)
    rows.append(["median", *(f"{v:.2f}" for v in medians[:4]), *(f"{v:.3f}" for v in medians[4:])])
    return rows


def verdict(tallies: dict[str, dict[str, Tally]]) -> str:
    """The issue's targets (p95 ours/peer per row, recall@10 at least 0.99, no short
    results), each met or missed, by this run's figures."""
    limits = {"1-9": 0.9, "10-99": 0.9, "100-999": 0.9}
    said = []
    for label, ours in tallies[OURS].items():
        if label == "all":
            continue
        p95 = ratio(ours.times, tallies[PEER][label].times, 95)
        limit = limits.get(label, 1.0)
        recall = float(np.mean(ours.recall))
        ok = p95 <= limit and recall >= 0.99 and ours.short == 0
        said.append(
            f"{label}: {'met' if ok else 'missed'} (p95 ours/peer {p95:.3f} <= {limit}, "
            f"recall@10 {recall:.4f} >= 0.99, short {ours.short})"
        )
    return "; ".join(said)


async def main() -> None:
    """Build the data, load (or reuse) both stores, time them in turns; print and write."""
    options = parser(__doc__)
    options.add_argument("--items", type=int, default=100_000)
    options.add_argument("--namespaces", type=int, default=1000)
    options.add_argument("--queries", type=int, default=5, help="searches per namespace")
    options.add_argument(
        "--large",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[20_000, 50_000],
        help="sizes of the extra large namespaces, comma-separated ('' for none)",
    )
    options.add_argument("--large-queries", type=int, default=40, help="per large namespace")
    options.add_argument("--everywhere", type=int, default=100, help='searches of ("users",)')
    options.add_argument("--rounds", type=int, default=3, help="measured passes (after a warm-up)")
    options.add_argument("--keep", action="store_true", help="keep the databases (and reuse them)")
    args = options.parse_args()
    if min(args.items, args.namespaces, args.queries, args.rounds) < 1:
        raise SystemExit("--items, --namespaces, --queries and --rounds must be at least 1")
    revision = git_revision()
    t0 = time.perf_counter()
    items = make_items(
        args.items,
        args.namespaces,
        args.queries,
        np.random.default_rng(args.items),
        large=args.large,
        per_large=args.large_queries,
        everywhere=args.everywhere,
    )
    truth = [
        set(items.exact_top_everywhere(q, K))
        if q.namespace == PREFIX
        else {(items.namespaces[q.namespace], key) for key in items.exact_top(q, K)}
        for q in items.queries
    ]
    print(f"data and exact answers: {time.perf_counter() - t0:.0f} s", flush=True)
    loaded: dict[str, Loaded] = {}
    try:
        async with AsyncExitStack() as stack:
            stores: dict[str, BaseStore] = {}
            for system in (OURS, PEER):
                stores[system], loaded[system] = await open_loaded(stack, system, args, items)
            calls = {system: [search_call(store, items, q) for q in items.queries]
                     for system, store in stores.items()}  # fmt: skip
            for system_calls in calls.values():  # warm-up: each store's first touch, in turn
                await timed(system_calls)
            ours = stores[OURS]
            assert isinstance(ours, RecallStore)
            t1 = time.perf_counter()
            await ours.wait_for_index_builds()  # what the warm-up's searches set off
            built_s = time.perf_counter() - t1
            print(f"{OURS}: index builds waited for {built_s:.0f} s", flush=True)
            for system_calls in calls.values():  # and again, every plan now settled
                await timed(system_calls)
            rounds = []
            for r in range(args.rounds):
                rounds.append(await timed_interleaved(calls, first_turn=r * blocks(len(truth))))
                print(f"round {r + 1} of {args.rounds} done", flush=True)
    finally:
        if not args.keep:
            for system in (OURS, PEER):
                await drop_database(database_name(system, args))
    report(args, revision, items, loaded, tally(items, truth, rounds), rounds, built_s)


def report(
    args: argparse.Namespace,
    revision: str,
    items: Items,
    loaded: dict[str, Loaded],
    tallies: dict[str, dict[str, Tally]],
    rounds: list[Any],
    built_s: float,
) -> None:
    """The tables: per size bucket, per round, the targets; printed and written."""

    def rate(system: str) -> str:
        load_s = loaded[system].load_s
        return "reused (--keep)" if load_s is None else f"{args.items / load_s:,.0f} items/s"

    sizes = items.sizes
    bucket_headers = [
        "items in namespace", "namespaces", "searches", "recall@10 ours / peer",
        "short ours / peer", "ours p50 / p95 ms", "peer p50 / p95 ms", "p50 ours/peer",
        "p95 ours/peer",
    ]  # fmt: skip
    round_headers = ["round", "ours p50 ms", "ours p95 ms", "peer p50 ms", "peer p95 ms",
                     "p50 ours/peer", "p95 ours/peer"]  # fmt: skip
    keep = " --keep" if args.keep else ""
    large = ",".join(str(n) for n in args.large)
    body = f"""## RecallStore and LangGraph's AsyncPostgresStore as BaseStores

`python benchmarks/basestore.py --items {args.items} --namespaces {args.namespaces} --queries
{args.queries} --large {large} --large-queries {args.large_queries} --everywhere
{args.everywhere} --rounds {args.rounds}{keep}` on {machine()}, commit {revision}.

Ours is `RecallStore`, the peer LangGraph's `AsyncPostgresStore` (its default index: HNSW,
cosine), each on a database of its own on the same server, both loaded through `abatch` with
the same {args.items:,} items in {args.namespaces:,} namespaces of skewed sizes (lognormal:
{sizes.min():,} to {sizes.max():,} items, median {int(np.median(sizes)):,}) and the same
precomputed 384-dimension vectors (clustered: topics shared by all namespaces), handed to both
by one `embed` that looks them up. {args.queries} searches per namespace (`asearch(namespace,
query=..., limit=10)`, a held-out vector near one of the namespace's topics), shuffled; after
a warm-up pass, store by store, {args.rounds} measured rounds in which the stores take turns in
blocks of {BLOCK} searches (the order turning each block). recall@10 is against an exact
(numpy) cosine search of the namespace; a search is short when it returns fewer than
min(10, items in the namespace). Then one namespace of each of {large or "no"} items
({args.large_queries} searches each) and {args.everywhere} searches of the prefix ("users",),
which holds every namespace (recall against the exact top 10 of all items). Loading: ours
{rate(OURS)}, the peer {rate(PEER)} (the peer builds its HNSW index as it loads). Ours builds
its indexes in the background when a search first meets a namespace of
`store_index_threshold` (1,000) vectors or more, or a prefix of `store_wide_threshold`
(10,000) or more: after the warm-up pass the run waited {built_s:.0f} s for those builds
(0 when they were kept from a run before), then warmed up again.

Per namespace size, over every measured search:

{table(bucket_headers, bucket_rows(items, tallies))}

Every search, round by round (the ratios of one round are measured at the same time):

{table(round_headers, round_rows(rounds))}

Targets: {verdict(tallies)}.
"""
    publish("basestore", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
