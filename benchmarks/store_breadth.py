"""RecallStore's breadth from the questions it is asked, and both stores' curves (issue 47).

    python benchmarks/store_breadth.py [--sizes 20000,50000] [--fit 98]
                                       [--breadths 40,60,80,100,160,250] [--keep]
                                       [--repeat 3]

One namespace of each --sizes real-text items (bge-small vectors of LongMemEval user turns with
their replies, as `benchmarks/basestore.py --data real` makes them) in each store, RecallStore and
LangGraph's AsyncPostgresStore, each on a database of its own; every question is asked of each
namespace and of their prefix ("breadth",), which holds every item (ours through its index over
every namespace, issue 56). LongMemEval's 195 dev questions are
split by a seeded shuffle: the first --fit are asked of RecallStore with every search checked
against the exact scan in the background (`store_breadth_sample` 1), so each index's breadth
comes from them (`recall.basestore.questions`); the others, held out, are then asked of both
stores with no search checked, each --repeat times, in turns in blocks of 25 (the order turning
each block), the p95 ratios with a paired bootstrap interval over the questions: ours at
the breadth its questions chose against the peer at its default (pgvector's `hnsw.ef_search`,
40), then both at each of --breadths (ours by its planner's breadth, the peer by
`hnsw.ef_search` set on its database for a fresh connection pool). recall@10 is against the
exact (numpy) top ten of the namespace, ties at the tenth counted as hits. With --keep the two
databases stay for the next run with the same sizes. Writes docs/benchmarks.md (section
"store-breadth").
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from harness.bootstrap import percentile_ratio
from harness.data import DIMS
from harness.items import PREFIX, Items, Query, item_text
from harness.realtext import namespace_rows, question_vectors, turn_vectors
from harness.report import git_revision, machine, publish, table
from harness.run import counts, parser, run
from harness.storeload import EF_CONSTRUCTION, open_loaded
from harness.storephases import OURS, PEER
from harness.storetables import exact_answer
from harness.timing import BLOCK, Call, percentiles, timed, timed_interleaved
from langgraph.store.base import BaseStore, PutOp, SearchItem
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from psycopg import sql

from recall import RecallStore
from recall.basestore.namespaces import join
from recall.db.pool import connect_once

SEED = 47
PEER_DEFAULT = 40  # pgvector's hnsw.ef_search
FOUND = 0.95  # issue 56 holds our p95 to the peer's where both find this share of the ten
ROOT = ("breadth",)  # the prefix over every namespace


def namespace_items(pool: np.ndarray, sizes: list[int], rng: np.random.Generator) -> Items:
    """One namespace per size, its rows distinct turns of `pool` (then midpoints of two), as
    `benchmarks/basestore.py --data real` makes a namespace's."""
    parts = [namespace_rows(pool, size, rng)[0] for size in sizes]
    vectors = np.vstack(parts).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    namespaces: list[tuple[str, ...]] = [("breadth", f"n{size}") for size in sizes]
    vectors_of = {
        item_text(j, i): vectors[int(starts[j]) + i]
        for j in range(len(sizes))
        for i in range(sizes[j])
    }
    return Items(namespaces, np.array(sizes), starts, vectors, [], vectors_of)


def spaces(items: Items) -> list[int]:
    """What the questions are asked of: each namespace (by number), then the prefix over every
    namespace (`PREFIX`)."""
    return [*range(len(items.namespaces)), PREFIX]


def space_of(items: Items, j: int) -> tuple[str, ...]:
    """The prefix a search of `j` (a namespace's number, or `PREFIX`) names."""
    return ROOT if j == PREFIX else items.namespaces[j]


def asked(items: Items, questions: np.ndarray, tag: str) -> list[Query]:
    """Every question asked of every namespace and of the prefix over them, its text
    registered for `embed`."""
    out = []
    for j in spaces(items):
        for n, vector in enumerate(questions):
            q = Query(j, f"{tag}-{j}-{n}", vector)
            items.vectors_of[q.text] = vector
            out.append(q)
    return out


def search_call(store: BaseStore, items: Items, q: Query) -> Call:
    return lambda: store.asearch(space_of(items, q.namespace), query=q.text, limit=10)


def recall_of(items: Items, queries: list[Query], found: list[list[SearchItem]]) -> float:
    """Mean recall@10 of the pages found, against the exact answers (ties included)."""
    scores = []
    for q, page in zip(queries, found, strict=True):
        truth, want = exact_answer(items, q)
        hits = {(tuple(r.namespace), r.key) for r in page} & truth
        scores.append(min(len(hits), want) / want)
    return float(np.mean(scores))


@asynccontextmanager
async def peer_at(url: str, items: Items, ef_search: int) -> AsyncIterator[AsyncPostgresStore]:
    """The peer on `url` with `hnsw.ef_search` set for its database (a fresh pool reads it)."""
    conn = await connect_once(url)
    try:
        name = sql.Identifier(conn.info.dbname)
        await conn.execute(
            sql.SQL("ALTER DATABASE {} SET hnsw.ef_search = {}").format(
                name, sql.Literal(ef_search)
            )
        )
    finally:
        await conn.close()
    index: PostgresIndexConfig = {"dims": DIMS, "embed": items.embed, "fields": ["text"]}
    async with AsyncPostgresStore.from_conn_string(url, index=index) as peer:
        yield peer


@dataclass(frozen=True)
class Turns:
    """One system's calls at one point: every call's time (ms), in order, and recall@10."""

    times: list[float]
    recall: float

    @property
    def p50(self) -> float:
        """The median call's time."""
        return percentiles(self.times, [50])[0]

    @property
    def p95(self) -> float:
        """The 95th percentile of the calls' times."""
        return percentiles(self.times, [95])[0]


async def in_turns(
    items: Items, queries: list[Query], calls: dict[str, list[Call]], repeat: int
) -> dict[str, Turns]:
    """A warm-up pass, then the systems in turns, each question asked `repeat` times by each
    (call n asks question n % len(queries)): each one's times and recall@10 (its first ask)."""
    for system_calls in calls.values():
        await timed(system_calls[:BLOCK])
    out = await timed_interleaved({name: cs * repeat for name, cs in calls.items()})
    return {
        name: Turns(list(times), recall_of(items, queries, found[: len(queries)]))
        for name, (times, found) in out.items()
    }


def p95_ratio(result: dict[str, Turns], questions: int) -> tuple[float, float, float]:
    """Our p95 over the peer's, with its paired bootstrap interval over the questions."""
    ours, peer = result[OURS].times, result[PEER].times
    return percentile_ratio(ours, peer, [n % questions for n in range(len(ours))])


async def main() -> None:
    """Load both stores, let ours learn its breadth from the fit questions, time the rest."""
    options = parser(__doc__)
    options.add_argument("--sizes", default="20000,50000", help="namespace sizes")
    options.add_argument("--fit", type=int, default=98, help="questions ours is tuned on")
    options.add_argument("--breadths", default="40,60,80,100,160,250", help="the curves' points")
    options.add_argument("--keep", action="store_true", help="keep the databases for a rerun")
    options.add_argument(
        "--ef-construction", type=int, default=EF_CONSTRUCTION, help="our graphs' build breadth"
    )
    options.add_argument("--puts", type=int, default=200, help="puts into the largest, in turns")
    options.add_argument("--repeat", type=int, default=3, help="asks of each held-out question")
    args = options.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    breadths = counts(args.breadths, default=PEER_DEFAULT, option="--breadths")
    revision = git_revision()
    rng = np.random.default_rng(SEED)
    pool = await turn_vectors()
    _texts, question_pool = question_vectors()
    order = list(range(len(question_pool)))
    random.Random(SEED).shuffle(order)
    fit_q, held_q = question_pool[order[: args.fit]], question_pool[order[args.fit :]]
    items = namespace_items(pool, sizes, rng)
    fit, held = asked(items, fit_q, "fit"), asked(items, held_q, "held")
    # the shapes basestore.py's loader names its databases by
    shape = argparse_like(
        items=int(sum(sizes)),
        namespaces=len(sizes),
        large=sizes,
        keep=args.keep,
        ef_construction=args.ef_construction,
    )
    async with AsyncExitStack() as stack:
        ours, _loaded = await open_loaded(stack, OURS, shape, items)
        assert isinstance(ours, RecallStore)
        _peer, peer_loaded = await open_loaded(stack, PEER, shape, items)
        await ours.build_indexes(every_namespace=True)
        planner = ours._planner
        for ns in [*items.namespaces, ROOT]:  # the cold start: each index's breadth from probes
            await planner._calibrate(index_of(ns), DIMS)
        before = {ns: breadth_of(planner, ns) for ns in [*items.namespaces, ROOT]}
        # the fit questions, every one checked in the background, one after the other
        planner.sample = 1.0
        started = time.perf_counter()
        for q in fit:
            await search_call(ours, items, q)()
            await ours.wait_for_index_builds()
        fit_s = time.perf_counter() - started
        planner.sample = 0.0
        await planner.refresh_now()
        chosen = {ns: breadth_of(planner, ns) for ns in [*items.namespaces, ROOT]}
        tallies = {ns: planner.tally(index_of(ns), DIMS) for ns in [*items.namespaces, ROOT]}
        rows = []
        for j in spaces(items):
            ns, mine = space_of(items, j), [q for q in held if q.namespace == j]
            async with peer_at(peer_loaded.url, items, PEER_DEFAULT) as peer:
                result = await in_turns(items, mine, {
                    OURS: [search_call(ours, items, q) for q in mine],
                    PEER: [search_call(peer, items, q) for q in mine],
                }, args.repeat)  # fmt: skip
            rows.append(headline(ns, len(mine), before, chosen, tallies, result))
        points: dict[tuple[str, ...], list[tuple[int, dict[str, Turns]]]] = {}
        for b in breadths:
            planner._breadth = fixed(b)  # type: ignore[method-assign,assignment]
            async with peer_at(peer_loaded.url, items, b) as peer:
                for j in spaces(items):
                    ns, mine = space_of(items, j), [q for q in held if q.namespace == j]
                    result = await in_turns(items, mine, {
                        OURS: [search_call(ours, items, q) for q in mine],
                        PEER: [search_call(peer, items, q) for q in mine],
                    }, args.repeat)  # fmt: skip
                    points.setdefault(ns, []).append((b, result))
            del planner._breadth
        async with peer_at(peer_loaded.url, items, PEER_DEFAULT) as peer:
            # single puts into the largest namespace, in turns (the peer at its default)
            largest = items.namespaces[int(np.argmax(items.sizes))]
            a, b = rng.integers(0, len(pool), size=(2, args.puts))
            spare = pool[a] + pool[b]
            spare /= np.linalg.norm(spare, axis=1, keepdims=True)
            texts = [f"put-{n}" for n in range(args.puts)]
            for text, vector in zip(texts, spare, strict=True):
                items.vectors_of[text] = vector
            measured = await timed_interleaved({
                OURS: [put_call(ours, largest, t) for t in texts],
                PEER: [put_call(peer, largest, t) for t in texts],
            })  # fmt: skip
            puts = {
                system: percentiles(times, [50, 95]) for system, (times, _r) in measured.items()
            }
            # taken out again: a kept database holds the items it was loaded with
            for store in (ours, peer):
                await store.abatch([PutOp(largest, t, None) for t in texts])
    asked_of = {space_of(items, j): sum(q.namespace == j for q in held) for j in spaces(items)}
    curves = [row for ns, pts in points.items() for row in curve_rows(ns, pts, asked_of[ns])]
    checks = sum(t.questions for t in tallies.values())
    command = (
        f"python benchmarks/store_breadth.py --sizes {args.sizes} --fit {args.fit} --breadths "
        f"{args.breadths} --ef-construction {args.ef_construction} --puts {args.puts} "
        f"--repeat {args.repeat}"
    )
    when = f"{machine()}, commit {revision}, {datetime.now():%Y-%m-%d}"
    default_headers = ["namespace", "held-out questions", "our breadth (probes -> questions)",
                       "questions' recall@10 there", "ours p50 / p95 ms", "peer p50 / p95 ms",
                       "recall@10 ours / peer", "p95 ours/peer [95%]", "target"]  # fmt: skip
    curve_headers = ["namespace", "breadth", "ours p95 ms", "ours recall@10", "peer p95 ms",
                     "peer recall@10", "p95 ours/peer [95%]", "ours beats the peer's point",
                     "p95 at most the peer's (both >= 0.95)"]  # fmt: skip
    per_check = 1000 * fit_s / max(checks, 1)
    body = f"""## RecallStore's breadth from its questions, and both stores' curves (issue 47)

`{command}` on {when}. One namespace of each size of real text in each store, and their prefix
(ours through its index over every namespace, which holds every vector); LongMemEval's
questions split by a seeded shuffle: {args.fit} asked of RecallStore with every search checked
in the background (its breadth chosen from them: {checks} checks in {fit_s:.0f} s,
{per_check:.0f} ms a check with its search), {len(held_q)} held out and asked of both,
each {args.repeat} times, in turns in blocks of {BLOCK} after a warm-up pass. recall@10 against
the exact top ten, ties included. The p95 ratios' 95% intervals are a paired bootstrap over the
questions (each drawn with all its asks, both stores').

At the defaults (ours: the breadth its questions chose; the peer: `hnsw.ef_search` 40):

{table(default_headers, rows)}

Curves: both stores at each breadth (`hnsw.ef_search`), the same held-out questions, in turns:

{table(curve_headers, curves)}

"Ours beats the peer's point": at some breadth ours reaches the peer's recall@10 for less p95,
or more recall@10 for no more p95 (issue 47's target for the curves). "p95 at most the peer's":
at the same breadth, where both find at least 95% of the exact ten (issue 56's target; "-"
where either finds less).

{args.puts} single puts into {join(largest)}, in turns: ours p50 / p95 {puts[OURS][0]:.2f} /
{puts[OURS][1]:.2f} ms, the peer {puts[PEER][0]:.2f} / {puts[PEER][1]:.2f} ms, p95 ratio
{puts[OURS][1] / puts[PEER][1]:.2f} (target <= 1.5, issue 56). Our graphs built with
`ef_construction` {args.ef_construction} (the peer: pgvector's default, 64).
"""
    publish("store-breadth", body, write=not args.no_write)


def put_call(store: BaseStore, namespace: tuple[str, ...], text: str) -> Call:
    return lambda: store.aput(namespace, text, {"text": text})


def label_of(ns: tuple[str, ...]) -> str:
    """A namespace's name in the tables; the prefix over every namespace says so."""
    return f"{join(ns)} (every namespace)" if ns == ROOT else join(ns)


def index_of(ns: tuple[str, ...]) -> str:
    """The index a search of `ns` goes through: the namespace's own, or the one over every
    namespace ('') for the prefix over them."""
    return "" if ns == ROOT else join(ns)


def breadth_of(planner: Any, ns: tuple[str, ...]) -> int:
    """How wide a search of `ns` looks through its index."""
    return int(planner.breadth(join(ns), DIMS, "every" if ns == ROOT else "namespace"))


def fixed(breadth: int) -> Callable[[str, int], int]:
    """A planner's `_breadth` that says `breadth` for every index (a curve's point)."""
    return lambda _ns, _dims: breadth


def argparse_like(**values: Any) -> argparse.Namespace:
    """The fields `harness.storeload` reads of basestore.py's arguments."""
    return argparse.Namespace(data="real", **values)


def headline(
    ns: tuple[str, ...],
    asked_n: int,
    before: dict[tuple[str, ...], int],
    chosen: dict[tuple[str, ...], int],
    tallies: dict[tuple[str, ...], Any],
    result: dict[str, Turns],
) -> list[object]:
    o, p = result[OURS], result[PEER]
    label = label_of(ns)
    measured = tallies[ns].recall(chosen[ns])
    ratio, lo, hi = p95_ratio(result, asked_n)
    return [
        label, asked_n, f"{before[ns]} -> {chosen[ns]}", f"{measured:.4f}",
        f"{o.p50:.2f} / {o.p95:.2f}", f"{p.p50:.2f} / {p.p95:.2f}",
        f"{o.recall:.4f} / {p.recall:.4f}", f"{ratio:.2f} [{lo:.2f}, {hi:.2f}]",
        "<= 1.5" if ns == ROOT else "<= 1.0 at >= 0.99",
    ]  # fmt: skip


def curve_rows(
    ns: tuple[str, ...], points: list[tuple[int, dict[str, Turns]]], questions: int
) -> list[list[object]]:
    """One namespace's curves: each peer point judged against every one of ours (issue 47),
    and our p95 against the peer's at the same breadth where both find 95% (issue 56)."""
    ours = [(r[OURS].p95, r[OURS].recall) for _b, r in points]
    rows: list[list[object]] = []
    for breadth, result in points:
        o, p = result[OURS], result[PEER]
        beats = any(
            (recall >= p.recall and tail < p.p95) or (recall > p.recall and tail <= p.p95)
            for tail, recall in ours
        )
        ratio, lo, hi = p95_ratio(result, questions)
        both = min(o.recall, p.recall) >= FOUND
        at_most = ("yes" if ratio <= 1.0 else "no") if both else "-"
        rows.append([label_of(ns), breadth, f"{o.p95:.2f}", f"{o.recall:.4f}", f"{p.p95:.2f}",
                     f"{p.recall:.4f}", f"{ratio:.2f} [{lo:.2f}, {hi:.2f}]",
                     "yes" if beats else "no", at_most])  # fmt: skip
    return rows


if __name__ == "__main__":
    run(main)
