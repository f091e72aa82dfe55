"""The four BaseStore operations turned into `recall.db.items` calls: puts checked, embedded
and merged (the last put of an item in a run wins), gets, searches and namespace listings.

Embedding happens before any transaction opens: every text of a batch's puts, once each (so
identical texts in one batch are embedded once), and every query.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from psycopg import AsyncConnection

from recall.basestore.hybrid import fused_page
from recall.basestore.indexing import IndexSpec, keyword_text
from recall.basestore.namespaces import join, list_matching, literal_prefix, split
from recall.basestore.pending import PENDING_MAX
from recall.basestore.planning import IndexPlanner
from recall.config import RetrievalMode, StoreMode
from recall.db.filters import compile_filter, json_text
from recall.db.items import (
    ItemWrite,
    SearchPlan,
    delete_items,
    get_items,
    list_ns,
    ranked_items,
    refresh_items,
    search_items,
    write_items,
)
from recall.embeddings import Vector
from recall.errors import ConfigError, InvalidInputError
from recall.rows import StoreItemRow
from recall.search.keywords import keywords_from_text

__all__ = ["Prepared", "check_ttl", "is_minutes", "prepare", "run_read", "run_writes"]


@dataclass(slots=True)
class Prepared:
    """A batch after its embedding step: each put's write (None: a delete) and each search's
    query vector, by the op's position."""

    writes: dict[int, ItemWrite | None]
    queries: dict[int, Vector]


def is_minutes(value: object) -> bool:
    """A TTL or interval in minutes: a finite number above 0 (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


_TTL_KEYS = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}


def check_ttl(ttl: TTLConfig | None) -> None:
    """Refuse a `TTLConfig` with keys LangGraph's does not have, or minutes that are not a
    number above 0.

    Raises:
        ConfigError: what is wrong with it.
    """
    if ttl is None:
        return
    if not isinstance(ttl, dict) or set(ttl) - _TTL_KEYS:
        raise ConfigError(f"ttl must be a TTLConfig with keys from {sorted(_TTL_KEYS)}: {ttl!r}")
    for name in ("default_ttl", "sweep_interval_minutes"):
        minutes = ttl.get(name)
        if minutes is not None and not is_minutes(minutes):
            raise ConfigError(f"ttl {name} is a number of minutes above 0, not {minutes!r}")


def _check_page(what: str, limit: object, offset: object) -> None:
    for name, number in (("limit", limit), ("offset", offset)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InvalidInputError(f"{what} {name} is an integer >= 0, not {number!r}")


def _check_put(op: PutOp) -> None:
    if not isinstance(op.key, str) or "\x00" in op.key:
        raise InvalidInputError(f"an item key is text without NUL characters, not {op.key!r}")
    if op.value is not None and not isinstance(op.value, Mapping):
        raise InvalidInputError(f"an item value is a dict, not {type(op.value).__name__}")
    if op.ttl is not None and not is_minutes(op.ttl):
        raise InvalidInputError(f"ttl is a number of minutes above 0 (or None), not {op.ttl!r}")
    index = op.index
    if (
        index is not None
        and index is not False
        and (isinstance(index, str) or not all(isinstance(p, str) and p for p in index))
    ):
        raise InvalidInputError(f"index is False, None or a list of field paths, not {index!r}")


def _check_search(op: SearchOp) -> None:
    _check_page("search", op.limit, op.offset)
    if op.query is not None and not isinstance(op.query, str):
        raise InvalidInputError(f"search query is text, not {type(op.query).__name__}")


def _check_list(op: ListNamespacesOp) -> None:
    if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
        raise InvalidInputError(f"max_depth is an integer >= 1 (or None), not {op.max_depth!r}")
    _check_page("list_namespaces", op.limit, op.offset)


def _value_json(value: Mapping[str, Any]) -> str:
    try:
        text = json_text(dict(value))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"an item value must be JSON-serializable: {exc}") from exc
    if "\\u0000" in text:
        raise InvalidInputError("an item value cannot hold NUL characters (PostgreSQL's jsonb)")
    return text


async def prepare(ops: Sequence[Any], index: IndexSpec | None) -> Prepared:
    """Check every put and search, then embed their texts and queries.

    Raises:
        InvalidInputError: a key, value, ttl, index list, limit or filter is unusable.
        EmbeddingError: the model failed.
    """
    writes: dict[int, ItemWrite | None] = {}
    pending: dict[int, tuple[PutOp, str, list[tuple[str, int, str]]]] = {}
    queries: dict[int, Vector] = {}
    for position, op in enumerate(ops):
        if isinstance(op, PutOp):
            _check_put(op)
            if op.value is None:
                writes[position] = None
                continue
            value_json = _value_json(op.value)
            texts: list[tuple[str, int, str]] = []
            if index is not None and op.index is not False:
                texts = index.texts(op.value, None if op.index is None else list(op.index))
            pending[position] = (op, value_json, texts)
        elif isinstance(op, SearchOp):
            _check_search(op)
            compile_filter(op.filter)  # a bad filter fails the batch before anything is written
        elif isinstance(op, ListNamespacesOp):
            _check_list(op)
    if index is not None:
        distinct = list(dict.fromkeys(t for _, _, texts in pending.values() for _, _, t in texts))
        vectors = dict(zip(distinct, await index.embedder.embed_documents(distinct), strict=True))
        for position, op in enumerate(ops):
            if isinstance(op, SearchOp) and op.query:
                queries[position] = await index.embedder.embed_query(op.query)
    else:
        vectors = {}
    for position, (op, value_json, texts) in pending.items():
        text = " ".join(t for _, _, t in texts) if index is not None else keyword_text(op.value)
        writes[position] = ItemWrite(
            ns=join(op.namespace),
            key=op.key,
            value_json=value_json,
            ttl_minutes=None if op.ttl is None else float(op.ttl),
            text=text,
            vectors=[(path, ordinal, vectors[t]) for path, ordinal, t in texts],
        )
    return Prepared(writes, queries)


async def run_writes(
    conn: AsyncConnection[Any],
    ops: Sequence[tuple[int, PutOp]],
    prepared: Prepared,
    index: IndexSpec | None,
    planner: IndexPlanner,
) -> bool:
    """Apply a run of consecutive puts: for each item only its last put counts. In a run of at
    most `PENDING_MAX` vectors, those that an index leaving pending vectors out would take (as
    `planner` knows the indexes) are written pending (migration 0028). Returns whether any
    vector was written pending (they join their graphs once the batch has committed)."""
    last: dict[tuple[str, str], ItemWrite | None] = {}
    for position, op in ops:
        last[(join(op.namespace), op.key)] = prepared.writes[position]
    await delete_items(conn, [item for item, write in last.items() if write is None])
    writes = [write for write in last.values() if write is not None]
    pending: frozenset[str] = frozenset()
    if index is not None:
        await planner.refresh(conn)
        # a bulk load inserts into the graphs as it writes
        if sum(len(w.vectors) for w in writes) <= PENDING_MAX:
            pending = planner.pending(index.dims, {w.ns for w in writes if w.vectors})
    await write_items(conn, writes, pending)
    return bool(pending)


def _item(row: StoreItemRow) -> Item:
    return Item(
        value=row.value,
        key=row.key,
        namespace=split(row.ns),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def run_read(
    conn: AsyncConnection[Any],
    position: int,
    op: GetOp | SearchOp | ListNamespacesOp,
    prepared: Prepared,
    index: IndexSpec | None,
    mode: RetrievalMode,
    planner: IndexPlanner,
) -> Item | list[SearchItem] | list[tuple[str, ...]] | None:
    """Run one read; a get or search with `refresh_ttl` pushes its items' expiry forward.
    A semantic search goes through an HNSW index when `planner` says so, and tells it what
    it searched (which may set off an index build in the background)."""
    if isinstance(op, GetOp):
        if not op.namespace:
            return None
        rows = await get_items(conn, join(op.namespace), [op.key])
        if op.refresh_ttl and rows:
            await refresh_items(conn, [(r.ns, r.key) for r in rows])
        return _item(rows[0]) if rows else None
    if isinstance(op, SearchOp):
        plan = _plan(position, op, prepared, index, mode)
        if plan.mode == "semantic" and (dims := plan.dims) is not None:
            await planner.refresh(conn)
            through = planner.through(plan.prefix, dims)
            plan = dataclasses.replace(
                plan,
                through=through,
                ef_search=planner.breadth(plan.prefix, dims, through),
                halved=planner.halved(plan.prefix, dims, through),
            )
            planner.searched(plan.prefix, dims)
            planner.asked(plan.prefix, dims, through, plan.query)
        if plan.mode == "hybrid":
            rows = fused_page(await ranked_items(conn, plan), plan.offset, plan.limit)
        else:
            rows = await search_items(conn, plan)
        # only items with a TTL move: a page without one costs no UPDATE (and no round trip)
        if op.refresh_ttl and (expiring := [(r.ns, r.key) for r in rows if r.expires]):
            await refresh_items(conn, expiring)
        return [
            SearchItem(
                namespace=split(r.ns),
                key=r.key,
                value=r.value,
                created_at=r.created_at,
                updated_at=r.updated_at,
                score=r.score,
            )
            for r in rows
        ]
    conditions = tuple(op.match_conditions or ())
    stored = await list_ns(conn, join(literal_prefix(conditions)))
    return list_matching(stored, op)


def _plan(
    position: int, op: SearchOp, prepared: Prepared, index: IndexSpec | None, mode: RetrievalMode
) -> SearchPlan:
    vector = prepared.queries.get(position)
    words = keywords_from_text(op.query).words if op.query else []
    chosen: StoreMode
    if not op.query:
        chosen = "recent"
    elif mode == "keyword" or (mode == "hybrid" and vector is None):
        chosen = "keyword"
    elif vector is None:  # semantic search on a store with no index: LangGraph ignores the query
        chosen = "recent"
    else:
        chosen = mode
    return SearchPlan(
        prefix=join(op.namespace_prefix),
        filter=compile_filter(op.filter),
        limit=op.limit,
        offset=op.offset,
        mode=chosen,
        query=vector,
        dims=index.dims if index is not None else None,
        words=words,
    )
