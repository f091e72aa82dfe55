"""What the default path's time is made of, part by part, the parts adding up to the whole
(issue 46): `store.search(user, text)` at the store's defaults, the query embedded in every call
(embedding cache off), each part timed inside those very calls.

    python benchmarks/default_parts.py [--size 20500] [--questions 400] [--large-from locomo]

Two sets of users, in one database: LoCoMo's full regime (each dev conversation one user, about
300 memories) asked their own questions, and one user of up to --size memories (as
benchmarks/default_path.py makes them, with their own HNSW index): by default the distinct turns
of LongMemEval dev's haystacks asked their own questions in turns (issue 56's large user), with
--large-from locomo LoCoMo pairs cycled asked a seeded sample of LoCoMo's questions.
Each part is the wall time of one step of the store's search, taken by a timer around the
store's own method during the timed calls:
- the query embedded (for a user up to 2,000 memories the keyword side is built beside it: the
  sync of the user's held memories, one call, then BM25 over them in the process, decision 0060;
  each shown within it);
- the user's plan (cached);
- the candidates after the embedding (a user up to 2,000: made from their held memories in the
  process, details, pick and records in one step, decisions 0059 and 0060; a larger one: the
  scoped call, then picked and assembled);
- the second stage (features, ranker, intent, gate); the result arranged (sources first, the
  limit);
- the rest: what no timer covers (the checks, the result's objects, the awaits between steps).
The shares are of the mean whole; the parts named add up to the whole less the rest. Beside the
default path, taking turns with it in blocks of 25 after a warm-up pass: the semantic path end
to end, and each call's server time (its rows counted in the server, so one number crosses the
wire) with a bare round trip. Writes docs/benchmarks.md (section "default-parts").
"""

from __future__ import annotations

import functools
import inspect
import random
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
from harness import longmemeval as lme
from harness.corpus import load
from harness.db import fresh_database, settle
from harness.regimes import LARGE, SEED, embed, full, large_user, turn_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import BLOCK, Call, timed, timed_interleaved
from pgvector.psycopg import register_vector_async

import recall.store.candidates as candidates_module
from recall.config import Settings
from recall.db.pool import connect_once
from recall.embeddings import Vector
from recall.search.keywords import keywords_from_text
from recall.search.second_stage import SecondStage
from recall.store import MemoryStore, held_search
from recall.store.candidates import SCOPE

WARM = 50
EMBEDDED = "query embedded"
REST = "the rest (checks, results, awaits)"
# the steps timed, in the order a search takes them; those marked True run within another
# step (shown, not added: their step's time holds them)
STEPS = {
    EMBEDDED: False,
    "embedding (within the above)": True,
    "keyword side (within the above)": True,
    "held memories' sync (within the keyword side)": True,
    "BM25 over the held memories (within the keyword side)": True,
    "plan": False,
    "candidates from the held memories": False,
    "candidates' call (a large user)": False,
    "scoped call (within the above)": True,
    "picked and assembled": False,
    "second stage (features, ranker, gate)": False,
    "arranged (sources first, the limit)": False,
}
SERVER = {
    "held memories' stamp and the words' lexemes, server": (
        "SELECT stamp FROM recall.held_state(%s, %s, %s)"
    ),
    "the keyword call before decision 0060 (not made), server": (
        "SELECT count(*) FROM recall.search_terms(%s, %s, %s, NULL)"
    ),
    "scoped call, server": (
        "SELECT count(*) FROM recall.search_scoped(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    ),
    "exact search, server": "SELECT count(*) FROM recall.search_exact(%s, %s, 0.5, 3)",
    "round trip (SELECT 1)": "SELECT 1",
}


class Timers:
    """Wall time per step of the calls made while `on`: a step inside another running step is
    counted as its own row but not added to the whole's parts."""

    def __init__(self) -> None:
        self.on = False
        self.depth = 0
        self.call: dict[str, float] = defaultdict(float)

    def wrap(self, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` (a coroutine function or a plain one) with its time added to `step`."""

        def record(started: float) -> None:
            self.call[step] += (time.perf_counter() - started) * 1000

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    if self.on:
                        record(started)

            return timed_async

        @functools.wraps(fn)
        def timed_plain(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.on:
                    record(started)

        return timed_plain


def instrument(store: MemoryStore, timers: Timers) -> None:
    """Put the timers around the store's steps (this process only: a benchmark's view)."""
    search, candidates = store._search, store._candidates
    search._query = timers.wrap(EMBEDDED, search._query)  # type: ignore[method-assign]
    embedder = store.embedder
    embedder.embed_query = timers.wrap(  # type: ignore[method-assign]
        "embedding (within the above)", embedder.embed_query
    )
    candidates.keyword_side = timers.wrap(  # type: ignore[method-assign]
        "keyword side (within the above)", candidates.keyword_side
    )
    candidates.plan_of = timers.wrap("plan", candidates.plan_of)  # type: ignore[method-assign]
    candidates._scoped = timers.wrap(  # type: ignore[method-assign]
        "candidates' call (a large user)", candidates._scoped
    )
    held = candidates.core.held
    held.sync = timers.wrap(  # type: ignore[method-assign]
        "held memories' sync (within the keyword side)", held.sync
    )
    searched: Any = held_search
    searched.scored = timers.wrap(
        "BM25 over the held memories (within the keyword side)", searched.scored
    )
    candidates._held_candidates = timers.wrap(  # type: ignore[method-assign]
        "candidates from the held memories", candidates._held_candidates
    )
    module: Any = candidates_module
    module.scoped_rows = timers.wrap("scoped call (within the above)", module.scoped_rows)
    module._pick = timers.wrap("picked and assembled", module._pick)
    module.assemble = timers.wrap("picked and assembled", module.assemble)
    stage: Any = SecondStage
    stage.rank = timers.wrap("second stage (features, ranker, gate)", stage.rank)
    search._found = timers.wrap(  # type: ignore[method-assign]
        "arranged (sources first, the limit)", search._found
    )


def default_call(store: MemoryStore, timers: Timers, user: str, text: str) -> Call:
    """The default path end to end, its steps timed, the whole recorded as `whole`."""

    async def call() -> dict[str, float]:
        timers.call = defaultdict(float)
        timers.on = True
        started = time.perf_counter()
        try:
            await store.search(user, text)
        finally:
            timers.on = False
        return {**timers.call, "whole": (time.perf_counter() - started) * 1000}

    return call


def semantic_call(store: MemoryStore, user: str, text: str) -> Call:
    """The semantic path end to end."""
    return lambda: store.search(user, text, mode="semantic")


def server_call(conn: Any, sql: str, args: tuple[Any, ...] | None) -> Call:
    async def call() -> Any:
        cur = await conn.execute(sql.encode(), args)
        return await cur.fetchall()

    return call


async def server_args(
    store: MemoryStore, user: str, text: str, vector: Vector, large: bool
) -> dict[str, tuple[Any, ...] | None]:
    """The arguments the store passes each call for this question (as it passes them)."""
    k = store.ranker.candidates if isinstance(store.ranker, SecondStage) else 25
    keywords = keywords_from_text(text)
    tsquery = None if keywords.empty else keywords.tsquery
    args: dict[str, tuple[Any, ...] | None] = {
        "exact search, server": (user, vector),
        "round trip (SELECT 1)": None,
    }
    if large:
        plan = await store._candidates.plan_of(user)
        args["scoped call, server"] = (
            user, vector, SCOPE, max(SCOPE, store.settings.hnsw_ef_search),
            plan.hnsw_index is not None, tsquery, keywords.words, k, k, False,
        )  # fmt: skip
    else:
        held = store.core.held.get(user)  # as the search finds it: held, the stamp unchanged
        args["held memories' stamp and the words' lexemes, server"] = (
            user, held and held.stamp, keywords.words
        )  # fmt: skip
        args["the keyword call before decision 0060 (not made), server"] = (
            user, tsquery, keywords.words
        )  # fmt: skip
    return args


async def measure(
    store: MemoryStore,
    timers: Timers,
    conn: Any,
    asked: list[tuple[str, str, Vector]],
    large: bool,
) -> tuple[list[dict[str, float]], dict[str, list[float]]]:
    """The default path's steps per call, and the times of every path taking turns."""
    by_path: dict[str, list[Call]] = defaultdict(list)
    for n, (user, text, vector) in enumerate(asked):
        by_path["default, end to end"].append(default_call(store, timers, user, f"{text} [d{n}]"))
        by_path["semantic, end to end"].append(semantic_call(store, user, f"{text} [s{n}]"))
        for name, args in (await server_args(store, user, text, vector, large)).items():
            by_path[name].append(server_call(conn, SERVER[name], args))
    for calls in by_path.values():
        await timed(calls[:WARM])
    out = await timed_interleaved(by_path)
    parts = out["default, end to end"][1]
    return parts, {name: times for name, (times, _r) in out.items()}


def section(label: str, users: str, parts: list[dict[str, float]], times: dict[str, Any]) -> str:
    """A set of users' table: each step's mean, p50 and p95 and its share of the mean whole,
    the rest, and the paths and server calls beside it."""
    whole = [p["whole"] for p in parts]
    mean_whole = float(np.mean(whole))
    rows = []
    added = 0.0
    for step, within in STEPS.items():
        values = [p.get(step, 0.0) for p in parts]
        if not any(values):
            continue
        mean = float(np.mean(values))
        if not within:
            added += mean
        share = "-" if within else f"{100 * mean / mean_whole:.1f}%"
        p50, p95 = np.percentile(values, [50, 95])
        rows.append([step, f"{mean:.2f}", f"{p50:.2f}", f"{p95:.2f}", share])
    rest = [p["whole"] - sum(v for s, v in p.items() if s in STEPS and not STEPS[s]) for p in parts]
    r50, r95 = np.percentile(rest, [50, 95])
    rest_share = 100 * float(np.mean(rest)) / mean_whole
    rows.append([REST, f"{np.mean(rest):.2f}", f"{r50:.2f}", f"{r95:.2f}", f"{rest_share:.1f}%"])
    w50, w95 = np.percentile(whole, [50, 95])
    rows.append(["**the whole (default, end to end)**", f"{mean_whole:.2f}", f"{w50:.2f}",
                 f"{w95:.2f}", "100%"])  # fmt: skip
    beside = []
    for name, values in times.items():
        if name == "default, end to end":
            continue
        p50, p95 = np.percentile(values, [50, 95])
        beside.append([name, f"{np.mean(values):.2f}", f"{p50:.2f}", f"{p95:.2f}"])
    named = 100 * added / mean_whole
    return f"""### {label} ({users})

{table(["step of the default path", "mean ms", "p50 ms", "p95 ms", "share of the whole"], rows)}

The steps named add up to {named:.1f}% of the mean whole; the rest is {rest_share:.1f}%.
Beside it, in the same run:

{table(["path or call", "mean ms", "p50 ms", "p95 ms"], beside)}
"""


async def main() -> None:
    """Load both sets of users, time the parts; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--size", type=int, default=20_500, help="the large user's memories")
    options.add_argument("--questions", type=int, default=400, help="questions to each set")
    options.add_argument("--large-from", choices=("longmemeval", "locomo"), default="longmemeval",
                         help="the large user: distinct turns of LongMemEval dev's haystacks "
                         "asked their own questions in turns (issue 56), or LoCoMo pairs "
                         "cycled with noisy vectors asked a sample of LoCoMo's")  # fmt: skip
    args = options.parse_args()
    revision = git_revision()
    corpus = load(args.data)
    url = await fresh_database("recall_bench_default_parts")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        vectors = await embed(store, corpus, echoes=False)
        await store.add_turns(turn_items(corpus, full(corpus), vectors), batch_size=2000)
        own = [(user, text, vectors.queries[n])
               for n, (user, text, *_rest) in enumerate(corpus.questions)]  # fmt: skip
        if args.large_from == "longmemeval":
            large_items, placed = await lme.asked_user(store.embedder, args.size, LARGE)
            turns = max(1, args.questions // len(placed))  # each question asked that many times
            large = [(LARGE, text, vector) for _ in range(turns) for text, vector, _a in placed]
        else:
            rng = np.random.default_rng(SEED)
            large_items = list(large_user(corpus, vectors, args.size, rng))
            picked = random.Random(SEED).sample(range(len(own)), min(args.questions, len(own)))
            large = [(LARGE, own[n][1], own[n][2]) for n in picked]
        await store.add_turns(large_items, batch_size=5000)
        await store.optimize()
        await settle(url)
        conn = await connect_once(url)
        await register_vector_async(conn)
        timers = Timers()
        instrument(store, timers)
        small_parts, small_times = await measure(store, timers, conn, own[: args.questions], False)
        large_parts, large_times = await measure(store, timers, conn, large, True)
        await conn.close()
    asked = len({user for user, *_rest in own[: args.questions]})
    users = f"{len(small_parts)} questions of {asked} dev users, about 300 memories each"
    command = "python benchmarks/default_parts.py" + "".join(
        f" {flag} {value}"
        for flag, value, default in [("--size", args.size, 20_500),
                                     ("--questions", args.questions, 400),
                                     ("--large-from", args.large_from, "longmemeval")]
        if value != default
    )  # fmt: skip
    held_as = {
        "longmemeval": "distinct turns of LongMemEval dev's haystacks, asked their questions",
        "locomo": "LoCoMo pairs cycled, asked a sample of LoCoMo's questions",
    }[args.large_from]
    body = f"""## What the default path's time is made of, part by part (issue 46)

`{command}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}. Each step is timed
inside the default path's own calls (`store.search(user, text)`, the query embedded every
time), taking turns in blocks of {BLOCK} with the semantic path and the server calls, after a
warm-up pass. Means add up; p50 and p95 of the parts do not.

{section("LoCoMo full users", users, small_parts, small_times)}
{
        section(
            "A large user",
            f"{len(large_parts)} questions, 1 user of {len(large_items):,} ({held_as})",
            large_parts,
            large_times,
        )
    }"""
    publish("default-parts", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
