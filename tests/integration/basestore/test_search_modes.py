"""`mode="keyword"` and `"hybrid"` (docs/basestore.md): the same BaseStore behaviour
(namespaces, filters, paging, one result per item), ranked by BM25 or by the fused
relevance. `semantic` is the default and is what the other modules test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph.store.base import IndexConfig, PutOp

from recall import RecallStore
from recall.testing import FakeEmbeddings
from tests.integration.basestore.conftest import assert_unscored_after_scored, keys, open_store

TEXTS = {
    "otter": "river otters hold hands while sleeping",
    "owl": "barn owls hunt at night over fields",
    "bee": "honey bees dance to share directions",
    "fox": "red foxes hunt mice under the snow",
}


@pytest.fixture(params=["keyword", "hybrid"])
async def mode_store(request: pytest.FixtureRequest, module_url: str) -> AsyncIterator[RecallStore]:
    index: IndexConfig = {"dims": 64, "embed": FakeEmbeddings(64), "fields": ["text"]}
    async with open_store(module_url, index=index, mode=request.param) as store:
        yield store


async def _fill(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.abatch(
        [
            PutOp((*ns, "zoo"), key, {"text": text, "legs": 2 if key == "owl" else 4})
            for key, text in TEXTS.items()
        ]
    )
    await store.aput((*ns, "zoo-other"), "otter", {"text": TEXTS["otter"], "legs": 4})


async def test_best_match_first(mode_store: RecallStore, ns: tuple[str, ...]) -> None:
    await _fill(mode_store, ns)
    results = await mode_store.asearch((*ns, "zoo"), query="otters sleeping")
    assert results[0].key == "otter" and results[0].score is not None
    assert all(r.namespace == (*ns, "zoo") for r in results)
    assert len(set(keys(results))) == len(results)
    scores = [r.score for r in results if r.score is not None]
    assert scores == sorted(scores, reverse=True)
    if mode_store.mode == "hybrid":
        assert all(0.0 <= s <= 1.0 for s in scores)


async def test_filters_and_paging(mode_store: RecallStore, ns: tuple[str, ...]) -> None:
    await _fill(mode_store, ns)
    results = await mode_store.asearch((*ns, "zoo"), query="hunt", filter={"legs": 4})
    assert "owl" not in keys(results)
    assert results[0].key == "fox"
    everything = await mode_store.asearch(ns, query="hunt at night", limit=10)
    pages = [
        await mode_store.asearch(ns, query="hunt at night", limit=2, offset=o)
        for o in range(0, 6, 2)
    ]
    assert [k for p in pages for k in keys(p)] == keys(everything)


async def test_unindexed_item_follows(mode_store: RecallStore, ns: tuple[str, ...]) -> None:
    await mode_store.aput(ns, "indexed", {"text": "walrus tusks"})
    await mode_store.aput(ns, "plain", {"text": "walrus tusks"}, index=False)
    results = await mode_store.asearch(ns, query="walrus tusks")
    assert results[0].key == "indexed" and results[0].score is not None
    assert_unscored_after_scored(results, "plain")


async def test_keyword_mode_scores_only_matching_words(
    module_url: str, ns: tuple[str, ...]
) -> None:
    """BM25: an item without a word of the query has no score (or is left out)."""
    index: IndexConfig = {"dims": 64, "embed": FakeEmbeddings(64), "fields": ["text"]}
    async with open_store(module_url, index=index, mode="keyword") as store:
        await _fill(store, ns)
        results = await store.asearch((*ns, "zoo"), query="honey")
        assert results[0].key == "bee" and results[0].score is not None and results[0].score > 0
        for r in results[1:]:
            assert r.score is None
