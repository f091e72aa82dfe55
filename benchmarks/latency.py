"""Latency, recall and throughput at 10k / 100k / 1M memories, side by side with LangGraph's
AsyncPostgresStore (pgvector HNSW, cosine) on the same data and vectors.

    python benchmarks/latency.py [--sizes 10000,100000,1000000] [--queries 500]

Users are skewed: most hold 10-1,000 memories (log-uniform), a few hold min(50,000, N/4).
Each memory's texts are a real turn pair from LoCoMo (--data; cycled, numbered so that no two
of a user's memories are equal), so rows have a chat's size on disk. Vectors are real
all-MiniLM-L6-v2 embeddings of those texts up to --real-upto rows, clustered synthetic unit
vectors above (the table says which). Everything is loaded through `MemoryStore.add_turns`.
Each query list runs twice: percentiles are over the second pass (--queries queries, caches
warm); the first pass, the first touch of each user's pages, is reported on its own row. In
the second pass our searches and LangGraph's take turns in blocks of 25 queries, so the
ours/theirs ratio is measured at the same time, not minutes apart.
Writes docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fresh_database, git_revision, machine, publish, rotated, run, settle, table
from langchain_core.messages import HumanMessage
from locomo import load as load_locomo

from recall.config import Settings
from recall.db.pool import connect_once
from recall.nodes import create_retrieve_memories_node
from recall.store import MemoryStore

DIMS = 384
TOPICS = ["hiking", "cooking", "the dog", "work", "a trip", "music", "the garden", "books",
          "health", "family", "movies", "coffee", "running", "painting", "the car"]  # fmt: skip


LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"
BLOCK = 25  # searches of one system before the other's, in the compared (warm) pass


@dataclass
class Data:
    users: dict[str, int]
    texts: dict[str, list[tuple[str, str]]]  # (user_message, ai_response) per memory
    vectors: dict[str, np.ndarray]
    ids: dict[str, list[str]] = field(default_factory=dict)
    real: bool = False


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def typical_sizes(total: int, rng: np.random.Generator) -> list[int]:
    """Sizes of typical users (10-1,000 memories, log-uniform) that add up to `total`."""
    sizes: list[int] = []
    while total > 0:
        size = int(min(total, np.exp(rng.uniform(np.log(10), np.log(1000)))))
        sizes.append(size)
        total -= size
    return sizes


def skewed_users(n: int, rng: np.random.Generator) -> dict[str, int]:
    big = min(50_000, n // 4)
    n_big = max(1, (n // 4) // big)
    users = {f"large-{i}": big for i in range(n_big)}
    sizes = typical_sizes(n - big * n_big, rng)
    users.update({f"user-{i}": size for i, size in enumerate(sizes)})
    return users


def conversation_pairs(path: Path) -> list[tuple[str, str]]:
    """The LoCoMo turn pairs: realistic chat texts (about 300 characters a pair)."""
    return [(t["user_message"], t["ai_response"]) for t in load_locomo(path).turns]


async def make_data(
    n: int, real: bool, store: MemoryStore, rng: np.random.Generator, pairs: list[tuple[str, str]]
) -> Data:
    users = skewed_users(n, rng)
    centers = unit(rng.normal(size=(300, DIMS)))
    texts, vectors = {}, {}
    for user, size in users.items():
        start = int(rng.integers(len(pairs)))
        picked = (pairs[(start + j) % len(pairs)] for j in range(size))
        texts[user] = [(f"{said} ({j})", replied) for j, (said, replied) in enumerate(picked)]
        if not real:
            picks = centers[rng.integers(0, len(centers), size)]
            vectors[user] = unit(picks + 0.45 * rng.normal(size=(size, DIMS)) / np.sqrt(DIMS / 8))
    if real:
        for user in users:
            embedded = await store.embedder.embed_documents([f"{a}\n{b}" for a, b in texts[user]])
            vectors[user] = np.array(embedded, dtype=np.float32)
    return Data(users, texts, vectors, real=real)


async def load(store: MemoryStore, data: Data) -> None:
    """Every user's turns in one import through `MemoryStore.add_turns`, user by user as in a
    file (as `recall import` does); each memory's id goes to `data.ids`."""
    ids = iter(await store.add_turns(
        ({"user_id": user, "user_message": a, "ai_response": b, "embedding": v}
         for user, texts in data.texts.items()
         for (a, b), v in zip(texts, data.vectors[user], strict=True)),
        batch_size=5000,
    ))  # fmt: skip
    for user, texts in data.texts.items():
        data.ids[user] = [next(ids) for _ in texts]


async def indexed_database(
    name: str, rows: int, rng: np.random.Generator
) -> tuple[str, Data, list[str]]:
    """A fresh database `name` with `rows` memories of the skewed users (LoCoMo texts,
    clustered synthetic vectors), every large user's HNSW index built (`MemoryStore.optimize`),
    vacuumed and checkpointed. Returns its URL, the data and the users with an index."""
    url = await fresh_database(name)
    async with MemoryStore.connect(Settings(database_url=url, embedding_cache_ttl=0)) as store:
        data = await make_data(rows, False, store, rng, conversation_pairs(LOCOMO))
        await load(store, data)
        indexed = await store.optimize()
    await settle(url)
    return url, data, indexed


def pct(values: list[float]) -> tuple[str, str, str]:
    return tuple(f"{np.percentile(values, p):.2f}" for p in (50, 95, 99))  # type: ignore[return-value]


async def timed(calls: list[Callable[[], Awaitable[Any]]]) -> tuple[list[float], list[Any]]:
    times, results = [], []
    for call in calls:
        t0 = time.perf_counter()
        results.append(await call())
        times.append((time.perf_counter() - t0) * 1000)
    return times, results


async def timed_warm(
    calls: list[Callable[[], Awaitable[Any]]],
) -> tuple[list[float], list[float], list[Any]]:
    """Each call twice: the first pass (the first touch of each user's pages) warms the
    caches and is reported apart; the second pass is the measurement."""
    first, _ = await timed(calls)
    warm, results = await timed(calls)
    return first, warm, results


async def timed_interleaved(
    calls: dict[str, list[Callable[[], Awaitable[Any]]]], block: int = BLOCK
) -> dict[str, tuple[list[float], list[Any]]]:
    """The systems' call lists (of equal length, the same queries) in alternating blocks of
    `block`, the order of the systems turning with each block, so that a change in the
    machine's speed during the run falls on all of them alike."""
    names = list(calls)
    if len({len(system_calls) for system_calls in calls.values()}) > 1:
        raise ValueError("every system needs the same number of calls (the same queries)")
    out: dict[str, tuple[list[float], list[Any]]] = {name: ([], []) for name in names}
    for b, start in enumerate(range(0, len(calls[names[0]]), block)):
        for name in rotated(names, b):
            times, results = await timed(calls[name][start : start + block])
            out[name][0].extend(times)
            out[name][1].extend(results)
    return out


def exact_top(data: Data, user: str, q: np.ndarray, k: int = 3) -> set[str]:
    sims = data.vectors[user] @ q
    return {data.ids[user][j] for j in np.argsort(-sims)[:k]}


def queries_for(
    data: Data, users: list[str], count: int, rng: np.random.Generator
) -> list[tuple[str, np.ndarray]]:
    out = []
    for i in range(count):
        user = users[i % len(users)]
        base = data.vectors[user][rng.integers(len(data.vectors[user]))]
        out.append((user, unit((base + 0.6 * unit(rng.normal(size=(1, DIMS)))[0])[None, :])[0]))
    return out


def our_call(store: MemoryStore, user: str, q: np.ndarray) -> Callable[[], Awaitable[Any]]:
    """One semantic search of ours, limit 3, no threshold, the query vector given."""
    return lambda: store.search(
        user, "q", limit=3, similarity_threshold=0.0, mode="semantic", query_vector=q
    )


@dataclass(frozen=True, slots=True)
class LangGraphSide:
    """LangGraph's AsyncPostgresStore loaded with the same memories and vectors."""

    store: Any
    lookup: dict[str, list[float]]  # text -> vector: its `embed` returns ours, no model
    load_s: float

    def calls(
        self, label: str, qs: list[tuple[str, np.ndarray]]
    ) -> list[Callable[[], Awaitable[Any]]]:
        """One `asearch` (limit 3) per query, its vector looked up by a key of its own."""
        out = []
        for n, (user, q) in enumerate(qs):
            key = f"query {label} {n}"
            self.lookup[key] = q.tolist()
            out.append(
                lambda user=user, key=key: self.store.asearch(
                    ("memories", user), query=key, limit=3
                )
            )
        return out


@asynccontextmanager
async def langgraph_side(url: str, data: Data) -> AsyncIterator[LangGraphSide]:
    """LangGraph's store on the same database, loaded with `data` through `abatch` (HNSW,
    cosine, m 16, ef_construction 200), vacuumed and checkpointed; open until the block ends."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres.aio import AsyncPostgresStore

    lookup: dict[str, list[float]] = {}

    async def embed(texts: list[str]) -> list[list[float]]:
        return [lookup[t] for t in texts]

    index = {"dims": DIMS, "embed": embed, "fields": ["text"], "distance_type": "cosine",
             "ann_index_config": {"kind": "hnsw", "m": 16, "ef_construction": 200}}  # fmt: skip
    async with AsyncPostgresStore.from_conn_string(url, index=index) as lg:  # type: ignore[arg-type]
        await lg.setup()
        t0 = time.perf_counter()
        ops: list[PutOp] = []
        for user, texts in data.texts.items():
            for j, (said, replied) in enumerate(texts):
                text = f"{said}\n{replied}"
                lookup[text] = data.vectors[user][j].tolist()
                ops.append(PutOp(("memories", user), data.ids[user][j], {"text": text}))
                if len(ops) >= 2000:
                    await lg.abatch(ops)
                    ops = []
        if ops:
            await lg.abatch(ops)
        load_s = time.perf_counter() - t0
        async with lg.conn.cursor() as cur:  # the steady state autovacuum reaches, before timing
            await cur.execute("VACUUM (ANALYZE) store")
            await cur.execute("VACUUM (ANALYZE) store_vectors")
            await cur.execute("CHECKPOINT")  # the load's dirty pages written before, not during
        yield LangGraphSide(lg, lookup, load_s)


async def run_size(n: int, args: argparse.Namespace) -> list[list[object]]:
    rng = np.random.default_rng(n)
    url = await fresh_database(f"recall_bench_latency_{n}")
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    rows: list[list[object]] = []
    async with MemoryStore.connect(settings) as store:
        await store.warm_up()
        pairs = conversation_pairs(args.data)
        data = await make_data(n, n <= args.real_upto, store, rng, pairs)
        kind = "real MiniLM" if data.real else "synthetic clustered"
        t0 = time.perf_counter()
        await load(store, data)
        import_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        indexed = await store.optimize()
        hnsw_s = time.perf_counter() - t0
        await settle(url)
        owner = await connect_once(url)
        try:
            cur = await owner.execute("SELECT pg_total_relation_size('recall.memories')")
            size_row = await cur.fetchone()
        finally:
            await owner.close()
        bytes_per = int(size_row[0]) / n if size_row else 0
        typical = [u for u, s in data.users.items() if not u.startswith("large")]
        large = [u for u in data.users if u.startswith("large")]
        qs = {
            "typical": queries_for(data, typical, args.queries, rng),
            "largest": queries_for(data, large, args.queries, rng),
        }
        results: dict[str, Any] = {}
        lg: dict[str, Any] | None = None
        async with AsyncExitStack() as stack:
            # LangGraph's store holds the same memories before either system is timed
            side = (
                await stack.enter_async_context(langgraph_side(url, data))
                if n <= args.langgraph_upto
                else None
            )
            if side is not None:
                lg = {"load_s": side.load_s}
            for label, items in qs.items():
                by_system: dict[str, list[Callable[[], Awaitable[Any]]]] = {
                    "ours": [our_call(store, u, q) for u, q in items]
                }
                if side is not None:
                    by_system["theirs"] = side.calls(label, items)
                # the first pass, each system's first touch of each user's pages, system by
                # system; then the measured pass with the systems taking turns in blocks
                first = {
                    name: (await timed(system_calls))[0] for name, system_calls in by_system.items()
                }
                warm = await timed_interleaved(by_system)
                truth = [exact_top(data, u, q) for u, q in items]  # once, for both systems
                times, found = warm["ours"]
                hits = sum(
                    len({m.id for m in res} & top) for res, top in zip(found, truth, strict=True)
                )
                results[label] = (pct(times), hits / (3 * len(items)), pct(first["ours"]))
                if lg is not None:
                    their_times, their_found = warm["theirs"]
                    their_hits = sum(
                        len({r.key for r in res} & top)
                        for res, top in zip(their_found, truth, strict=True)
                    )
                    short = sum(len(res) < 3 for res in their_found)
                    lg[label] = (pct(their_times), their_hits / (3 * len(items)), short,
                                 pct(first["theirs"]))  # fmt: skip

        def hybrid_call(u: str, q: np.ndarray) -> Callable[[], Awaitable[Any]]:
            return lambda: store.search(
                u, "hiking and coffee", similarity_threshold=0.0, mode="hybrid", query_vector=q
            )

        hyb_calls = [hybrid_call(u, q) for u, q in qs["typical"]]
        _first, hyb_times, _ = await timed_warm(hyb_calls)
        # the node end to end, query embedding included, cache off
        node_rows = []
        for mode in ("semantic", "hybrid"):
            node = create_retrieve_memories_node(store, mode=mode, settings=settings)  # type: ignore[arg-type]

            def node_call(u: str, i: int, node: Any = node) -> Callable[[], Awaitable[Any]]:
                text = f"what did we say about {TOPICS[i % len(TOPICS)]} {i}?"
                config = {"configurable": {"langgraph_auth_user": {"identity": u}}}
                return lambda: node({"messages": [HumanMessage(text)]}, config)

            calls = [node_call(u, i) for i, (u, _q) in enumerate(qs["typical"])]
            _first, times, _ = await timed_warm(calls)
            node_rows.append((mode, pct(times)))

        # writes
        def write_call(i: int) -> Callable[[], Awaitable[Any]]:
            said, replied = pairs[i % len(pairs)]
            return lambda: store.add_turn("writer", f"{said} ({i})", replied)

        write_calls = [write_call(i) for i in range(300)]
        write_times, _ = await timed(write_calls)  # the model is warm; no re-writes
        batch = [
            {"user_id": "bulk-embed", "user_message": f"{said} ({i})", "ai_response": replied}
            for i, (said, replied) in enumerate(pairs[k % len(pairs)] for k in range(2000))
        ]
        t0 = time.perf_counter()
        await store.add_turns(batch, batch_size=1000)
        embed_rate = len(batch) / (time.perf_counter() - t0)
        # concurrency
        conc = []
        for clients in (1, 8, 32):
            per_client = max(20, 400 // clients)
            lat: list[float] = []

            async def client(c: int, per_client: int = per_client, lat: list[float] = lat) -> None:
                for k in range(per_client):
                    u, q = qs["typical"][(c * per_client + k) % len(qs["typical"])]
                    t = time.perf_counter()
                    await our_call(store, u, q)()
                    lat.append((time.perf_counter() - t) * 1000)

            t0 = time.perf_counter()
            await asyncio.gather(*(client(c) for c in range(clients)))
            wall = time.perf_counter() - t0
            conc.append((clients, len(lat) / wall, np.percentile(lat, 95)))

    label = f"{n:,} ({kind})"
    for key in ("typical", "largest"):
        (p50, p95, p99), rec, (f50, f95, f99) = results[key]
        row: list[object] = [label, f"db search, {key} user", p50, p95, p99, f"{rec:.3f}"]
        cold: list[object] = [label, f"db search, {key} user, first touch", f50, f95, f99, "-"]
        if lg is not None:
            (l50, l95, l99), lrec, short, (c50, c95, c99) = lg[key]
            row += [
                f"{l50} / {l95} / {l99}",
                f"{lrec:.3f} ({short} short)",
                f"{float(p95) / float(l95):.3f}",
            ]
            cold += [f"{c50} / {c95} / {c99}", "-", f"{float(f95) / float(c95):.3f}"]
        else:
            row += ["-", "-", "-"]
            cold += ["-", "-", "-"]
        rows += [row, cold]
    rows.append([label, "db search, hybrid, typical", *pct(hyb_times), "-", "-", "-", "-"])
    for mode, (p50, p95, p99) in node_rows:
        rows.append(
            [label, f"node end to end ({mode}, embedding)", p50, p95, p99, "-", "-", "-", "-"]
        )
    w50, w95, w99 = pct(write_times)
    rows.append([label, "add_turn (embedding included)", w50, w95, w99, "-", "-", "-", "-"])
    extra = (f"bulk import {n / import_s:,.0f} turns/s precomputed, {embed_rate:,.0f} turns/s "
             f"with embedding; HNSW for {len(indexed)} large users {hnsw_s:.1f} s; "
             f"{bytes_per:,.0f} bytes per memory (table + indexes)")  # fmt: skip
    if lg is not None:
        extra += f"; LangGraph store load {n / lg['load_s']:,.0f} items/s"
    conc_text = ", ".join(f"{c} clients: {tp:,.0f} q/s, p95 {p95:.2f} ms" for c, tp, p95 in conc)
    rows.append([label, "writes and size", extra, "", "", "", "", "", ""])
    rows.append([label, "concurrency (db search)", conc_text, "", "", "", "", "", ""])
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--real-upto", type=int, default=10_000)
    parser.add_argument("--langgraph-upto", type=int, default=100_000)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo JSON (the texts)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    revision = git_revision()  # the code that runs, whatever changes during the run
    rows = []
    for n in sizes:
        started = time.perf_counter()
        rows += await run_size(n, args)
        print(f"size {n}: {time.perf_counter() - started:.0f} s", flush=True)
    headers = ["rows", "measure", "p50 ms", "p95 ms", "p99 ms", "recall@3",
               "LangGraph p50/p95/p99 ms", "LangGraph recall@3", "p95 ours/theirs"]  # fmt: skip
    body = f"""## Latency at scale, side by side with LangGraph's AsyncPostgresStore

`python benchmarks/latency.py --sizes {args.sizes} --queries {args.queries}` on {machine()},
commit {revision}. recall@3 is against an exact (numpy) search over the user's own
memories; "short" counts LangGraph queries that returned fewer than 3 results. Same database,
same vectors, same users and queries for both systems. Every query list runs twice; the
figures are the second pass, in which the two systems take turns in blocks of {BLOCK} queries
(the order turning each block), and the "first touch" rows give the first pass (each user's
pages read for the first time: from disk or the OS cache), system by system. Memories hold real
LoCoMo turn pairs as texts; both systems' tables are vacuumed and analyzed after loading,
and a CHECKPOINT writes the load's dirty pages before each system's timings.

{table(headers, rows)}
"""
    publish("latency", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
