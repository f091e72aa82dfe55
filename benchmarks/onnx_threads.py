"""ONNX Runtime's threads beside the database on the same cores (issue 56): the default model
with one thread per call (the default since issue 56) and with two (the default before), end to
end, the default path and the semantic one.

    python benchmarks/onnx_threads.py [--questions 300]

One database with LoCoMo's full users (each dev conversation one user, about 300 memories) and
two stores on it, alike but for their embedder: `BgeSmallEmbeddings()` and
`BgeSmallEmbeddings(threads=2)`; both sleep between calls. Each asks the first --questions
questions with `store.search(user, text)` (the default path: the keyword call runs in the
database beside the query's embedding) and with `mode="semantic"` (the embedding alone, then the
exact search), the query embedded in every call (cache off); the four take turns in blocks of
25 after a warm-up of 50 calls each. Writes docs/benchmarks.md (section "onnx-threads").
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from harness.corpus import load
from harness.db import fresh_database, settle
from harness.regimes import embed, full, turn_items
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import Call, percentiles, timed, timed_interleaved

from recall.config import Settings
from recall.embeddings.bge import BgeSmallEmbeddings
from recall.store import MemoryStore

ONE = "one (default)"
TWO = "two (the default before issue 56)"


def calls(store: MemoryStore, asked: list[tuple[str, str]], semantic: bool) -> list[Call]:
    """One search per question, at the defaults or semantic-only."""
    if semantic:
        return [partial(store.search, u, t, mode="semantic") for u, t in asked]
    return [partial(store.search, u, t) for u, t in asked]


async def main() -> None:
    """Load, time in turns, print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--questions", type=int, default=300, help="questions asked")
    args = options.parse_args()
    revision = git_revision()
    corpus = load(args.data)
    url = await fresh_database("recall_bench_onnx_threads")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with (
        MemoryStore.connect(settings, embeddings=BgeSmallEmbeddings()) as one,
        MemoryStore.connect(settings, embeddings=BgeSmallEmbeddings(threads=2)) as two,
    ):
        vectors = await embed(two, corpus, echoes=False)
        await two.add_turns(turn_items(corpus, full(corpus), vectors), batch_size=2000)
        await settle(url)
        asked = [(q[0], q[1]) for q in corpus.questions[: args.questions]]
        systems = {
            (ONE, "default"): calls(one, asked, False),
            (TWO, "default"): calls(two, asked, False),
            (ONE, "semantic"): calls(one, asked, True),
            (TWO, "semantic"): calls(two, asked, True),
        }
        for warm in systems.values():
            await timed(warm[:50])
        timed_runs = await timed_interleaved(systems)
    p = {k: percentiles(v[0], (50, 95)) for k, v in timed_runs.items()}
    rows = []
    for key in systems:
        threads, path = key
        base = p[(TWO, path)]
        rows.append([path, threads, f"{p[key][0]:.2f}", f"{p[key][1]:.2f}",
                     f"{p[key][0] / base[0]:.2f}", f"{p[key][1] / base[1]:.2f}"])  # fmt: skip
    ratio = [
        [threads, *(f"{p[(threads, 'default')][i] / p[(threads, 'semantic')][i]:.2f}"
                    for i in (0, 1))]
        for threads in (ONE, TWO)
    ]  # fmt: skip
    head = ["path", "ONNX Runtime's threads per call", "p50 ms", "p95 ms", "p50 ratio to two",
            "p95 ratio to two"]  # fmt: skip
    body = f"""## ONNX Runtime's threads beside the database

`python benchmarks/onnx_threads.py --questions {args.questions}` on {machine()}, commit
{revision}, {datetime.now():%Y-%m-%d}. LoCoMo's full users, {len(asked)} of their questions,
each store's query embedded in every call (cache off); the four take turns in blocks of 25
after a warm-up. The default path runs the keyword call in the database beside the embedding;
the semantic path embeds alone. Threads sleep between calls in both (issue 36). One thread a
call is the default since issue 56, on these figures.

{table(head, rows)}

The default path against semantic-only, per choice:

{table(["ONNX Runtime's threads", "default / semantic p50", "default / semantic p95"], ratio)}
"""
    publish("onnx-threads", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
