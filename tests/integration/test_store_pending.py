"""RecallStore's pending vectors (migration 0028, decision 0052): a put into an indexed
namespace leaves its vector out of the graph, the searches compare it exactly until it joins in
the background, and an index built before 0028 keeps taking new vectors at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import pytest
from langgraph.store.base import IndexConfig, PutOp

from recall.basestore import RecallStore
from recall.basestore.pending import PENDING_MAX
from recall.config import Settings
from recall.db.filters import compile_filter
from recall.db.items import SearchPlan, indexed_statement
from recall.db.pool import connect_once
from recall.db.sql import run
from recall.db.storeindex import store_index_name
from tests.conftest import Databases

DIMS = 32


def _vector(text: str) -> list[float]:
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(text))
    return list(np.random.default_rng(seed).normal(size=DIMS))


async def _embed(texts: Sequence[str]) -> list[list[float]]:
    return [_vector(t) for t in texts]


async def _open(url: str) -> AsyncIterator[RecallStore]:
    index: IndexConfig = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    settings = Settings(database_url=url, embedding_cache_ttl=0, store_index_threshold=50)
    async with RecallStore.connect(url, index=index, settings=settings) as store:
        yield store


@pytest.fixture
async def url(databases: Databases) -> str:
    return await databases.create("recall_store_pending")


async def _rows(url: str, statement: bytes) -> list[tuple[object, ...]]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(statement)
        return await cur.fetchall()
    finally:
        await conn.close()


async def _pending(url: str) -> list[str]:
    rows = await _rows(url, b"SELECT key FROM recall.store_vectors WHERE pending ORDER BY key")
    return [str(key) for (key,) in rows]


async def _indexed_namespace(store: RecallStore) -> None:
    """80 items in ("kb",): its index is built before the batch returns (and calibrated)."""
    await store.abatch([PutOp(("kb",), f"k{i:03d}", {"text": f"kb {i}"}) for i in range(80)])
    await store.wait_for_index_builds()
    assert store._planner.through("kb", DIMS) == "namespace"


def _keys(results: Sequence[object]) -> list[str]:
    return [r.key for r in results]  # type: ignore[attr-defined]


async def test_a_put_into_an_indexed_namespace_is_found_at_once_and_joins_the_graph_after(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async for store in _open(url):
        await _indexed_namespace(store)
        [(predicate, leaves)] = await _rows(
            url,
            b"SELECT pg_get_expr(i.indpred, i.indrelid), x.leaves_pending "
            b"FROM recall.store_indexes AS x JOIN pg_index AS i "
            b"ON i.indexrelid = ('recall.' || x.index_name)::regclass",
        )
        assert "NOT pending" in str(predicate) and leaves is True
        assert await _pending(url) == []
        graphs = store._planner.graphs
        with monkeypatch.context() as patch:
            patch.setattr(graphs, "wake", lambda: None)  # hold them out of the graph
            await store.abatch([PutOp(("kb",), f"new{i}", {"text": f"new {i}"}) for i in range(3)])
            assert await _pending(url) == ["new0", "new1", "new2"]
            for i in range(3):  # each its own nearest: found through the index plan at once
                found = await store.asearch(("kb",), query=f"new {i}", limit=5)
                assert _keys(found)[0] == f"new{i}"
                assert found[0].score == pytest.approx(1.0)
            before = _keys(await store.asearch(("kb",), query="kb 7", limit=10))
        graphs.wake()
        await store.wait_for_index_builds()
        assert await _pending(url) == []
        assert _keys(await store.asearch(("kb",), query="new 1", limit=5))[0] == "new1"
        assert _keys(await store.asearch(("kb",), query="kb 7", limit=10)) == before


async def test_vectors_a_stopped_store_left_pending_join_when_the_next_one_reads_its_indexes(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async for store in _open(url):
        await _indexed_namespace(store)
        monkeypatch.setattr(store._planner.graphs, "wake", lambda: None)
        await store.abatch([PutOp(("kb",), "left", {"text": "left behind"})])
    assert await _pending(url) == ["left"]
    async for store in _open(url):
        assert _keys(await store.asearch(("kb",), query="left behind", limit=3))[0] == "left"
        await store.wait_for_index_builds()
        assert await _pending(url) == []


async def test_an_index_built_before_pending_vectors_takes_new_ones_at_once(url: str) -> None:
    async for store in _open(url):
        await _indexed_namespace(store)
        name = store_index_name("kb", DIMS)
        conn = await connect_once(url)
        try:  # as a build before migration 0028 left it: every vector of the namespace
            await conn.execute(f"DROP INDEX recall.{name}".encode())
            await conn.execute(
                f"CREATE INDEX {name} ON recall.store_vectors USING hnsw "
                f"((embedding::vector({DIMS})) vector_cosine_ops) "
                f"WHERE ns = 'kb' AND dims = {DIMS}".encode()
            )
            # recorded again (a build that found it there): read from its predicate
            await run(conn, "store_index_record", {"ns": "kb", "dims": DIMS, "index_name": name})
            cur = await conn.execute(b"SELECT leaves_pending FROM recall.store_indexes")
            assert await cur.fetchall() == [(False,)]
        finally:
            await conn.close()
        await store._planner.refresh_now()
        await store.abatch([PutOp(("kb",), "now", {"text": "in the graph now"})])
        assert await _pending(url) == []
        assert store._planner.through("kb", DIMS) == "namespace"
        assert _keys(await store.asearch(("kb",), query="in the graph now", limit=3))[0] == "now"


async def test_a_bulk_run_of_puts_inserts_into_the_graph_as_it_writes(url: str) -> None:
    async for store in _open(url):
        await _indexed_namespace(store)
        bulk = [PutOp(("kb",), f"b{i}", {"text": f"bulk {i}"}) for i in range(PENDING_MAX + 1)]
        await store.abatch(bulk)
        assert await _pending(url) == []
        assert _keys(await store.asearch(("kb",), query="bulk 3", limit=3))[0] == "b3"


def _discarded(node: dict[str, Any]) -> int:
    """How many rows of the vectors' table a plan (EXPLAIN ANALYZE's JSON) read and threw
    away."""
    own = 0
    if node.get("Relation Name") == "store_vectors":
        own = int(node.get("Rows Removed by Filter", 0)) * int(node.get("Actual Loops", 1))
    children: list[dict[str, Any]] = node.get("Plans", [])
    return own + sum(_discarded(child) for child in children)


async def test_a_prefix_through_the_index_over_every_namespace_reads_only_what_it_needs(
    url: str,
) -> None:
    """The statement reads vectors only through indexes (the scan, the pending vectors' own
    index) and throws away next to none: an OR of the pending vectors with the unscanned
    namespaces' had the table read whole (issue 56: all 120 vectors here, 70,000 in the
    benchmark's database)."""
    index: IndexConfig = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    settings = Settings(
        database_url=url, embedding_cache_ttl=0, store_index_threshold=60, store_wide_threshold=100
    )
    async with RecallStore.connect(url, index=index, settings=settings) as store:
        await store.abatch(
            [PutOp(("org", "big"), f"b{i}", {"text": f"big {i}"}) for i in range(70)]
            + [PutOp(("org", f"team{j}"), "k", {"text": f"team {j}"}) for j in range(50)]
        )
        await store.build_indexes(every_namespace=True)
        await store.aput(("org", "big"), "late", {"text": "late"})  # pending
        plan = SearchPlan(prefix="org", filter=compile_filter(None), limit=10, offset=0,
                          mode="semantic", query=np.array(_vector("q"), np.float32),
                          dims=DIMS, through="every", ef_search=40)  # fmt: skip
        indexed = indexed_statement(plan, DIMS)
        async with store._pool.connection() as conn, conn.transaction():
            # as at scale: on a table this small a sequential scan is cheapest anyway
            await conn.execute(b"SET LOCAL enable_seqscan = off")
            explain = (
                b"EXPLAIN (ANALYZE, FORMAT JSON) " + indexed.statement.as_string(conn).encode()
            )
            cur = await conn.execute(explain, indexed.params)
            row = await cur.fetchone()
        assert row is not None
        assert _discarded(row[0][0]["Plan"]) < 10
