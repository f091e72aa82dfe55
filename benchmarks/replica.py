"""A streaming replica: how far behind the standby is, and what reading one's own writes costs.

    python benchmarks/replica.py [--writes 300] [--writers 16]

Makes a throw-away primary and a standby with `pg_basebackup -R` (harness/standby.py: the
embedded server's PostgreSQL 18, on Unix sockets, fsync off), with the fake 64-dim embedder so
only the database counts. Lag: after each of --writes turns (`add_turn`, one at a time) the
time until the standby has replayed the primary's WAL end, polled on an open connection;
once alone and once beside --writers users writing turns as fast as they can. Cost: `add_turn`
with a replica (it then reads the primary's WAL end) against without, and a search right after
the user's own write (the store checks the standby's replay position first, and reads the
primary while it is behind) against a search with nothing to check. Writes docs/benchmarks.md
(section "replica"). Decision 0021.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from harness.report import git_revision, machine, publish, table
from harness.run import parser, run
from harness.standby import StreamingPair, missing_tools
from harness.timing import percentiles, rotated

from recall.config import Settings
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

TEXT = "I adopted a dog named Max and we walk by the river every morning"


async def lag_ms(pair: StreamingPair, store: MemoryStore, writes: int) -> list[float]:
    """Per write: ms from the commit's return until the standby has replayed it."""
    primary = await pair.admin(pair.primary_dir)
    standby = await pair.admin(pair.standby_dir)
    user = f"lag-{uuid.uuid4().hex[:8]}"
    out = []
    try:
        for n in range(writes):
            await store.add_turn(user, f"{TEXT} ({n})", "Lovely!")
            done = time.perf_counter()
            cur = await primary.execute(b"SELECT pg_current_wal_insert_lsn()::text")
            row = await cur.fetchone()
            assert row is not None
            while True:
                cur = await standby.execute(
                    b"SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [row[0]]
                )
                seen = await cur.fetchone()
                if seen is not None and seen[0]:
                    break
            out.append((time.perf_counter() - done) * 1000)
    finally:
        await primary.close()
        await standby.close()
    return out


async def background_writers(store: MemoryStore, writers: int, stop: asyncio.Event) -> int:
    """`writers` users each adding turns back to back until `stop`; the turns written."""
    written = 0

    async def writer(k: int) -> None:
        nonlocal written
        n = 0
        while not stop.is_set():
            await store.add_turn(f"load-{k}", f"{TEXT} ({n})", "Lovely!")
            n += 1
            written += 1

    await asyncio.gather(*(writer(k) for k in range(writers)))
    return written


async def timed_ms(call: Any) -> float:
    t0 = time.perf_counter()
    await call
    return (time.perf_counter() - t0) * 1000


async def costs(replica: MemoryStore, alone: MemoryStore, writes: int) -> list[list[object]]:
    """Rows: add_turn with and without a replica; searches after one's own write and without."""
    user = f"cost-{uuid.uuid4().hex[:8]}"
    add_with: list[float] = []
    add_without: list[float] = []
    after_write: list[float] = []
    plain: list[float] = []
    on_primary = 0
    for n in range(writes):
        pair_ = [
            (add_with, replica.add_turn(user, f"{TEXT} [{n}]", "Lovely!")),
            (add_without, alone.add_turn(user, f"{TEXT} <{n}>", "Lovely!")),
        ]
        for times, call in rotated(pair_, n):  # each goes first every other time
            times.append(await timed_ms(call))
        # a search right after the user's write: the standby's replay position is checked
        await replica.add_turn(user, f"{TEXT} {{{n}}}", "Lovely!")
        after_write.append(await timed_ms(replica.search(user, "my dog by the river")))
        on_primary += user in replica.core.fences  # still fenced: the standby was behind
        replica.core.fences.pop(user, None)
        plain.append(await timed_ms(replica.search(user, "my dog by the river")))

    def row(name: str, values: list[float], where: str) -> list[object]:
        p50, p95, _ = percentiles(values)
        return [name, f"{p50:.2f}", f"{p95:.2f}", where]

    return [
        row("add_turn, primary only", add_without, "primary"),
        row("add_turn, with a replica (+ WAL end read)", add_with, "primary"),
        row("search, nothing to check", plain, "standby"),
        row(
            "search right after the user's own write",
            after_write,
            f"standby {writes - on_primary}, primary {on_primary}",
        ),
    ]


async def main() -> None:
    """Make the pair, measure, print and write."""
    options = parser(__doc__)
    options.add_argument("--writes", type=int, default=300)
    options.add_argument("--writers", type=int, default=16)
    args = options.parse_args()
    reason = missing_tools()
    if reason is not None:
        raise SystemExit(f"no streaming replica can be made: {reason}")
    revision = git_revision()
    pair = StreamingPair()
    pair.start()
    try:
        embeddings = FakeEmbeddings(64)
        primary_only = Settings(database_url=pair.primary_url, embedding_cache_ttl=0)
        replica = Settings(
            database_url=pair.primary_url,
            read_database_url=pair.standby_url,
            embedding_cache_ttl=0,
        )
        async with MemoryStore.connect(primary_only, embeddings=embeddings) as alone:
            await pair.wait_replayed()
            async with MemoryStore.connect(replica, embeddings=embeddings) as store:
                idle = await lag_ms(pair, alone, args.writes)
                stop = asyncio.Event()
                load = asyncio.create_task(background_writers(alone, args.writers, stop))
                started = time.perf_counter()
                busy = await lag_ms(pair, alone, args.writes)
                stop.set()
                rate = await load / (time.perf_counter() - started)
                cost_rows = await costs(store, alone, args.writes)
    finally:
        pair.close()
    lag_rows = [
        ["one writer", *(f"{v:.2f}" for v in percentiles(idle)), f"{max(idle):.2f}"],
        [
            f"beside {args.writers} writers ({rate:,.0f} turns/s)",
            *(f"{v:.2f}" for v in percentiles(busy)),
            f"{max(busy):.2f}",
        ],
    ]
    body = f"""## Streaming replica: lag and reading one's own writes

`python benchmarks/replica.py --writes {args.writes} --writers {args.writers}` on {machine()},
commit {revision}. A primary and its standby (`pg_basebackup -R`, PostgreSQL 18 of the
embedded server, Unix sockets, fsync off) on this one machine, the fake 64-dim embedder.
Decision 0021.

Replication lag: ms from `add_turn`'s return until the standby has replayed the primary's WAL
end, over {args.writes} writes.

{table(["load", "p50 ms", "p95 ms", "p99 ms", "max ms"], lag_rows)}

Reading one's own writes: the store reads the primary's WAL end after each write (one more
round trip) and checks the standby's replay position before the user's next read (one more,
on the standby, until it has caught up); a read whose standby is behind goes to the primary.

{table(["call", "p50 ms", "p95 ms", "served by"], cost_rows)}
"""
    publish("replica", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
