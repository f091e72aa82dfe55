"""How wide a RecallStore index must look (issue 38, decision 0030, migration 0020): the
smallest `hnsw.ef_search` at which the index finds the exact nearest vectors of probes drawn
from its own vectors, recorded for the searches through it.

A probe is the normalised mean of `BLEND` random vectors the index holds (`SAMPLE` probes): a
point where the index has no node and far from any one vector, as a question is from the texts
that answer it. A stored vector itself is too easy (the graph's build computed its neighbours)
and so is the midpoint of two. The exact scan gives each probe's true ten nearest; the index,
at each breadth of `LADDER` in turn, its `CANDIDATES` nearest (as a search re-checks them), of
which the ten nearest count. The first breadth whose mean recall@10, less 1.645 standard
errors, reaches `TARGET` (0.99, what searches must keep) is recorded, with the mean measured
there and the index's size. An index whose mean stays under `FLOOR` even at 1,000 is recorded
as such, and searches keep the exact scan. The probes were chosen on one namespace of 3,000
real turns and LongMemEval's questions (decision 0030, store_parts.py since retired): calibrated
when the index held 2,000 of them, stored vectors, midpoints of two and means of four each
chose 40, which left the questions at recall@10 0.985-0.986 at 3,000; calibrated at 3,000, the
mean of four chose 100 (questions: 0.9995 there, 0.985 at 40, 0.992 at 60, 0.997 at 80).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
from psycopg import AsyncConnection, sql

from recall.db.sql import fetch_value, query, run
from recall.db.storeindex import EVERY_NAMESPACE, Breadth, scan_order
from recall.search.assembly import stored_vector

__all__ = [
    "FLOOR",
    "LADDER",
    "TARGET",
    "calibrate_index",
    "question_asked",
    "record_breadth",
]

log = structlog.stdlib.get_logger(__name__)

LADDER = (40, 60, 80, 100, 120, 160, 200, 250, 300, 400, 500, 600, 800, 1000)
TARGET = 0.99  # recall@10 that a breadth must reach: its probes' mean, less 1.645 standard
# errors (a one-sided 95% bound: 150 probes are a sample of the searches to come)
Z = 1.645
FLOOR = 0.99  # under this, even at the widest, searches do not use the index
SAMPLE = 150  # probes
BLEND = 4  # sampled vectors per probe
K = 10
CANDIDATES = 40  # what a search re-checks (recall.db.items.SearchPlan.candidates, limit 10)
SAME = 1e-6  # distances this close to the tenth count as ties


@dataclass(frozen=True, slots=True)
class Question:
    """A question asked of an index (a calibration probe, or a real search's vector): the
    distance of its exact tenth nearest (`tenth`) and how many a search must find (`want`: ten,
    or the index's size). A vector a search returns counts as found when it is as near as the
    tenth: vectors tied with it are all right answers, whichever of them the exact scan listed
    (many vectors the same: the exact scan's first ten and the index's are any of them)."""

    vector: Any
    tenth: float
    want: int


def _near(ns: str) -> sql.Composable:
    # what the index holds: not the pending vectors (migration 0028; one built before holds
    # them too, and a scan of it leaves them out all the same)
    if ns == EVERY_NAMESPACE:  # every vector (migration 0029)
        return sql.SQL("NOT v.pending")
    return sql.SQL("v.ns = {} AND NOT v.pending").format(sql.Literal(ns))


def _composed(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(query(name).decode()).format(**parts)


def _keys(rows: list[tuple[Any, ...]]) -> list[tuple[tuple[str, str, str, int], float]]:
    """(ns, key, field, ord) and distance of each row, nearest first."""
    found = [((r[0], r[1], r[2], r[3]), float(r[4])) for r in rows]
    return sorted(found, key=lambda f: f[1])


async def _probes(conn: AsyncConnection[Any], ns: str, dims: int) -> list[Question]:
    near = _near(ns)
    cur = await conn.execute(
        _composed("store_calibration_sample", near=near), {"dims": dims, "sample": BLEND * SAMPLE}
    )
    sampled = [stored_vector(v) for (v,) in await cur.fetchall()]
    probes = []
    for start in range(0, len(sampled) - BLEND + 1, BLEND):
        middle = np.sum(sampled[start : start + BLEND], axis=0)
        norm = float(np.linalg.norm(middle))
        if norm == 0.0:
            continue
        probe = await question_of(conn, ns, dims, (middle / norm).astype(np.float32))
        if probe is not None:
            probes.append(probe)
    return probes


async def question_of(
    conn: AsyncConnection[Any], ns: str, dims: int, vector: Any
) -> Question | None:
    """`vector` asked of index (`ns`, `dims`), with its exact nearest (None: the index holds
    nothing)."""
    exact = _composed("store_calibration_exact", near=_near(ns))
    found = await conn.execute(exact, {"query": vector, "dims": dims, "k": K})
    nearest = _keys(await found.fetchall())
    if not nearest:
        return None
    want = min(K, len(nearest))
    return Question(vector, nearest[want - 1][1], want)


def _indexed(ns: str, dims: int, halved: bool) -> sql.Composed:
    return _composed(
        "store_calibration_indexed",
        near=_near(ns),
        dims=sql.Literal(dims),
        order=scan_order(ns, dims, halved),
    )


async def _hits(conn: AsyncConnection[Any], statement: sql.Composed, probe: Question) -> int:
    """How many of `probe`'s exact nearest the index finds among its first ten (of the
    `CANDIDATES` a search re-checks), at the breadth set on `conn`."""
    cur = await conn.execute(statement, {"query": probe.vector, "k": CANDIDATES}, prepare=False)
    found = _keys(await cur.fetchall())[:K]
    return min(sum(1 for _row, distance in found if distance <= probe.tenth + SAME), probe.want)


async def question_found(
    conn: AsyncConnection[Any],
    ns: str,
    dims: int,
    question: Question,
    breadths: list[int],
    *,
    halved: bool = True,
) -> dict[int, int]:
    """How many of `question`'s exact nearest the index finds at each of `breadths`, each
    breadth set for the transaction that this opens (`halved`: the index holds halfvec,
    `recall.db.storeindex.scan_order`)."""
    statement = _indexed(ns, dims, halved)
    found = {}
    async with conn.transaction():
        for ef_search in breadths:
            await run(conn, "store_search_knobs", {"ef_search": ef_search})
            found[ef_search] = await _hits(conn, statement, question)
    return found


async def question_asked(
    conn: AsyncConnection[Any],
    ns: str,
    dims: int,
    vector: Any,
    breadths: list[int],
    *,
    halved: bool = True,
) -> tuple[dict[int, int], int] | None:
    """`vector` asked of index (`ns`, `dims`) at each of `breadths`, the exact and indexed scans
    in one snapshot: how many of its exact nearest each breadth finds (`question_found`) and
    how many it wants. None: the index holds nothing. `halved`: as for `question_found`."""
    async with conn.transaction():
        await run(conn, "repeatable_read")
        question = await question_of(conn, ns, dims, vector)
        if question is None:
            return None
        found = await question_found(conn, ns, dims, question, breadths, halved=halved)
        return found, question.want


async def _recall(
    conn: AsyncConnection[Any], statement: sql.Composed, probes: list[Question], ef_search: int
) -> tuple[float, float]:
    """The probes' mean recall@10 through `statement` at `ef_search`, and its one-sided 95%
    lower bound."""
    scores = []
    await run(conn, "store_search_knobs", {"ef_search": ef_search})  # to the transaction's end
    for probe in probes:
        scores.append(await _hits(conn, statement, probe) / probe.want)
    spread = float(np.std(scores, ddof=1)) / np.sqrt(len(scores)) if len(scores) > 1 else 0.0
    return float(np.mean(scores)), float(np.mean(scores)) - Z * spread


async def calibrate_index(
    conn: AsyncConnection[Any], ns: str, dims: int, *, halved: bool = True
) -> Breadth:
    """The breadth index (`ns`, `dims`) needs, and how many vectors it holds, all read in one
    snapshot (REPEATABLE READ): writes going on meanwhile (a bulk load that set the build off)
    must not put rows in an index scan that the exact scan did not see. An index with fewer
    than `BLEND` vectors gets the narrowest breadth, recall 1. `halved`: the index holds
    halfvec (`recall.db.storeindex.scan_order`).

    Raises:
        psycopg.Error: the database failed.
    """
    async with conn.transaction():
        await run(conn, "repeatable_read")
        if ns == EVERY_NAMESPACE:
            vectors = int(await fetch_value(conn, "store_wide_vectors", {"dims": dims}) or 0)
        else:
            vectors = int(await fetch_value(
                conn, "store_namespace_vectors", {"ns": ns, "dims": dims}
            ) or 0)  # fmt: skip
        probes = await _probes(conn, ns, dims)
        if not probes:
            return Breadth(LADDER[0], 1.0, vectors)
        recall = 0.0
        statement = _indexed(ns, dims, halved)
        for ef_search in LADDER:
            recall, bound = await _recall(conn, statement, probes, ef_search)
            if bound >= TARGET:
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
