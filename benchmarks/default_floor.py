"""What the default path's extra time over semantic-only is made of (issue 29's 1.5x target):
the budget the target leaves, and the floor of the work the second stage does beyond a
semantic search, measured part by part on the dev users.

    python benchmarks/default_floor.py [--questions 400]

LoCoMo's full regime (each dev conversation one user, about 300 memories) in one database,
asked their own questions (the first --questions). Every part takes turns with the others in
blocks of 25 calls, in one run, after a warm-up pass:
- semantic and default: `store.search` end to end (the query embedded, cache off);
- the budget: what 1.5x the semantic path's p50 leaves for everything the default path does
  beyond it;
- server time of each call, its rows counted in the server (`SELECT count(*) FROM ...`), so
  nothing crosses the wire but one number: the keyword call (`recall.search_terms`), the vector
  call (`recall.search_details`) and the semantic path's exact search (`recall.search_exact`),
  and a bare round trip (`SELECT 1`) to subtract;
- the same calls with their rows fetched and decoded as the store decodes them;
- the second stage in Python (features, ranker, intent and gate) on the fetched candidates;
- the query's embedding alone, and the embedding and the keyword call together, awaited as
  the default path runs them for a known user.
Writes docs/benchmarks.md (section "default-floor").
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import numpy as np
from harness.corpus import load
from harness.db import fresh_database, settle
from harness.regimes import embed, full, turn_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import BLOCK, Call, percentiles, timed, timed_interleaved
from pgvector.psycopg import register_vector_async

from recall.config import Settings
from recall.db.pool import connect_once
from recall.search.keywords import keywords_from_text
from recall.store import MemoryStore
from recall.store.candidates import ECHO_SLACK, _best_by_bm25

WARM = 50
SERVER = {
    "round trip (SELECT 1)": "SELECT 1",
    "keyword call, server": "SELECT count(*) FROM recall.search_terms(%s, %s, %s, NULL)",
    "vector call, server": "SELECT count(*) FROM recall.search_details(%s, %s, %s, %s, %s)",
    "exact search, server": "SELECT count(*) FROM recall.search_exact(%s, %s, 0.5, 3)",
}


async def main() -> None:
    """Load the users, time the parts in turns; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--questions", type=int, default=400, help="questions asked")
    args = options.parse_args()
    revision = git_revision()
    corpus = load(args.data)
    url = await fresh_database("recall_bench_default_floor")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        stage = store.second_stage
        assert stage is not None, "the default embedder ships a fitted second stage"
        k = stage.candidates
        fetch_vectors = stage.product_weights is not None  # as the store asks
        vectors = await embed(store, corpus, echoes=False)
        await store.add_turns(turn_items(corpus, full(corpus), vectors), batch_size=2000)
        await settle(url)
        asked = [
            (user, text, vectors.queries[n])
            for n, (user, text, *_rest) in enumerate(corpus.questions)
        ][: args.questions]
        conn = await connect_once(url)
        await register_vector_async(conn)
        # the arguments of each call, and the candidates the second stage scores
        prepared = []
        for user, text, vector in asked:
            keywords = keywords_from_text(text)
            terms = await store._candidates.terms_of(user, keywords, None)
            ids = _best_by_bm25(terms, k)
            rows, near = await store.candidates(user, text, vector, k, vectors=fetch_vectors)
            prepared.append((user, text, vector, keywords, ids, rows, near))

        def server(name: str, user: str, keywords: Any, vector: Any, ids: Any) -> Call:
            args_of = {
                "round trip (SELECT 1)": None,
                "keyword call, server": (
                    user,
                    None if keywords.empty else keywords.tsquery,
                    keywords.words,
                ),
                "vector call, server": (user, vector, k + ECHO_SLACK, ids, fetch_vectors),
                "exact search, server": (user, vector),
            }

            async def call() -> Any:
                cur = await conn.execute(SERVER[name].encode(), args_of[name])
                return await cur.fetchall()

            return call

        def calls_of(n: int) -> dict[str, Call]:
            user, text, vector, keywords, ids, rows, near = prepared[n]
            q = np.asarray(vector, dtype=np.float64)

            async def stage_python() -> Any:
                return stage.score(text, q, rows, near)

            async def embed_beside() -> Any:
                return await asyncio.gather(
                    store.embedder.embed_query(f"{text} ({n})"),
                    store._candidates.terms_of(user, keywords, None),
                )

            out: dict[str, Call] = {
                "semantic, end to end": lambda: store.search(
                    user, f"{text} [s{n}]", mode="semantic"
                ),
                "default, end to end": lambda: store.search(user, f"{text} [d{n}]"),
                "keyword call, rows decoded": lambda: store._candidates.terms_of(
                    user, keywords, None
                ),
                "vector call, rows decoded": lambda: store._candidates.details_of(
                    user, vector, k + ECHO_SLACK, ids, fetch_vectors
                ),
                "second stage in Python": stage_python,
                "embedding alone": lambda: store.embedder.embed_query(f"{text} [{n}]"),
                "embedding and keyword call together": embed_beside,
            }  # fmt: skip
            for name in SERVER:
                out[name] = server(name, user, keywords, vector, ids)
            return out

        per_question = [calls_of(n) for n in range(len(prepared))]
        names = list(per_question[0])
        by_name = {name: [c[name] for c in per_question] for name in names}
        for name in names:
            await timed(by_name[name][:WARM])
        times = {name: t for name, (t, _r) in (await timed_interleaved(by_name)).items()}
        await conn.close()
    p = {name: percentiles(times[name], [50, 95]) for name in names}
    rtt = p["round trip (SELECT 1)"][0]
    budget = 0.5 * p["semantic, end to end"][0]
    server_extra = (
        p["keyword call, server"][0]
        - rtt
        + p["vector call, server"][0]
        - p["exact search, server"][0]
    )
    floor = server_extra + p["second stage in Python"][0]
    lines = [[name, f"{p[name][0]:.2f}", f"{p[name][1]:.2f}"] for name in names]
    command = "python benchmarks/default_floor.py" + (
        "" if args.questions == 400 else f" --questions {args.questions}"
    )
    verdict = (
        "the target is out of reach of this design on this machine"
        if floor > budget
        else "the target is within reach of this design"
    )
    body = f"""## What the default path's extra time is made of

`{command}` on {machine()}, commit {revision}, {datetime.now():%Y-%m-%d}.
The dev users (LoCoMo's full regime, about 300 memories each) asked {len(prepared)} of their own
questions; every part below takes turns with the others in blocks of {BLOCK}, after a warm-up
pass. "Server" times count the rows in the server, so only a number crosses the wire.

{table(["part", "p50 ms", "p95 ms"], lines)}

- **Budget** of issue 29's target (the default path at most 1.5x semantic-only, p50): half the
  semantic path's p50, **{budget:.2f} ms**, for everything the default path does beyond it.
- **Floor** of that work before any row crosses the wire: the keyword call's server time less
  a round trip, plus the vector call's beyond the exact search's, plus the second stage in
  Python: **{floor:.2f} ms** p50.
- The floor {"exceeds" if floor > budget else "is within"} the budget: {verdict}.
"""
    publish("default-floor", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
