"""RecallStore's HNSW indexes (migration 0015): a large namespace's own, the one over every
namespace for wide prefixes; built when asked or when a search meets them, and answering as the
exact scan does (the conformance suite, tests/integration/basestore, runs on both plans)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence

import numpy as np
import pytest
from langgraph.store.base import IndexConfig, PutOp

from recall import RecallStore
from recall.config import Settings
from recall.db.pool import connect_once
from tests.conftest import Databases

DIMS = 32


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    v = np.random.default_rng(seed).normal(size=DIMS)
    return [float(x) for x in v / np.linalg.norm(v)]


async def _embed(texts: Sequence[str]) -> list[list[float]]:
    return [_vector(t) for t in texts]


async def _open(url: str, **thresholds: int) -> AsyncIterator[RecallStore]:
    index: IndexConfig = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    settings = Settings(database_url=url, embedding_cache_ttl=0, **thresholds)  # type: ignore[arg-type]
    async with RecallStore.connect(url, index=index, settings=settings) as store:
        yield store


@pytest.fixture
async def url(databases: Databases) -> str:
    return await databases.create("recall_store_ix")


async def _indexes(url: str) -> list[tuple[str, int]]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(b"SELECT ns, dims FROM recall.store_indexes ORDER BY ns")
        return [(str(ns), int(dims)) for ns, dims in await cur.fetchall()]
    finally:
        await conn.close()


def _page(results: Sequence[object]) -> list[tuple[str, str, float | None]]:
    return [(".".join(r.namespace), r.key, r.score) for r in results]  # type: ignore[attr-defined]


async def test_a_large_namespace_gets_its_own_index_and_answers_as_the_exact_scan(
    url: str,
) -> None:
    async for store in _open(url, store_index_threshold=50):
        await store.abatch(
            [PutOp(("kb",), f"k{i:03d}", {"text": f"kb {i}", "n": i}) for i in range(80)]
            + [PutOp(("kb", "sub"), f"s{i}", {"text": f"sub {i}", "n": i}) for i in range(5)]
            + [PutOp(("other",), f"o{i}", {"text": f"other {i}", "n": i}) for i in range(30)]
        )
        queries = [f"query {q}" for q in range(6)]
        searches = [
            {"query": q, "limit": 10, "filter": {"n": {"$gte": 3}} if i % 2 else None}
            for i, q in enumerate(queries)
        ]
        exact = [_page(await store.asearch(("kb",), **s)) for s in searches]  # type: ignore[arg-type]
        await store.wait_for_index_builds()  # the searches above may have set it off already
        await store.build_indexes()
        assert await _indexes(url) == [("kb", DIMS)]
        assert store._planner.through("kb", DIMS) == "namespace"
        assert store._planner.through("other", DIMS) is None
        indexed = [_page(await store.asearch(("kb",), **s)) for s in searches]  # type: ignore[arg-type]
        for before, after in zip(exact, indexed, strict=True):
            assert [(ns, key) for ns, key, _ in after] == [(ns, key) for ns, key, _ in before]
            assert [s for *_, s in after] == pytest.approx([s for *_, s in before], abs=1e-9)
        assert any(ns == "kb.sub" for page in indexed for ns, _, _ in page)  # children count
        assert await store.build_indexes() == []  # nothing left to build


async def test_ties_past_the_candidates_are_broken_as_the_exact_scan_breaks_them(
    url: str,
) -> None:
    """200 items with one same vector: the index's 40 candidates are whichever it meets first,
    so the page comes from the exact scan, by date then key, as without an index."""
    async for store in _open(url, store_index_threshold=50):
        for start in range(0, 200, 50):  # four dates
            await store.abatch(
                [PutOp(("tie",), f"t{i:03d}", {"text": "same"}) for i in range(start, start + 50)]
            )
        exact = _page(await store.asearch(("tie",), query="same", limit=10, offset=5))
        await store.wait_for_index_builds()
        await store.build_indexes()
        assert store._planner.through("tie", DIMS) == "namespace"
        assert _page(await store.asearch(("tie",), query="same", limit=10, offset=5)) == exact
        # the newest batch (one date) first, then by key
        assert [key for _, key, _ in exact] == [f"t{i:03d}" for i in range(155, 165)]


async def test_searches_set_off_the_builds_they_need(url: str) -> None:
    async for store in _open(url, store_index_threshold=60, store_wide_threshold=100):
        await store.abatch(
            [PutOp(("org", "big"), f"b{i}", {"text": f"big {i}"}) for i in range(70)]
            + [PutOp(("org", f"team{j}"), "k", {"text": f"team {j}"}) for j in range(50)]
        )
        exact = _page(await store.asearch(("org",), query="query", limit=10))
        await store.asearch(("org", "big"), query="query", limit=10)
        await store.asearch(("org", "team1"), query="query", limit=10)  # small: nothing to do
        await store.wait_for_index_builds()
        assert await _indexes(url) == [("", DIMS), ("org.big", DIMS)]
        assert store._planner.through("org", DIMS) == "every"
        assert store._planner.through("org.big", DIMS) == "namespace"
        assert store._planner.through("org.team1", DIMS) is None
        assert _page(await store.asearch(("org",), query="query", limit=10)) == exact
