"""RecallStore's HNSW indexes (migration 0015): one per large namespace, one over every
namespace for wide prefixes; which exist, which are due, and building them.

A namespace's index is partial (`WHERE ns = '<namespace>' AND dims = <dims>`), so its scan
returns that namespace's vectors only and loses nothing to a filter on other namespaces; the
index over every namespace (`WHERE dims = <dims>`, recorded with ns ''; migration 0029: it
holds every vector, those of namespaces with an index of their own too) serves prefixes that
hold a large share of the store in one scan. Since migration 0028 both leave out the pending
vectors (`AND NOT pending`): a put's vector joins the graphs in the background. Both hold
their vectors as halfvec, each under an expression of its own (HNSW needs a fixed dimension;
the column holds any; `scan_order` says why two). Builds share the advisory lock of the
per-user builds (`recall.db.hnswbuild`): two CREATE INDEX CONCURRENTLY on one table deadlock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import structlog
from psycopg import AsyncConnection, sql

from recall.db.hnswbuild import build_index
from recall.db.sql import fetch_value, fetch_values, query, run

__all__ = [
    "EVERY_NAMESPACE",
    "Breadth",
    "StoreIndexes",
    "build_store_index",
    "join_graphs",
    "namespaces_due",
    "read_store_indexes",
    "scan_order",
    "store_index_name",
]

log = structlog.stdlib.get_logger(__name__)

EVERY_NAMESPACE = ""
"""The `ns` under which the index over every namespace is recorded (no namespace is empty)."""


@dataclass(frozen=True, slots=True)
class Breadth:
    """An index's calibration (migration 0020): the smallest `hnsw.ef_search` that reached the
    target recall@10 on a sample of its own vectors, the recall measured there, and how many
    vectors the index held then."""

    ef_search: int
    recall: float
    vectors: int


@dataclass(frozen=True, slots=True)
class StoreIndexes:
    """The finished indexes, by (namespace or `EVERY_NAMESPACE`, dims), the table's
    estimated number of vectors, each index's (by the same keys as `names`), the calibrated
    ones' breadths, those that leave pending vectors out (migration 0028), and those that hold
    their vectors as halfvec (`scan_order`)."""

    names: dict[tuple[str, int], str]
    vectors: int
    sizes: dict[tuple[str, int], int] = field(default_factory=dict)
    breadths: dict[tuple[str, int], Breadth] = field(default_factory=dict)
    leave_pending: frozenset[tuple[str, int]] = frozenset()
    halved: frozenset[tuple[str, int]] = frozenset()

    def waits(self, ns: str, dims: int) -> bool:
        """Whether a vector written into `ns` at `dims` is written pending (migration 0028):
        the namespace's own index leaves pending vectors out, or it has none and the index
        over every namespace does. (An own index built before 0028 takes its vectors at once,
        and the one over every namespace with them: every index over every namespace since
        0029 leaves pending vectors out.)"""
        if (ns, dims) in self.names:
            return (ns, dims) in self.leave_pending
        return (EVERY_NAMESPACE, dims) in self.leave_pending


def store_index_name(ns: str, dims: int) -> str:
    """A stable, short index name for a namespace (or every namespace) at a dimension."""
    if ns == EVERY_NAMESPACE:
        return f"store_vectors_hnsw_every_{dims}"  # "_all_" before migration 0029
    digest = hashlib.sha256(f"{dims}:{ns}".encode()).hexdigest()[:24]
    return f"store_vectors_hnsw_ns_{digest}"


async def read_store_indexes(conn: AsyncConnection[Any]) -> StoreIndexes:
    """Every finished index and its estimated size, and the estimated size of the vectors
    table."""
    cur = await conn.execute(query("store_indexes"))
    names, sizes, breadths, leave, halved = {}, {}, {}, set(), set()
    rows = await cur.fetchall()
    for ns, dims, name, size, ef_search, recall, calibrated, leaves, halfvec in rows:
        key = (str(ns), int(dims))
        names[key] = str(name)
        sizes[key] = int(size or 0)
        if ef_search is not None:
            breadths[key] = Breadth(int(ef_search), float(recall or 0.0), int(calibrated or 0))
        if leaves:
            leave.add(key)
        if halfvec:
            halved.add(key)
    vectors = int(await fetch_value(conn, "store_vector_estimate") or 0)
    return StoreIndexes(names, vectors, sizes, breadths, frozenset(leave), frozenset(halved))


async def namespaces_due(conn: AsyncConnection[Any], dims: int, threshold: int) -> list[str]:
    """Namespaces with at least `threshold` vectors of `dims` and no index, largest first."""
    found: list[str] = await fetch_values(
        conn, "store_namespaces_due", {"dims": dims, "threshold": threshold}
    )
    return found


def scan_order(ns: str, dims: int, halved: bool = True) -> sql.Composed:
    """What a scan of index (`ns`, `dims`) orders by, `%(query)s` being the query's vector
    (`halved`: the index holds its vectors as halfvec, as every index built since issue 56
    does; False: a namespace's own built before, which holds `embedding::vector(<dims>)`).

    halfvec: a graph of half the bytes, scanned about a fifth faster at the same recall (issue
    56: 50,000 real vectors, p50 0.98 against 1.20 ms at breadth 40, 2.51 against 3.02 at 160,
    recall@10 0.991 and 0.996 both). Two expressions of the same values, so that a namespace's
    scan can only use its own index: the index over every namespace (`embedding::halfvec`)
    also meets its predicate (`ns = '<namespace>' AND dims = <dims> AND NOT pending`), and
    PostgreSQL chose it there, scanning every namespace's vectors past the others' (twice the
    buffers at 20,000 of 70,000); a namespace's own holds `embedding::vector(<dims>)::halfvec`."""
    column, kind, _ops = _expression(ns, dims, halved, sql.SQL("v.embedding"))
    return sql.SQL("{} <=> %(query)s::{}({})").format(column, sql.SQL(kind), sql.Literal(dims))


def _expression(
    ns: str, dims: int, halved: bool, column: sql.Composable
) -> tuple[sql.Composed, str, str]:
    """Index (`ns`, `dims`)'s expression over `column`, its vector type and its operator
    class."""
    d = sql.Literal(dims)
    if ns == EVERY_NAMESPACE:
        return sql.SQL("{}::halfvec({})").format(column, d), "halfvec", "halfvec_cosine_ops"
    if halved:
        own = sql.SQL("{}::vector({})::halfvec({})").format(column, d, d)
        return own, "halfvec", "halfvec_cosine_ops"
    return sql.SQL("{}::vector({})").format(column, d), "vector", "vector_cosine_ops"


def _create(name: str, ns: str, dims: int, m: int, ef_construction: int) -> sql.Composed:
    column, _kind, ops = _expression(ns, dims, True, sql.Identifier("embedding"))
    where = sql.SQL("dims = {}").format(sql.Literal(dims))
    if ns != EVERY_NAMESPACE:
        where = sql.SQL("ns = {} AND ").format(sql.Literal(ns)) + where
    # a vector joins the graph when its flag is cleared, not while a put waits (migration 0028)
    where = where + sql.SQL(" AND NOT pending")
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON recall.store_vectors "
        "USING hnsw (({}) {}) WITH (m = {}, ef_construction = {}) WHERE {}"
    ).format(
        sql.Identifier(name), column, sql.SQL(ops), sql.Literal(m), sql.Literal(ef_construction),
        where,
    )  # fmt: skip


async def build_store_index(
    conn: AsyncConnection[Any],
    ns: str,
    dims: int,
    *,
    m: int,
    ef_construction: int,
    wait: bool,
    analyze: bool = False,
) -> str | None:
    """Build the HNSW index of `ns` (or of every namespace: `EVERY_NAMESPACE`) at `dims`
    concurrently, and record it; return its name (`recall.db.hnswbuild.build_index`: with
    `wait=False`, None at once when another build runs; `conn` must be autocommit; reads and
    writes of every namespace go on meanwhile). With `analyze`, the store's tables are analyzed
    first, under the build lock (after a bulk load the exact scans that answer until the index
    is ready need statistics).

    Raises:
        psycopg.Error: the build failed (the store wraps it).
    """
    name = store_index_name(ns, dims)
    built = await build_index(
        conn,
        name,
        _create(name, ns, dims, m, ef_construction),
        lambda: run(conn, "store_index_record", {"ns": ns, "dims": dims, "index_name": name}),
        wait=wait,
        failed_event="db.store_index.failed",
        before=(lambda: run(conn, "store_analyze")) if analyze else None,
    )
    if built is not None:
        log.info("db.store_index.built", index=name, dims=dims, every_namespace=not ns)
    return built


async def join_graphs(conn: AsyncConnection[Any], batch: int) -> int:
    """Clear the flag of up to `batch` pending vectors, which inserts each into its HNSW
    graphs (migration 0028), skipping rows another session holds; return how many."""
    return max(await run(conn, "store_join_graphs", {"batch": batch}), 0)
