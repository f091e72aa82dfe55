"""RecallStore against LangGraph's AsyncPostgresStore, as BaseStores, in one run.

    python benchmarks/basestore.py [--data synthetic|real] [--items 100000]
                                   [--namespaces 1000] [--queries 5]
                                   [--large 20000,50000] [--large-queries 40]
                                   [--everywhere 100] [--rounds 3] [--puts 200]
                                   [--cold 0] [--cold-seconds 120] [--keep]

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
for and timed; then its searches again until each index has had its first 200 questions checked
in the background; then a second warm-up), then --rounds measured passes in
which the two stores take turns in blocks of 25 searches (the order turning each block), so
the ratios are measured at the same time, not minutes apart. recall@10 is against an exact
(numpy) cosine search of the namespace; a search is short when it returns fewer than
min(10, items in the namespace) items. Without --keep the two databases are dropped at the
end; with it they stay, and a run with the same --items and --namespaces reuses them.

`--data real` (the targets of issue 38) puts real text in the same shape: each namespace holds
bge-small vectors of LongMemEval user turns (with their replies), and the searches are
LongMemEval's real questions (`harness.realtext`: the turn vectors come from
.recall/longmemeval-vectors.npz, or are embedded first, about an hour on 2 cores, so CI never
runs this). recall@10 counts ties at the tenth score (namespaces share turns) as hits. Then
(`harness.storephases`) --puts single puts into the largest namespace, in turns, with and
without RecallStore's index over every namespace, and, with --cold N, a fresh namespace of N
items bulk-loaded into each store (the peer's first) and searched in turns for --cold-seconds
right after: the cold window.
Writes docs/benchmarks.md (section "basestore", or "basestore-real" for real text).
"""

from __future__ import annotations

import argparse
import time
from contextlib import AsyncExitStack
from typing import Any

import numpy as np
from harness.db import drop_database
from harness.items import PREFIX, Items, Query, make_items
from harness.realtext import question_vectors, real_items, turn_vectors
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.storeload import Loaded, database_name, open_loaded
from harness.storephases import OURS, PEER, ColdWindow, PutCosts, cold_window, put_costs
from harness.storetables import (
    Extra,
    Tally,
    bucket_rows,
    exact_answer,
    phase_tables,
    round_rows,
    tally,
    verdict,
)
from harness.timing import BLOCK, Call, blocks, timed, timed_interleaved
from langgraph.store.base import BaseStore

from recall import RecallStore
from recall.basestore.questions import FIRST_QUESTIONS

K = 10


def search_call(store: BaseStore, items: Items, q: Query) -> Call:
    """One search: the query's whole namespace as the prefix, its text (embedded by lookup),
    limit 10."""
    prefix = ("users",) if q.namespace == PREFIX else items.namespaces[q.namespace]
    return lambda: store.asearch(prefix, query=q.text, limit=K)


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
    options.add_argument(
        "--data", choices=("synthetic", "real"), default="synthetic",
        help="clustered noise (the stress case) or bge-small vectors of real turns and questions",
    )  # fmt: skip
    options.add_argument("--puts", type=int, default=200, help="puts into the largest namespace")
    options.add_argument("--cold", type=int, default=0, help="items of the cold-window load")
    options.add_argument("--cold-seconds", type=float, default=120.0)
    args = options.parse_args()
    if min(args.items, args.namespaces, args.queries, args.rounds) < 1:
        raise SystemExit("--items, --namespaces, --queries and --rounds must be at least 1")
    revision = git_revision()
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.items)
    shape = {"large": args.large, "per_large": args.large_queries, "everywhere": args.everywhere}
    midpoints = 0
    if args.data == "real":
        spare, (texts, asked) = await turn_vectors(), question_vectors()
        items, midpoints = real_items(
            spare, asked, args.items, args.namespaces, args.queries, rng, **shape
        )
    else:
        items = make_items(args.items, args.namespaces, args.queries, rng, **shape)
        spare, texts, asked = items.vectors, [], items.vectors[:0]
    truth = [exact_answer(items, q) for q in items.queries]
    print(f"data and exact answers: {time.perf_counter() - t0:.0f} s", flush=True)
    loaded: dict[str, Loaded] = {}
    puts: list[PutCosts] = []
    cold: ColdWindow | None = None
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
            asked_s = await first_questions(ours, calls[OURS])
            print(f"{OURS}: first questions checked in {asked_s:.0f} s", flush=True)
            for system_calls in calls.values():  # and again, every plan now settled
                await timed(system_calls)
            rounds = []
            for r in range(args.rounds):
                rounds.append(await timed_interleaved(calls, first_turn=r * blocks(len(truth))))
                print(f"round {r + 1} of {args.rounds} done", flush=True)
            if args.puts:
                largest = items.namespaces[int(np.argmax(items.sizes))]
                urls = {system: loaded[system].url for system in (OURS, PEER)}
                puts = await put_costs(stores, urls, items, largest, spare, args.puts, rng)
            if args.cold:
                cold = await cold_window(
                    stores, items, spare, asked, args.cold, args.cold_seconds, rng
                )
    finally:
        if not args.keep:
            for system in (OURS, PEER):
                await drop_database(database_name(system, args))
    extra = Extra(midpoints, len(texts), puts, cold)
    report(args, revision, items, loaded, tally(items, truth, rounds), rounds, built_s, extra)


async def first_questions(ours: RecallStore, calls: list[Call], passes: int = 20) -> float:
    """Our searches again, each pass followed by a wait for the checks it set off, until every
    index has had its first `FIRST_QUESTIONS` questions checked (each index's breadth then
    follows its questions, as after a store's first searches through it; issue 56), or
    `passes` passes; the seconds it took."""
    planner = ours._planner
    started = time.perf_counter()
    for _ in range(passes):
        await planner.refresh_now()
        keys = list(planner._indexes.names)
        if all(planner.tally(ns, dims).questions >= FIRST_QUESTIONS for ns, dims in keys):
            break
        await timed(calls)
        await ours.wait_for_index_builds()
    return time.perf_counter() - started


def report(
    args: argparse.Namespace,
    revision: str,
    items: Items,
    loaded: dict[str, Loaded],
    tallies: dict[str, dict[str, Tally]],
    rounds: list[Any],
    built_s: float,
    extra: Extra,
) -> None:
    """The tables: per size bucket, per round, the phases, the targets; printed and written."""

    def rate(system: str) -> str:
        load_s = loaded[system].load_s
        # every item loaded: the small namespaces' and the large ones'
        total = int(items.sizes.sum())
        return "reused (--keep)" if load_s is None else f"{total / load_s:,.0f} items/s"

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
    real = args.data == "real"
    data = " --data real" if real else ""
    phases = f" --puts {args.puts} --cold {args.cold} --cold-seconds {args.cold_seconds:g}"
    if real:
        vectors = (
            f"bge-small vectors of LongMemEval user turns with their replies (a random sample "
            f"per namespace; {extra.midpoints:,} rows, past the 42,841 turns, are normalised "
            f"midpoints of two turns), handed to both by one `embed` that looks them up. "
            f"{args.queries} searches per namespace (`asearch(namespace, query=..., limit=10)`, "
            f"a LongMemEval question embedded by bge-small, from {extra.questions} questions)"
        )
        title = "on real text (bge-small turns, LongMemEval questions)"
    else:
        vectors = (
            "precomputed 384-dimension vectors (clustered: topics shared by all namespaces), "
            f"handed to both by one `embed` that looks them up. {args.queries} searches per "
            "namespace (`asearch(namespace, query=..., limit=10)`, a held-out vector near one "
            "of the namespace's topics)"
        )
        title = "on synthetic clustered vectors (the stress case, no target)"
    body = f"""## RecallStore and LangGraph's AsyncPostgresStore as BaseStores, {title}

`python benchmarks/basestore.py{data} --items {args.items} --namespaces {args.namespaces} --queries
{args.queries} --large {large} --large-queries {args.large_queries} --everywhere
{args.everywhere} --rounds {args.rounds}{phases}{keep}` on {machine()}, commit {revision}.

Ours is `RecallStore`, the peer LangGraph's `AsyncPostgresStore` (its default index: HNSW,
cosine), each on a database of its own on the same server, both loaded through `abatch` with
the same {args.items:,} items in {args.namespaces:,} namespaces of skewed sizes (lognormal:
{sizes.min():,} to {sizes.max():,} items, median {int(np.median(sizes)):,}) and the same
{vectors}, shuffled; after
a warm-up pass, store by store, {args.rounds} measured rounds in which the stores take turns in
blocks of {BLOCK} searches (the order turning each block). recall@10 is against an exact
(numpy) cosine search of the namespace (ties at the tenth score count as hits); a search is
short when it returns fewer than min(10, items in the namespace). Then one namespace of each
of {large or "no"} items ({args.large_queries} searches each) and {args.everywhere} searches of
the prefix ("users",), which holds every namespace (recall against the exact top 10 of all
items). Loading: ours {rate(OURS)}, the peer {rate(PEER)} (the peer builds its HNSW index as it
loads). Ours builds
a namespace's index once a write takes it to `store_index_threshold` (1,000) vectors (before the
batch returns up to 5,000 vectors, else in the background; or when a search meets it), and the
index over every namespace (every vector, as halfvec: decision 0053) when a search
meets a prefix of `store_wide_threshold` (10,000) or more, each calibrated once built: after the
warm-up pass the run waited {built_s:.0f} s for those builds and calibrations (0 when they were
kept from a run before), then searched again, pass after pass, until each index had its first
200 searches checked against the exact scan (each index's breadth then follows its questions,
as after a store's first searches through it), then warmed up again.

Per namespace size, over every measured search:

{table(bucket_headers, bucket_rows(items, tallies))}

Every search, round by round (the ratios of one round are measured at the same time):

{table(round_headers, round_rows(rounds))}

{phase_tables(extra)}
Targets: {verdict(tallies, extra)}.
"""
    publish("basestore-real" if real else "basestore", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
