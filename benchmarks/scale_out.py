"""One node against a Citus cluster: the same users and queries on each (docs/scaling.md).

    python benchmarks/scale_out.py [--rows 20000] [--queries 1000] [--writes 300]

Needs root (the nodes run as the `postgres` OS user) and Citus built (`scripts/citus-cluster
build`, which `make test-citus` runs). Starts its own servers with scripts/citus-cluster in a
temporary folder and stops them at the end: one PostgreSQL 15 (a database without citus: the
plain schema), and a Citus coordinator with two workers, later three. On each: --rows memories
of the latency benchmark's skewed users (LoCoMo texts, clustered synthetic 384-dim vectors)
imported with `add_turns` (rate: memories/s), VACUUM and CHECKPOINT, then from one client the
same --queries semantic searches of typical users (limit 3, the query vector given: the
database path only) and --writes `add_turn` calls (the deterministic fake embedder: the
database path only), each warmed by a first pass that is not counted. On the cluster, a third
worker is then added and the shards rebalanced (the time it takes), and the searches and writes
timed again. Writes docs/scaling.md (section "scale-out").
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from harness.corpus import conversation_pairs
from harness.data import BATCH, DIMS, Data, make_data, queries_for, search_call, turns
from harness.report import ROOT, git_revision, machine, publish, table
from harness.run import parser, run
from harness.timing import percentiles
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from recall.config import Settings
from recall.db.pool import connect_once
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

SCRIPT = ROOT / "scripts" / "citus-cluster"


async def cluster(*args: str) -> str:
    """Run scripts/citus-cluster; return its output."""
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT), *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"scripts/citus-cluster {' '.join(args)} failed: {err.decode()}")
    return out.decode().strip()


def env(folder: Path) -> dict[str, str]:
    """The URLs a cluster folder's `env` file lists."""
    pairs = (line.split("=", 1) for line in (folder / "env").read_text().splitlines())
    return dict(pairs)


async def execute(url: str, *statements: sql.Composed | bytes) -> None:
    """Run statements on one autocommit connection."""
    conn = await connect_once(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def database(server: str, name: str, workers: list[str]) -> str:
    """Database `name` on the server (and on each worker, with citus, added to the coordinator
    when there are workers); its URL."""
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    for url in [server, *workers]:
        await execute(url, create)
    url = make_conninfo(server, dbname=name)
    if workers:
        extensions = (b"CREATE EXTENSION citus", b"CREATE EXTENSION vector")
        for node in [url, *(make_conninfo(w, dbname=name) for w in workers)]:
            await execute(node, *extensions)
        port = int(str(conninfo_to_dict(server)["port"]))
        await execute(url, sql.SQL("SELECT citus_set_coordinator_host('localhost', {})").format(
            sql.Literal(port)
        ))  # fmt: skip
        for worker in workers:
            await add_node(url, worker)
    return url


async def add_node(url: str, worker: str) -> None:
    """Add `worker` (its maintenance URL) to `url`'s database (which it must hold)."""
    port = int(str(conninfo_to_dict(worker)["port"]))
    await execute(url, sql.SQL("SELECT citus_add_node('localhost', {})").format(sql.Literal(port)))


async def timed_phase(
    store: MemoryStore, queries: list[tuple[str, np.ndarray]], writes: int, tag: str
) -> tuple[list[float], list[float]]:
    """Search and add_turn latencies (ms) from one client, each after an uncounted pass."""
    searches: list[float] = []
    for counted in (False, True):
        for user, vector in queries:
            t0 = time.perf_counter()
            await search_call(store, user, vector)()
            if counted:
                searches.append((time.perf_counter() - t0) * 1000)
    adds: list[float] = []
    users = [u for u, _ in queries]
    for counted in (False, True):
        for i in range(writes):
            t0 = time.perf_counter()
            await store.add_turn(users[i % len(users)], f"{tag} {counted} {i}", "noted")
            if counted:
                adds.append((time.perf_counter() - t0) * 1000)
    return searches, adds


async def measure(
    url: str, data: Data, queries: list[tuple[str, np.ndarray]], writes: int
) -> tuple[MemoryStore, float, list[float], list[float]]:
    """Load `data` into `url` and time it; returns the open store, memories/s and latencies."""
    store = await MemoryStore.connect(
        Settings(database_url=url, embedding_cache_ttl=0), embeddings=FakeEmbeddings(DIMS)
    ).__aenter__()
    t0 = time.perf_counter()
    await store.add_turns(turns(data), batch_size=BATCH)
    rate = sum(data.users.values()) / (time.perf_counter() - t0)
    await execute(url, b"VACUUM (ANALYZE) recall.memories", b"CHECKPOINT")
    searches, adds = await timed_phase(store, queries, writes, "first")
    return store, rate, searches, adds


HEADERS = ["setup", "import memories/s", "search p50 ms", "search p95 ms", "add_turn p50 ms",
           "add_turn p95 ms", "note"]  # fmt: skip


def row(
    setup: str, rate: float | str, searches: list[float], adds: list[float], extra: str
) -> list[str]:
    """One line of the table."""
    s50, s95 = percentiles(searches, (50, 95))
    a50, a95 = percentiles(adds, (50, 95))
    shown = rate if isinstance(rate, str) else f"{rate:,.0f}"
    return [setup, shown, f"{s50:.2f}", f"{s95:.2f}", f"{a50:.2f}", f"{a95:.2f}", extra]


async def main() -> None:
    """Start the servers, load and time each, print the table and write it."""
    options = parser(__doc__, data=True)
    options.add_argument("--rows", type=int, default=20_000)
    options.add_argument("--queries", type=int, default=1000)
    options.add_argument("--writes", type=int, default=300)
    args = options.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the nodes run as the postgres OS user (runuser)")
    revision = git_revision()
    await cluster("build")
    rng = np.random.default_rng(7)
    pairs = conversation_pairs(args.data)
    folder = Path(tempfile.mkdtemp(prefix="recall-scale-out."))
    await asyncio.to_thread(shutil.chown, folder, "postgres")  # the nodes run as that OS user
    rows = []
    try:
        single, multi = folder / "single", folder / "cluster"
        await cluster("start", str(single), "0")
        await cluster("start", str(multi), "2")
        single_url = await database(env(single)["RECALL_TEST_DATABASE_URL"], "scale_out", [])
        workers = env(multi)["RECALL_TEST_CITUS_WORKERS"].split(",")
        multi_url = await database(env(multi)["RECALL_TEST_DATABASE_URL"], "scale_out", workers)
        async with MemoryStore.connect(
            Settings(database_url=single_url), embeddings=FakeEmbeddings(DIMS)
        ) as probe:
            data = await make_data(args.rows, False, probe, rng, pairs)
        queries = queries_for(data, data.typical(), args.queries, rng)

        store, rate, searches, adds = await measure(single_url, data, queries, args.writes)
        await store.close()
        rows.append(row("1 node (PostgreSQL 15)", rate, searches, adds, ""))

        store, rate, searches, adds = await measure(multi_url, data, queries, args.writes)
        rows.append(row("Citus: coordinator + 2 workers", rate, searches, adds, ""))
        port = (await cluster("add-worker", str(multi))).splitlines()[-1]
        worker = f"postgresql://postgres@localhost:{int(port)}/postgres"
        await execute(worker, b"CREATE DATABASE scale_out")
        await execute(
            make_conninfo(worker, dbname="scale_out"),
            b"CREATE EXTENSION citus",
            b"CREATE EXTENSION vector",
        )
        await add_node(multi_url, worker)
        t0 = time.perf_counter()
        await execute(multi_url, b"SELECT rebalance_table_shards(shard_transfer_mode => 'auto')")
        moved = time.perf_counter() - t0
        searches, adds = await timed_phase(store, queries, args.writes, "after")
        await store.close()
        rows.append(
            row("Citus: + 1 worker, rebalanced", "-", searches, adds, f"rebalance {moved:.0f} s")
        )
    finally:
        await cluster("stop", str(folder / "single"))
        await cluster("stop", str(folder / "cluster"))
        shutil.rmtree(folder, ignore_errors=True)
    body = "\n".join(
        [
            "<!-- written by benchmarks/scale_out.py -->",
            f"{args.rows:,} memories of skewed users, {args.queries} searches of typical users"
            f" and {args.writes} add_turn calls from one client, all nodes on one machine:"
            f" {machine()}; {revision}.",
            "",
            table(HEADERS, rows),
        ]
    )
    publish("scale-out", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
