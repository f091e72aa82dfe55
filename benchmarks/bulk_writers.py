"""Bulk import with one writer against two (`add_turns(writers=...)`), as ratios in one run.

    python benchmarks/bulk_writers.py [--rows 1000000] [--extra 50000] [--pairs 3]

Loads --rows memories the way the latency benchmark does (its skewed users, LoCoMo turn pairs
as texts, clustered synthetic vectors; batches of 5,000), then imports --extra new turns at a
time with writers=1 and writers=2 in alternation (ABBAAB...), each import into the table as
the ones before left it. Prints the rate of each import, the medians and the ratio, and writes
docs/benchmarks.md (section "bulk-writers"). Decision 0010 has the reasoning.
"""

from __future__ import annotations

import time

import numpy as np
from harness.corpus import conversation_pairs
from harness.data import BATCH, Data, make_data, turns
from harness.db import fresh_database
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run

from recall.config import Settings
from recall.store import MemoryStore


async def import_rate(store: MemoryStore, data: Data, tag: str, writers: int) -> float:
    """Turns per second of an import of `data` (`tag` makes every text new) with `writers`."""
    count = sum(len(t) for t in data.texts.values())
    t0 = time.perf_counter()
    await store.add_turns(turns(data, tag), batch_size=BATCH, writers=writers)
    return count / (time.perf_counter() - t0)


async def main() -> None:
    """Load, then import the extra turns with one and two writers in turns; print and write."""
    options = parser(__doc__, data=True)
    options.add_argument("--rows", type=int, default=1_000_000)
    options.add_argument("--extra", type=int, default=50_000)
    options.add_argument("--pairs", type=int, default=3)
    args = options.parse_args()
    revision = git_revision()
    rng = np.random.default_rng(args.rows)
    url = await fresh_database("recall_bench_bulk_writers")
    pairs = conversation_pairs(args.data)
    rates: dict[int, list[float]] = {1: [], 2: []}
    async with MemoryStore.connect(Settings(database_url=url, embedding_cache_ttl=0)) as store:
        base = await make_data(args.rows, False, store, rng, pairs)
        load = await import_rate(store, base, "", 2)
        print(f"load of {args.rows:,} rows: {load:,.0f} turns/s (writers=2)", flush=True)
        for k in range(args.pairs):
            for writers in (1, 2) if k % 2 == 0 else (2, 1):
                extra = await make_data(args.extra, False, store, rng, pairs)
                rate = await import_rate(store, extra, f" [{k}/{writers}]", writers)
                rates[writers].append(rate)
                print(f"pair {k}, writers={writers}: {rate:,.0f} turns/s", flush=True)
    rows: list[list[object]] = [
        [k, f"{one:,.0f}", f"{two:,.0f}", f"{two / one:.2f}"]
        for k, (one, two) in enumerate(zip(rates[1], rates[2], strict=True))
    ]
    one, two = float(np.median(rates[1])), float(np.median(rates[2]))
    rows.append(["median", f"{one:,.0f}", f"{two:,.0f}", f"{two / one:.2f}"])
    headers = ["pair", "writers=1 turns/s", "writers=2 turns/s", "ratio 2/1"]
    body = f"""## Bulk import: one writer against two

`python benchmarks/bulk_writers.py --rows {args.rows} --extra {args.extra} --pairs {args.pairs}`
on {machine()}, commit {revision}. After a load of {args.rows:,} rows ({load:,.0f}
turns/s with two writers), imports of {args.extra:,} new turns (precomputed vectors, batches
of {BATCH:,}) alternate between one and two writers, into the same growing table.

{table(headers, rows)}
"""
    publish("bulk-writers", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
