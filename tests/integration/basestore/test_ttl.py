"""TTLs in minutes, fractions kept: refresh on read (and not with refresh_ttl=False or
refresh_on_read=False), expired items invisible before any sweep, `sweep_ttl`, the sweeper
task, and ttl=None never expiring. Adapted from AsyncPostgresStore's `test_store_ttl` and
`test_omit_expired_*` tests.

The timings: a 0.05-minute TTL is 3 s; reads happen at 2 s and checks at 4 s, so every
expected outcome has a margin of a second either way."""

from __future__ import annotations

import asyncio
import time

import pytest
from langgraph.store.base import GetOp, IndexConfig, SearchOp, TTLConfig

from recall import RecallStore
from recall.testing import FakeEmbeddings
from tests.integration.basestore.conftest import keys, open_store

TTL = 0.05  # minutes: 3 seconds
INDEX: IndexConfig = {"dims": 64, "embed": FakeEmbeddings(64), "fields": ["name"]}


async def _sleep_until(start: float, seconds: float) -> None:
    await asyncio.sleep(max(0.0, start + seconds - time.monotonic()))


async def test_sub_minute_ttl_refreshed_on_read(fresh_url: str) -> None:
    ns = ("ttl",)
    async with (
        open_store(
            fresh_url, index=INDEX, ttl={"default_ttl": TTL, "refresh_on_read": True}
        ) as store,
        open_store(fresh_url, ttl={"default_ttl": TTL, "refresh_on_read": False}) as no_refresh,
        open_store(fresh_url, ttl={"default_ttl": TTL}) as unset_refresh,
        open_store(fresh_url) as no_config,
    ):
        start = time.monotonic()
        for key in (
            "get",
            "search",
            "query",
            "batch_get",
            "batch_search",
            "not_refreshed",
            "unread",
        ):
            await store.aput(ns, key, {"name": key})
        await store.aput(ns, "explicit", {"name": "explicit"}, ttl=TTL)
        await store.aput(ns, "forever", {"name": "forever"}, ttl=None)
        await store.aput(ns, "was_ttl", {"name": "was_ttl"})
        await no_refresh.aput(ns, "cfg_default", {"name": "cfg_default"})
        await no_refresh.aput(ns, "cfg_explicit", {"name": "cfg_explicit"})
        # LangGraph's TTLConfig: refresh_on_read defaults to True, with or without a config
        await unset_refresh.aput(ns, "cfg_unset", {"name": "cfg_unset"})
        await no_config.aput(ns, "no_config", {"name": "no_config"}, ttl=TTL)

        await _sleep_until(start, 2.0)
        # a 3-second TTL has not expired after 2 seconds (not rounded down to 0 minutes)
        assert await store.aget(ns, "get") is not None
        assert keys(await store.asearch(ns, filter={"name": "search"})) == ["search"]
        hits = await store.asearch(ns, query="query", filter={"name": "query"})
        assert keys(hits) == ["query"] and hits[0].score is not None
        got, found = await store.abatch(
            [GetOp(ns, "batch_get"), SearchOp(ns, filter={"name": "batch_search"})]
        )
        assert got is not None and isinstance(found, list) and len(found) == 1
        assert await store.aget(ns, "not_refreshed", refresh_ttl=False) is not None
        assert keys(await store.asearch(ns, filter={"name": "explicit"}, refresh_ttl=False)) == [
            "explicit"
        ]
        await store.aput(ns, "was_ttl", {"name": "was_ttl", "v": 2}, ttl=None)
        # refresh_on_read=False: a plain read does not refresh, an explicit refresh_ttl=True does
        assert await no_refresh.aget(ns, "cfg_default") is not None
        assert await no_refresh.aget(ns, "cfg_explicit", refresh_ttl=True) is not None
        assert await unset_refresh.aget(ns, "cfg_unset") is not None
        assert await no_config.aget(ns, "no_config") is not None

        await _sleep_until(start, 4.0)
        live = {
            "get",
            "search",
            "query",
            "batch_get",
            "batch_search",
            "forever",
            "was_ttl",
            "cfg_explicit",
            "cfg_unset",
            "no_config",
        }
        for key in sorted(live):
            assert await store.aget(ns, key, refresh_ttl=False) is not None, key
        for key in ("not_refreshed", "unread", "explicit", "cfg_default"):
            assert await store.aget(ns, key, refresh_ttl=False) is None, key
        assert set(keys(await store.asearch(ns, refresh_ttl=False, limit=50))) == live


async def test_expired_items_are_invisible_before_a_sweep(fresh_url: str) -> None:
    embeddings = FakeEmbeddings(64)
    index: IndexConfig = {"dims": 64, "embed": embeddings, "fields": ["text"]}
    async with open_store(fresh_url, index=index) as store:
        start = time.monotonic()
        await store.aput(("a", "gone"), "x", {"text": "short lived words"}, ttl=0.01)
        await store.aput(("a", "gone"), "y", {"text": "short lived words"}, ttl=0.01)
        await store.aput(("a", "kept"), "forever", {"text": "short lived words"}, ttl=None)
        await store.aput(("a", "kept"), "plain", {"text": "short lived words"})
        await store.aput(("a", "long"), "z", {"text": "short lived words"}, ttl=10)
        await _sleep_until(start, 1.2)

        assert await store.aget(("a", "gone"), "x") is None
        # a refreshing read does not bring an expired item back
        assert await store.aget(("a", "gone"), "x", refresh_ttl=True) is None
        assert await store.aget(("a", "gone"), "y", refresh_ttl=False) is None
        [got] = await store.abatch([GetOp(("a", "gone"), "x")])
        assert got is None
        visible = {"forever", "plain", "z"}
        assert set(keys(await store.asearch(("a",)))) == visible
        assert set(keys(await store.asearch(("a",), query="short lived words"))) == visible
        assert (
            set(keys(await store.asearch(("a",), filter={"text": "short lived words"}))) == visible
        )
        assert await store.asearch(("a", "gone")) == []
        # expired items are left out before paging: pages never come back short
        for query in (None, "short lived words"):
            pages = [await store.asearch(("a",), query=query, limit=2, offset=o) for o in (0, 2)]
            assert [len(p) for p in pages] == [2, 1], query
            assert set(keys(pages[0] + pages[1])) == visible
        # expired items are left out before paging: pages never come back short
        for query in (None, "short lived words"):
            pages = [await store.asearch(("a",), query=query, limit=2, offset=o) for o in (0, 2)]
            assert [len(p) for p in pages] == [2, 1], query
            assert set(keys(pages[0] + pages[1])) == visible
        assert await store.alist_namespaces() == [("a", "kept"), ("a", "long")]
        assert await store.alist_namespaces(max_depth=1) == [("a",)]

        assert await store.sweep_ttl() == 2
        assert await store.sweep_ttl() == 0
        assert set(keys(await store.asearch(("a",)))) == visible

        # the key is free again: a new put is a new, live item
        await store.aput(("a", "gone"), "x", {"text": "back"})
        item = await store.aget(("a", "gone"), "x")
        assert item is not None and item.value == {"text": "back"}


async def test_sweeper_deletes_expired_items(fresh_url: str) -> None:
    # LangGraph types the interval as int minutes; RecallStore keeps fractions (0.6 s here)
    ttl: TTLConfig = {"default_ttl": 0.01, "sweep_interval_minutes": 0.01}  # type: ignore[typeddict-item]
    async with open_store(fresh_url, ttl=ttl) as store:
        start = time.monotonic()
        await store.aput(("s",), "k", {"v": 1})
        await store.aput(("s",), "forever", {"v": 1}, ttl=None)
        await _sleep_until(start, 2.0)
        # the sweeper (started by connect) already deleted it: nothing left to sweep
        assert await store.sweep_ttl() == 0
        assert await store.aget(("s",), "forever") is not None

    async with open_store(fresh_url) as store:
        task = await store.start_ttl_sweeper(sweep_interval_minutes=0.01)
        assert isinstance(task, asyncio.Task) and not task.done()
        start = time.monotonic()
        await store.aput(("s",), "k2", {"v": 1}, ttl=0.01)
        await _sleep_until(start, 2.0)
        assert await store.stop_ttl_sweeper() is True
        assert task.done()
        assert await store.sweep_ttl() == 0
        assert await store.aget(("s",), "forever") is not None
        # stopping again is harmless
        assert await store.stop_ttl_sweeper() is True


async def test_sweep_on_an_empty_store(fresh_url: str) -> None:
    async with open_store(fresh_url) as store:
        assert await store.sweep_ttl() == 0
        await store.aput(("n",), "k", {"v": 1})
        assert await store.sweep_ttl() == 0
        assert await store.aget(("n",), "k") is not None


@pytest.mark.parametrize("ttl", [-1, -0.5, float("nan")])
async def test_bad_ttl_is_a_clear_error(
    store: RecallStore, ns: tuple[str, ...], ttl: float
) -> None:
    await store.aput(ns, "k", {"v": "original"})
    with pytest.raises(ValueError, match=r"(?i)ttl"):
        await store.aput(ns, "k", {"v": "changed"}, ttl=ttl)
    item = await store.aget(ns, "k")
    assert item is not None and item.value == {"v": "original"}
