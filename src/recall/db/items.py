"""RecallStore's items in PostgreSQL (migration 0011, `items.sql`): read, write, delete,
search under a namespace prefix, list namespaces and sweep expired items.

A namespace reaches this layer as its labels joined by '.' (`ns`); a prefix becomes a range of
the primary key that stops at segment boundaries (`scope`). Every function takes a connection
whose transaction the caller holds.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from weakref import WeakKeyDictionary

from psycopg import AsyncConnection, sql
from psycopg.pq import TransactionStatus
from psycopg.rows import class_row

from recall.config import StoreMode
from recall.db.filters import CompiledFilter
from recall.db.sql import fetch_all, query, run
from recall.db.storeindex import EVERY_NAMESPACE, scan_order
from recall.embeddings import Vector
from recall.rows import StoreItemRow, StoreRankedRow

__all__ = [
    "IndexedStatement",
    "ItemWrite",
    "SearchPlan",
    "delete_items",
    "get_items",
    "indexed_statement",
    "list_ns",
    "prefix_size",
    "ranked_items",
    "refresh_items",
    "search_items",
    "sweep_items",
    "write_items",
]

_VECTOR_TYPES = ["text", "text", "text", "int4", "vector", "bool"]
_MAX_EF_SEARCH = 1000
# The breadth each pooled connection's session holds (`store_session_knobs`), as far as this
# process set it; a connection the pool drops leaves with its entry.
_SESSION_BREADTH: WeakKeyDictionary[AsyncConnection[Any], int] = WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class ItemWrite:
    """One put: the value as JSON text, its TTL in minutes (None: never expires), the text
    keyword search reads, and its vectors as (field, ordinal, vector)."""

    ns: str
    key: str
    value_json: str
    ttl_minutes: float | None
    text: str
    vectors: Sequence[tuple[str, int, Vector]]


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """One search: where, which filter, which page, and how to rank.

    `mode` "recent" lists the newest first (no query or no index); "semantic" ranks by the
    best cosine of an item's vectors; "keyword" by BM25; "hybrid" reads the fusion's
    candidates, `candidates` nearest and as many best by BM25 (`recall.basestore.hybrid`
    ranks them). A semantic search may go
    `through` an HNSW index (migration 0015): the prefix's own ("namespace": the prefix is a
    namespace with an index; its children are still compared exactly) or the one over every
    namespace ("every", which holds every vector: migration 0029), scanning `ef_search` wide
    (`halved`: the index holds halfvec, `recall.db.storeindex.scan_order`); None: the exact
    scan.
    """

    prefix: str
    filter: CompiledFilter
    limit: int
    offset: int
    mode: StoreMode
    query: Vector | None = None
    dims: int | None = None
    words: Sequence[str] = ()
    through: Literal["namespace", "every"] | None = None
    ef_search: int = 100
    halved: bool = True

    @property
    def candidates(self) -> int:
        """How many nearest vectors an indexed search re-checks: twice the rows the page
        reaches, at least 40, at most the HNSW scan's breadth."""
        return max(2 * (self.limit + self.offset), 40)


def scope(prefix: str, alias: str) -> tuple[sql.Composable, dict[str, Any]]:
    """The rows of the table aliased `alias` under the namespace `prefix`."""
    if not prefix:
        return sql.SQL("TRUE"), {}
    column = sql.SQL(".").join([sql.Identifier(alias), sql.Identifier("ns")])
    condition = sql.SQL("({0} = %(ns)s OR ({0} >= %(ns_lo)s AND {0} < %(ns_hi)s))").format(column)
    # '/' is the character after '.': [prefix + '.', prefix + '/') holds exactly the children
    return condition, {"ns": prefix, "ns_lo": prefix + ".", "ns_hi": prefix + "/"}


def _composed(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(query(name).decode()).format(**parts)


async def get_items(conn: AsyncConnection[Any], ns: str, keys: Sequence[str]) -> list[StoreItemRow]:
    """The live (not expired) items of `ns` among `keys`, in no particular order."""
    return await fetch_all(conn, "store_get", {"ns": ns, "keys": list(keys)}, StoreItemRow)


async def refresh_items(conn: AsyncConnection[Any], items: Sequence[tuple[str, str]]) -> None:
    """Push the expiry of these (ns, key) items forward by their own TTL."""
    if items:
        await run(
            conn,
            "store_refresh",
            {"ns": [ns for ns, _ in items], "keys": [key for _, key in items]},
        )


async def write_items(
    conn: AsyncConnection[Any],
    writes: Sequence[ItemWrite],
    pending: Collection[str] = (),
) -> None:
    """Insert or replace items; each one's vectors are replaced by the ones given (none for
    an item put with `index=False`). Those of namespaces in `pending` are written pending
    (migration 0028): they join their graphs later (`recall.db.storeindex.join_graphs`), and
    the indexed searches compare them exactly until then."""
    if not writes:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            query("store_upsert"),
            [
                {
                    "ns": w.ns,
                    "key": w.key,
                    "value": w.value_json,
                    "ttl": w.ttl_minutes,
                    "text": w.text,
                }
                for w in writes
            ],
        )
        await cur.executemany(
            query("store_drop_vectors"), [{"ns": w.ns, "key": w.key} for w in writes]
        )
        if any(w.vectors for w in writes):
            async with cur.copy(query("store_copy_vectors")) as copy:
                copy.set_types(_VECTOR_TYPES)
                for w in writes:
                    waits = w.ns in pending
                    for field, ordinal, vector in w.vectors:
                        await copy.write_row((w.ns, w.key, field, ordinal, vector, waits))


async def delete_items(conn: AsyncConnection[Any], items: Sequence[tuple[str, str]]) -> None:
    """Delete these (ns, key) items and their vectors; a missing one is no error."""
    if items:
        async with conn.cursor() as cur:
            await cur.executemany(
                query("store_delete"), [{"ns": ns, "key": key} for ns, key in items]
            )


async def sweep_items(conn: AsyncConnection[Any]) -> int:
    """Delete every expired item; return how many."""
    return max(await run(conn, "store_sweep"), 0)


async def list_ns(conn: AsyncConnection[Any], prefix: str) -> list[str]:
    """Every namespace (joined) with a live item under `prefix`, sorted."""
    condition, params = scope(prefix, "i")
    cur = await conn.execute(_composed("store_namespaces", scope=condition), params)
    return [row[0] for row in await cur.fetchall()]


async def prefix_size(conn: AsyncConnection[Any], prefix: str, cap: int) -> int:
    """How many vectors (of any dimension) lie under `prefix`, counted up to `cap`."""
    condition, params = scope(prefix, "v")
    cur = await conn.execute(
        _composed("store_prefix_size", vscope=condition), {**params, "cap": cap}, prepare=False
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True)
class IndexedStatement:
    """The statement of an indexed search (what `search_items` runs; benchmarks time it):
    `store_search_indexed` over one HNSW scan, how wide the scan looks (`hnsw.ef_search`: the
    index's breadth, at least the plan's candidates) and its values."""

    statement: sql.Composed
    ef_search: int
    params: dict[str, Any]


def indexed_statement(plan: SearchPlan, dims: int) -> IndexedStatement:
    """The statement of `plan`'s search through its index (`plan.through` is set): one scan,
    of the prefix's own index or of the index over every namespace, which holds every vector
    (migration 0029), and what the scan does not cover (<rest>): the pending vectors (migration
    0028) under the prefix, and a namespace's children."""
    within, params = scope(plan.prefix, "v")
    if plan.through == "namespace":
        index = plan.prefix
        # constants: the statement is one index's, prepared once per connection
        near: sql.Composable = sql.SQL("v.ns = {}").format(sql.Literal(plan.prefix))
        # the children's range as constants too: a generic plan then knows it holds (next to)
        # nothing when the namespace has no children, and probes the primary key for it
        rest: sql.Composable = sql.SQL("(v.ns >= {} AND v.ns < {}) OR (v.pending AND {})").format(
            sql.Literal(params.pop("ns_lo")), sql.Literal(params.pop("ns_hi")), near
        )
        params.pop("ns")
    else:
        index, near, rest = EVERY_NAMESPACE, within, sql.SQL("v.pending AND {}").format(within)
    return IndexedStatement(
        statement=_composed(
            "store_search_indexed",
            near=near,
            rest=rest,
            filter=plan.filter.condition,
            order=scan_order(index, dims, plan.halved),
            dims=sql.Literal(dims),
        ),
        ef_search=max(plan.ef_search, plan.candidates),
        params={
            **params,
            **plan.filter.params,
            "query": plan.query,
            "candidates": plan.candidates,
            "limit": plan.limit,
            "offset": plan.offset,
        },
    )


async def _search_indexed(
    conn: AsyncConnection[Any], plan: SearchPlan, dims: int
) -> list[StoreItemRow]:
    indexed = indexed_statement(plan, dims)
    statement, params, ef_search = indexed.statement, indexed.params, indexed.ef_search
    cur = conn.cursor(row_factory=class_row(StoreItemRow))
    # the index's predicate (ns, dims) is in the statement's text as constants, so even a
    # generic plan proves it: prepared, a statement is planned once per index and connection
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        # a batch of reads on the store's own (autocommit) pool: the connection's own knobs,
        # sent with the search only when they change, and no transaction around it (issue 56:
        # a quarter to half a millisecond). A pool that is not autocommit would open a
        # transaction here whose rollback undoes them: it takes the path below.
        try:
            async with conn.pipeline():
                if _SESSION_BREADTH.get(conn) != ef_search:
                    await run(conn, "store_session_knobs", {"ef_search": ef_search})
                    _SESSION_BREADTH[conn] = ef_search
                await cur.execute(statement, params, prepare=True)
        except BaseException:
            # a failed pipeline undoes its settings with it: set them again next time
            _SESSION_BREADTH.pop(conn, None)
            raise
        return await cur.fetchall()
    # in the caller's transaction (a batch with a put): the knobs and the search in one round
    # trip, in a savepoint, the knobs holding for it only
    async with conn.pipeline(), conn.transaction():
        await run(conn, "store_search_knobs", {"ef_search": ef_search})
        await cur.execute(statement, params, prepare=True)
    return await cur.fetchall()


def _exact_parts(plan: SearchPlan) -> tuple[dict[str, sql.Composable], dict[str, Any]]:
    """An exact statement's placeholders (the items' and the vectors' scope, the filter) and
    their parameters."""
    items_scope, params = scope(plan.prefix, "i")
    parts = {
        "scope": items_scope,
        "filter": plan.filter.condition,
        "vscope": scope(plan.prefix, "v")[0],
    }
    return parts, {**params, **plan.filter.params}


async def search_items(conn: AsyncConnection[Any], plan: SearchPlan) -> list[StoreItemRow]:
    """One page of items under `plan.prefix` that pass its filter, ranked as `plan.mode` says
    ("recent", "semantic" or "keyword"; a hybrid search reads `ranked_items`).

    A search through an index that yields less than a full page (the filter or the TTL
    rejected too much of what the scan found, or the prefix holds fewer items) is answered by
    the exact scan instead, so no page comes back shorter than the exact scan's.
    """
    if plan.mode == "hybrid":
        raise ValueError("a hybrid search reads its candidates with ranked_items")
    if plan.mode == "keyword":
        return list(await ranked_items(conn, plan))
    # pgvector's HNSW scan looks at most 1,000 wide: a deeper page is read by the exact scan
    indexed = plan.through is not None and plan.candidates <= _MAX_EF_SEARCH
    if plan.mode == "semantic" and indexed and plan.dims is not None:
        rows = await _search_indexed(conn, plan, plan.dims)
        if len(rows) >= plan.limit:
            return rows
    parts, params = _exact_parts(plan)
    params.update(limit=plan.limit, offset=plan.offset)
    if plan.mode == "recent":
        name = "store_search_recent"
    else:
        name = "store_search_semantic"
        params.update(query=plan.query, dims=plan.dims)
    cur = conn.cursor(row_factory=class_row(StoreItemRow))
    # planned for these values every time: a generic plan cannot see how many rows a
    # namespace's key range holds, and one prefix may hold 1 item or 100,000
    await cur.execute(_composed(name, **parts), params, prepare=False)
    return await cur.fetchall()


async def ranked_items(conn: AsyncConnection[Any], plan: SearchPlan) -> list[StoreRankedRow]:
    """`store_search_ranked`: a keyword search's page, or a hybrid search's candidates (the
    `plan.candidates` nearest and as many best by BM25, which `recall.basestore.hybrid`
    ranks by the fusion and pages)."""
    parts, params = _exact_parts(plan)
    hybrid = plan.mode == "hybrid"
    params.update(
        query=plan.query if hybrid else None,
        dims=plan.dims,
        words=list(plan.words),
        mode=plan.mode,
        candidates=plan.candidates,
        # a hybrid search reads every candidate: the fusion ranks them and takes the page
        limit=2 * plan.candidates if hybrid else plan.limit,
        offset=0 if hybrid else plan.offset,
    )
    cur = conn.cursor(row_factory=class_row(StoreRankedRow))
    await cur.execute(_composed("store_search_ranked", **parts), params, prepare=False)
    return await cur.fetchall()
