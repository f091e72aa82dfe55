"""`benchmarks/basestore.py`'s phases after the searches: puts into the largest namespace, and
the cold window after a bulk load, each with RecallStore and the peer in turns.

Puts: --puts single `aput`s of new items into the largest namespace in each store, in blocks
of 25 taking turns; then RecallStore's index over every namespace is dropped (if it was built)
and the same number of puts is timed again: what holding a large namespace's vectors in the
wide index costs a write.
Cold window: a fresh namespace ("fresh", "kb") of --cold items bulk-loaded through `abatch`
(2,000 puts a batch) into the peer, then into RecallStore, with no VACUUM or wait, then searched
in turns with real questions for --cold-seconds: the time a user who loads, then searches,
meets. RecallStore's own index build starts during its load (a write past the threshold)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from langgraph.store.base import BaseStore, PutOp
from psycopg import sql

from recall import RecallStore
from recall.db.pool import connect_once
from recall.db.storeindex import EVERY_NAMESPACE, store_index_name

from .items import Items
from .timing import BLOCK, Call, percentiles, rotated, timed, timed_interleaved

OURS, PEER = "RecallStore", "AsyncPostgresStore"
COLD_NS = ("fresh", "kb")
BATCH = 2000
K = 10


@dataclass
class PutCosts:
    """Single puts' times (ms) per store, with or without our index over every namespace."""

    wide_index: bool
    times: dict[str, list[float]]


@dataclass
class ColdWindow:
    """The cold window: load seconds per store, and each search's (seconds since our load
    ended, ms, recall@10) per store; when our namespace's index was first used."""

    items: int
    load_s: dict[str, float]
    searches: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    indexed_at: float | None = None


async def _drop_wide(url: str, dims: int) -> bool:
    """Drop RecallStore's index over every namespace (and its record); whether there was one."""
    conn = await connect_once(url)
    try:
        name = store_index_name(EVERY_NAMESPACE, dims)
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"recall.{name}",))
        row = await cur.fetchone()
        if not row or not row[0]:
            return False
        await conn.execute(sql.SQL("DROP INDEX recall.{}").format(sql.Identifier(name)))
        await conn.execute("DELETE FROM recall.store_indexes WHERE ns = ''")
        return True
    finally:
        await conn.close()


async def put_costs(
    stores: Mapping[str, BaseStore],
    urls: Mapping[str, str],
    items: Items,
    namespace: tuple[str, ...],
    spare: np.ndarray,
    count: int,
    rng: np.random.Generator,
) -> list[PutCosts]:
    """`count` puts into `namespace` per store in turns, then (when our wide index existed)
    again without it."""
    out = []
    for phase in range(2):
        texts: list[str] = []
        for i in rng.choice(len(spare), size=count):
            text = f"put-{phase}-{len(texts)}"
            items.vectors_of[text] = spare[int(i)]
            texts.append(text)
        calls = {
            system: [(lambda s=store, t=t: s.aput(namespace, t, {"text": t})) for t in texts]
            for system, store in stores.items()
        }
        measured = await timed_interleaved(calls)
        wide = phase == 0
        out.append(PutCosts(wide, {system: times for system, (times, _) in measured.items()}))
        if phase == 0 and not await _drop_wide(urls[OURS], len(spare[0])):
            break  # no wide index: the first measurement is the one without it
        ours = stores[OURS]
        assert isinstance(ours, RecallStore)
        await ours._planner.refresh_now()  # the benchmark changed the indexes
    if len(out) == 1:
        out[0].wide_index = False
    return out


async def cold_window(
    stores: Mapping[str, BaseStore],
    items: Items,
    spare: np.ndarray,
    asked: np.ndarray,
    size: int,
    seconds: float,
    rng: np.random.Generator,
) -> ColdWindow:
    """Load a fresh namespace of `size` items into each store (the peer's first), then search
    it in turns for `seconds` with the questions `asked` (their exact answers by numpy)."""
    rows = spare[rng.choice(len(spare), size=min(size, len(spare)), replace=False)]
    texts = [f"fresh-{i}" for i in range(len(rows))]
    for text, vector in zip(texts, rows, strict=True):
        items.vectors_of[text] = vector
    load_s = {}
    for system in (PEER, OURS):
        t0 = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            ops = [PutOp(COLD_NS, f"k{i:05d}", {"text": texts[i]})
                   for i in range(start, min(start + BATCH, len(texts)))]  # fmt: skip
            await stores[system].abatch(ops)
        load_s[system] = time.perf_counter() - t0
        print(f"cold window: {system} loaded {len(texts):,} in {load_s[system]:.1f} s", flush=True)
    queries = []
    for n, vector in enumerate(asked):
        text = f"cold-query-{n}"
        items.vectors_of[text] = vector
        sims = rows @ vector
        order = np.argsort(-sims)
        tenth = sims[order[K - 1]]
        top = {f"k{int(i):05d}" for i in np.flatnonzero(sims >= tenth - 1e-6)}
        queries.append((text, top))
    window = ColdWindow(len(texts), load_s)
    ours = stores[OURS]
    assert isinstance(ours, RecallStore)
    began, turn, at = time.perf_counter(), 0, 0
    while time.perf_counter() - began < seconds:
        block = [queries[(at + i) % len(queries)] for i in range(BLOCK)]
        at += BLOCK
        for system in rotated([OURS, PEER], turn):
            since = time.perf_counter() - began
            times, results = await timed([_search(stores[system], q) for q, _ in block])
            for ms, res, (_, top) in zip(times, results, block, strict=True):
                got = {r.key for r in res}
                window.searches.setdefault(system, []).append((since, ms, len(got & top) / K))
        turn += 1
        if window.indexed_at is None and ours._planner.through(".".join(COLD_NS), len(rows[0])):
            window.indexed_at = time.perf_counter() - began
    return window


def _search(store: BaseStore, query: str) -> Call:
    return lambda: store.asearch(COLD_NS, query=query, limit=K)


def put_rows(costs: Sequence[PutCosts]) -> list[list[object]]:
    """One row per put measurement: p50 / p95 per store and the ratios."""
    rows: list[list[object]] = []
    for c in costs:
        o50, o95 = percentiles(c.times[OURS], [50, 95])
        p50, p95 = percentiles(c.times[PEER], [50, 95])
        rows.append([
            "yes" if c.wide_index else "no", f"{len(c.times[OURS]):,}",
            f"{o50:.2f} / {o95:.2f}", f"{p50:.2f} / {p95:.2f}",
            f"{o50 / p50:.3f}", f"{o95 / p95:.3f}",
        ])  # fmt: skip
    return rows


WINDOWS = ((0.0, 30.0), (30.0, 60.0), (60.0, 120.0), (0.0, float("inf")))


def cold_rows(window: ColdWindow) -> list[list[object]]:
    """One row per stretch of the cold window: searches, recall, p50 / p95, ratios."""
    rows: list[list[object]] = []
    for lo, hi in WINDOWS:
        part: dict[str, list[tuple[float, float, float]]] = {
            s: [x for x in window.searches[s] if lo <= x[0] < hi] for s in (OURS, PEER)
        }
        if not part[OURS] or not part[PEER]:
            continue
        o50, o95 = percentiles([x[1] for x in part[OURS]], [50, 95])
        p50, p95 = percentiles([x[1] for x in part[PEER]], [50, 95])
        recall = (np.mean([x[2] for x in part[OURS]]), np.mean([x[2] for x in part[PEER]]))
        label = "the whole window" if hi == float("inf") else f"{lo:.0f}-{hi:.0f} s"
        rows.append([
            label, f"{len(part[OURS]):,}", f"{recall[0]:.4f} / {recall[1]:.4f}",
            f"{o50:.2f} / {o95:.2f}", f"{p50:.2f} / {p95:.2f}",
            f"{o50 / p50:.3f}", f"{o95 / p95:.3f}",
        ])  # fmt: skip
    return rows


def cold_p95(window: ColdWindow) -> float:
    """Our p95 over the peer's across the whole window."""
    ours = percentiles([x[1] for x in window.searches[OURS]], [95])[0]
    peer = percentiles([x[1] for x in window.searches[PEER]], [95])[0]
    return ours / peer


def put_p95(costs: Sequence[PutCosts]) -> float:
    """Our put p95 over the peer's, as the store stands (the first measurement)."""
    c = costs[0]
    return percentiles(c.times[OURS], [95])[0] / percentiles(c.times[PEER], [95])[0]
