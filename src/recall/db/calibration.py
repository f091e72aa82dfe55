"""How wide a RecallStore index must look (issue 38, decision 0030, migration 0020): the
smallest `hnsw.ef_search` at which the index finds the exact nearest vectors of a sample of its
own, recorded for the searches through it.

A sample of the index's vectors (`SAMPLE`) serves as queries, each leaving itself (and its exact
duplicates) out: the exact scan gives its true ten nearest, the index, at each breadth of
`LADDER` in turn, its `CANDIDATES` nearest (as a search re-checks them), of which the ten
nearest count. The first breadth whose mean recall@10 reaches `TARGET` is recorded, with the
recall measured there and the index's size. A stored vector is an easier query than a question
(it lies where the graph is dense), hence a target above the 0.99 searches must keep; an index
that stays under `FLOOR` even at 1,000 is recorded as such, and searches keep the exact scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
from psycopg import AsyncConnection, sql

from recall.db.sql import query, run
from recall.db.storeindex import EVERY_NAMESPACE, Breadth

__all__ = ["FLOOR", "LADDER", "TARGET", "calibrate_index", "record_breadth"]

log = structlog.stdlib.get_logger(__name__)

LADDER = (40, 60, 80, 100, 120, 160, 200, 250, 300, 400, 500, 600, 800, 1000)
TARGET = 0.995  # mean recall@10 on the sample that a breadth must reach
FLOOR = 0.99  # under this, even at the widest, searches do not use the index
SAMPLE = 150  # vectors used as queries
K = 10
CANDIDATES = 40  # what a search re-checks (recall.db.items.SearchPlan.candidates, limit 10)
SAME = 1e-6  # a distance this small is the query itself (or an exact duplicate of it)


@dataclass(frozen=True, slots=True)
class _Probe:
    vector: Any
    truth: frozenset[tuple[str, str, str, int]]
    want: int


def _near(ns: str) -> sql.Composable:
    if ns == EVERY_NAMESPACE:
        return sql.SQL("TRUE")
    return sql.SQL("v.ns = {}").format(sql.Literal(ns))


def _composed(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(query(name).decode()).format(**parts)


def _others(rows: list[tuple[Any, ...]]) -> list[tuple[tuple[str, str, str, int], float]]:
    """The rows but the query itself: (ns, key, field, ord) and distance, nearest first."""
    return [((r[0], r[1], r[2], r[3]), float(r[4])) for r in rows if float(r[4]) > SAME]


async def _probes(conn: AsyncConnection[Any], ns: str, dims: int) -> list[_Probe]:
    near = _near(ns)
    cur = await conn.execute(
        _composed("store_calibration_sample", near=near), {"dims": dims, "sample": SAMPLE}
    )
    probes = []
    exact = _composed("store_calibration_exact", near=near)
    for (vector,) in await cur.fetchall():
        found = await conn.execute(exact, {"query": vector, "dims": dims, "k": 2 * K + 1})
        others = _others(await found.fetchall())
        if not others:
            continue
        want = min(K, len(others))
        tenth = others[want - 1][1]
        truth = frozenset(row for row, distance in others if distance <= tenth + SAME)
        probes.append(_Probe(vector, truth, want))
    return probes


async def _recall(
    conn: AsyncConnection[Any], ns: str, dims: int, probes: list[_Probe], ef_search: int
) -> float:
    statement = _composed(
        "store_calibration_indexed",
        near=_near(ns),
        dims=sql.Literal(dims),
        vtype=sql.SQL("vector({})").format(sql.Literal(dims)),
    )
    scores = []
    async with conn.transaction():
        await run(conn, "store_search_knobs", {"ef_search": ef_search})
        for probe in probes:
            cur = await conn.execute(
                statement, {"query": probe.vector, "k": CANDIDATES + 1}, prepare=False
            )
            found = [row for row, _ in sorted(_others(await cur.fetchall()), key=lambda o: o[1])]
            hits = len(set(found[:K]) & probe.truth)
            scores.append(min(hits, probe.want) / probe.want)
    return float(np.mean(scores))


async def calibrate_index(conn: AsyncConnection[Any], ns: str, dims: int, vectors: int) -> Breadth:
    """The breadth index (`ns`, `dims`) needs (`vectors`: how many it holds now, recorded with
    it). An index with too few vectors to sample gets the narrowest breadth, recall 1.

    Raises:
        psycopg.Error: the database failed.
    """
    probes = await _probes(conn, ns, dims)
    if not probes:
        return Breadth(LADDER[0], 1.0, vectors)
    recall = 0.0
    for ef_search in LADDER:
        recall = await _recall(conn, ns, dims, probes, ef_search)
        if recall >= TARGET:
            break
    log.info(
        "db.store_index.calibrated",
        every_namespace=not ns,
        dims=dims,
        ef_search=ef_search,
        recall=round(recall, 4),
        vectors=vectors,
        sample=len(probes),
    )
    return Breadth(ef_search, recall, vectors)


async def record_breadth(conn: AsyncConnection[Any], ns: str, dims: int, breadth: Breadth) -> None:
    """Record an index's calibration (as the tables' owner: the app role only reads them)."""
    await run(
        conn,
        "store_index_calibrated",
        {
            "ns": ns,
            "dims": dims,
            "ef_search": breadth.ef_search,
            "recall": breadth.recall,
            "vectors": breadth.vectors,
        },
    )
