"""ONNX Runtime's spinning threads against the database on the same cores (issue 36): the
default model with its threads spinning between calls and with them sleeping, end to end.

    python benchmarks/onnx_spin.py [--questions 300]

LoCoMo's full regime (each dev conversation one user, about 300 memories) in one database; two
stores on it, alike but for their embedder: `BgeSmallEmbeddings(spin=True)` and the default
`spin=False`. Each asks the first --questions questions with `store.search(user, text)` (the
default path) and with `mode="semantic"`, the query embedded in every call (cache off); the four
take turns in blocks of 25, after a warm-up pass. Writes docs/benchmarks.md (section
"onnx-spin").
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
    url = await fresh_database("recall_bench_onnx_spin")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    spinning = BgeSmallEmbeddings(spin=True)
    async with (
        MemoryStore.connect(settings, embeddings=spinning) as spin,
        MemoryStore.connect(settings, embeddings=BgeSmallEmbeddings()) as sleep,
    ):
        vectors = await embed(sleep, corpus, echoes=False)
        await sleep.add_turns(turn_items(corpus, full(corpus), vectors), batch_size=2000)
        await settle(url)
        asked = [(q[0], q[1]) for q in corpus.questions[: args.questions]]
        systems = {
            ("spinning", "default"): calls(spin, asked, False),
            ("sleeping (default)", "default"): calls(sleep, asked, False),
            ("spinning", "semantic"): calls(spin, asked, True),
            ("sleeping (default)", "semantic"): calls(sleep, asked, True),
        }
        for warm in systems.values():
            await timed(warm[:50])
        timed_runs = await timed_interleaved(systems)
    p = {k: percentiles(v[0], (50, 95)) for k, v in timed_runs.items()}
    rows = []
    for key in systems:
        threads, path = key
        base = p[("spinning", path)]
        rows.append([path, threads, f"{p[key][0]:.2f}", f"{p[key][1]:.2f}",
                     f"{p[key][0] / base[0]:.2f}", f"{p[key][1] / base[1]:.2f}"])  # fmt: skip
    ratio = [
        [threads, *(f"{p[(threads, 'default')][i] / p[(threads, 'semantic')][i]:.2f}"
                    for i in (0, 1))]
        for threads in ("spinning", "sleeping (default)")
    ]  # fmt: skip
    head = ["path", "ONNX Runtime's threads", "p50 ms", "p95 ms", "p50 ratio to spinning",
            "p95 ratio to spinning"]  # fmt: skip
    body = f"""## ONNX Runtime's threads: spinning or sleeping between calls

`python benchmarks/onnx_spin.py --questions {args.questions}` on {machine()}, commit {revision},
{datetime.now():%Y-%m-%d}. LoCoMo's full users, {len(asked)} of their questions, each store's
query embedded in every call (cache off); the four take turns in blocks of 25 after a warm-up.
The default (issue 36): threads sleep (`session.intra_op.allow_spinning` 0), since on 2 cores
spinning threads take the cores the database backend needs.

{table(head, rows)}

The default path against semantic-only, per choice:

{table(["ONNX Runtime's threads", "default / semantic p50", "default / semantic p95"], ratio)}
"""
    publish("onnx-spin", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
