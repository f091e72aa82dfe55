"""The sync twins (`get`, `put`, `delete`, `search`, `list_namespaces`, `batch`): they work
from worker threads while the store's loop runs, and raise on the loop's own thread, where
waiting would block it (ported from AsyncPostgresStore's `test_no_running_loop` and
`test_large_batches`, sizes reduced)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langgraph.store.base import GetOp, Item, PutOp, SearchItem

from recall import RecallStore
from recall.errors import RecallError
from tests.integration.basestore.conftest import keys

ON_LOOP_ERRORS = (RecallError, asyncio.InvalidStateError, RuntimeError)


async def test_sync_methods_raise_on_the_event_loop(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    with pytest.raises(ON_LOOP_ERRORS):
        store.put(ns, "k", {"v": 1})
    with pytest.raises(ON_LOOP_ERRORS):
        store.get(ns, "k")
    with pytest.raises(ON_LOOP_ERRORS):
        store.delete(ns, "k")
    with pytest.raises(ON_LOOP_ERRORS):
        store.search(ns)
    with pytest.raises(ON_LOOP_ERRORS):
        store.list_namespaces(prefix=ns)
    with pytest.raises(ON_LOOP_ERRORS):
        store.batch([PutOp(ns, "k", {"v": 1})])
    # nothing was written, and the loop is still usable
    assert await store.aget(ns, "k") is None
    assert await store.asearch(ns) == []


async def test_sync_methods_from_threads(char_store: RecallStore, ns: tuple[str, ...]) -> None:
    await asyncio.to_thread(char_store.put, ns, "a", {"text": "apples and pears"})
    await asyncio.to_thread(char_store.put, (*ns, "sub"), "b", {"text": "boats on water"})
    await asyncio.to_thread(char_store.put, ns, "tmp", {"text": "temporary"}, index=False)

    item = await asyncio.to_thread(char_store.get, ns, "a")
    assert isinstance(item, Item) and item.value == {"text": "apples and pears"}
    assert await asyncio.to_thread(char_store.get, ns, "missing") is None

    hits = await asyncio.to_thread(char_store.search, ns, query="boats on water")
    assert hits[0].key == "b" and hits[0].score is not None
    assert all(isinstance(h, SearchItem) for h in hits)
    filtered = await asyncio.to_thread(char_store.search, ns, filter={"text": "apples and pears"})
    assert keys(filtered) == ["a"]

    listed = await asyncio.to_thread(char_store.list_namespaces, prefix=ns)
    assert listed == [ns, (*ns, "sub")]
    assert await asyncio.to_thread(char_store.list_namespaces, prefix=ns, max_depth=1) == [ns]

    await asyncio.to_thread(char_store.delete, ns, "tmp")
    assert await char_store.aget(ns, "tmp") is None

    results = await asyncio.to_thread(
        char_store.batch, [GetOp(ns, "a"), PutOp(ns, "c", {"text": "c"}), GetOp(ns, "c")]
    )
    assert isinstance(results[0], Item) and results[0].key == "a"
    assert results[1] is None
    assert isinstance(results[2], Item) and results[2].value == {"text": "c"}

    # sync writes are visible to async reads, and the other way round
    await char_store.aput(ns, "d", {"text": "d"})
    got = await asyncio.to_thread(char_store.get, ns, "d")
    assert got is not None and got.value == {"text": "d"}


async def test_sync_errors_reach_the_thread(store: RecallStore, ns: tuple[str, ...]) -> None:
    from langgraph.store.base import InvalidNamespaceError

    with pytest.raises(InvalidNamespaceError):
        await asyncio.to_thread(store.put, ("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(ValueError, match=r"\$bogus"):
        await asyncio.to_thread(store.search, ns, filter={"v": {"$bogus": 1}})


async def test_sync_ttl_arguments(module_url: str, ns: tuple[str, ...]) -> None:
    from tests.integration.basestore.conftest import open_store

    async with open_store(module_url, ttl={"default_ttl": 10.0}) as store:
        await asyncio.to_thread(store.put, ns, "k", {"v": 1}, ttl=None)
        item = await asyncio.to_thread(store.get, ns, "k", refresh_ttl=False)
        assert item is not None and item.value == {"v": 1}


async def test_large_batches_from_threads(store: RecallStore, ns: tuple[str, ...]) -> None:
    n, m = 20, 4
    namespace_of = [(*ns, "foo", "bar", "baz", str(i % 2)) for i in range(m)]
    calls: list[tuple[Any, ...]] = []
    for j in range(m):
        for i in range(n):
            target = namespace_of[j]
            calls += [
                (store.put, target, f"key{i}", {"foo": f"bar{i}"}),
                (store.get, target, f"key{i}"),
                (store.list_namespaces, ns, None, j + 1),
                (store.search, ns),
                (store.put, target, f"key{i}", {"foo": f"bar{i}"}),
                (store.put, target, f"key{i}", None),
            ]

    def run(call: tuple[Any, ...]) -> Any:
        fn, *args = call
        if fn == store.list_namespaces:
            return fn(prefix=args[0], suffix=args[1], max_depth=args[2])
        return fn(*args)

    with ThreadPoolExecutor(max_workers=10) as executor:
        futures = [executor.submit(run, call) for call in calls]
        results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
    assert len(results) == m * n * 6
    for call, result in zip(calls, results, strict=True):
        if call[0] == store.get:
            assert result is None or (
                isinstance(result, Item) and result.value == {"foo": f"bar{call[2][3:]}"}
            )
        elif call[0] == store.list_namespaces:
            assert all(len(namespace) <= call[3] for namespace in result)
    # the threads interleave, so the final state of each key is not fixed: the store answers
    await store.aput(ns, "after", {"v": 1})
    assert (await store.aget(ns, "after")) is not None


async def test_large_batches_async(store: RecallStore, ns: tuple[str, ...]) -> None:
    n, m = 60, 3
    coros: list[Any] = []
    for j in range(m):
        for i in range(n):
            target = (*ns, "foo", "bar", "baz", str(j % 2))
            coros += [
                store.aput(target, f"key{i}", value={"foo": f"bar{i}"}),
                store.aget(target, f"key{i}"),
                store.alist_namespaces(prefix=ns, max_depth=j + 1),
                store.asearch(ns),
                store.aput(target, f"key{i}", value={"foo": f"bar{i}"}),
                store.adelete(target, f"key{i}"),
            ]
    results = await asyncio.gather(*coros)
    assert len(results) == m * n * 6
    for result in results:
        if isinstance(result, Item):
            assert result.value == {"foo": f"bar{result.key[3:]}"}
