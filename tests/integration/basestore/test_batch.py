"""`abatch`: results in op order (ported from LangGraph's checkpoint-postgres batch tests),
PutOp(value=None) deletes, reads see earlier writes of the same batch, the last put of an item
wins, and a failing batch writes nothing."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from recall import RecallStore


def _prefix(ns: tuple[str, ...]) -> tuple[MatchCondition, ...]:
    return (MatchCondition("prefix", ns),)


def _items(result: Result) -> list[SearchItem]:
    """A SearchOp's result: a list of SearchItem, nothing else."""
    assert isinstance(result, list)
    items = [r for r in result if isinstance(r, SearchItem)]
    assert len(items) == len(result)
    return items


async def test_abatch_order(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.aput((*ns, "foo"), "key1", {"data": "value1"})
    await store.aput((*ns, "bar"), "key2", {"data": "value2"})

    results = await store.abatch(
        [
            GetOp(namespace=(*ns, "foo"), key="key1"),
            PutOp(namespace=(*ns, "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=ns, filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=_prefix(ns), max_depth=None, limit=10, offset=0),
            GetOp(namespace=ns, key="key3"),
        ]
    )
    assert len(results) == 5
    first = results[0]
    assert isinstance(first, Item)
    assert first.value == {"data": "value1"}
    assert first.key == "key1"
    assert results[1] is None
    search = _items(results[2])
    assert len(search) == 1 and search[0].key == "key1"
    assert results[3] == [(*ns, "bar"), (*ns, "foo")]
    assert results[4] is None

    reordered = await store.abatch(
        [
            SearchOp(namespace_prefix=ns, filter=None, limit=5, offset=0),
            GetOp(namespace=(*ns, "bar"), key="key2"),
            ListNamespacesOp(match_conditions=_prefix(ns), max_depth=None, limit=5, offset=0),
            PutOp(namespace=ns, key="key3", value={"data": "value3"}),
            GetOp(namespace=(*ns, "foo"), key="key1"),
        ]
    )
    assert len(reordered) == 5
    assert {i.key for i in _items(reordered[0])} == {"key1", "key2"}
    got = reordered[1]
    assert isinstance(got, Item) and got.value == {"data": "value2"} and got.key == "key2"
    assert reordered[2] == [(*ns, "bar"), (*ns, "foo")]
    assert reordered[3] is None
    got = reordered[4]
    assert isinstance(got, Item) and got.value == {"data": "value1"} and got.key == "key1"
    stored = await store.aget(ns, "key3")
    assert stored is not None and stored.value == {"data": "value3"}


async def test_batch_get_ops(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.aput(ns, "key1", {"data": "value1"})
    await store.aput(ns, "key2", {"data": "value2"})

    results = await store.abatch(
        [GetOp(ns, "key1"), GetOp(ns, "key2"), GetOp(ns, "key3"), GetOp(ns, "key1")]
    )
    assert len(results) == 4
    assert [r.key if isinstance(r, Item) else r for r in results] == ["key1", "key2", None, "key1"]


async def test_batch_put_ops(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.aput(ns, "key3", {"data": "old"})
    results = await store.abatch(
        [
            PutOp(namespace=ns, key="key1", value={"data": "value1"}),
            PutOp(namespace=ns, key="key2", value={"data": "value2"}),
            PutOp(namespace=ns, key="key3", value=None),
        ]
    )
    assert results == [None, None, None]

    item1 = await store.aget(ns, "key1")
    item2 = await store.aget(ns, "key2")
    assert item1 is not None and item1.value == {"data": "value1"}
    assert item2 is not None and item2.value == {"data": "value2"}
    assert await store.aget(ns, "key3") is None
    assert len(await store.asearch(ns, limit=10)) == 2


async def test_batch_search_ops(store: RecallStore, ns: tuple[str, ...]) -> None:
    test_data = [
        ((*ns, "foo"), "key1", {"data": "value1", "tag": "a"}),
        ((*ns, "bar"), "key2", {"data": "value2", "tag": "a"}),
        ((*ns, "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]
    for namespace, key, value in test_data:
        await store.aput(namespace, key, value)

    results = await store.abatch(
        [
            SearchOp(namespace_prefix=ns, filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=ns, filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=(*ns, "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert len(results) == 3
    tagged, two, foo = (_items(r) for r in results)
    assert {i.key for i in tagged} == {"key1", "key2"}
    assert len(two) == 2
    assert len(foo) == 1 and foo[0].namespace == (*ns, "foo")


async def test_reads_see_earlier_writes_of_the_batch(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    await store.aput(ns, "gone", {"v": 0})
    results = await store.abatch(
        [
            GetOp(ns, "k"),
            PutOp(ns, "k", {"v": 1}),
            GetOp(ns, "k"),
            PutOp(ns, "k", {"v": 2}),
            GetOp(ns, "k"),
            SearchOp(ns, filter={"v": 2}),
            PutOp(ns, "gone", None),
            GetOp(ns, "gone"),
            ListNamespacesOp(match_conditions=_prefix(ns)),
            PutOp(ns, "k", None),
            GetOp(ns, "k"),
            ListNamespacesOp(match_conditions=_prefix(ns)),
        ]
    )
    assert results[0] is None
    assert isinstance(results[2], Item) and results[2].value == {"v": 1}
    assert isinstance(results[4], Item) and results[4].value == {"v": 2}
    assert [i.key for i in _items(results[5])] == ["k"]
    assert results[7] is None
    assert results[8] == [ns]
    assert results[10] is None
    assert results[11] == []
    assert [results[i] for i in (1, 3, 6, 9)] == [None, None, None, None]
    assert await store.asearch(ns) == []


async def test_last_put_of_an_item_wins(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.abatch([PutOp(ns, "k", {"v": i}) for i in range(5)])
    item = await store.aget(ns, "k")
    assert item is not None and item.value == {"v": 4}
    await store.abatch([PutOp(ns, "k", {"v": 5}), PutOp(ns, "k", None)])
    assert await store.aget(ns, "k") is None
    await store.abatch([PutOp(ns, "k", None), PutOp(ns, "k", {"v": 6})])
    item = await store.aget(ns, "k")
    assert item is not None and item.value == {"v": 6}


async def test_created_at_kept_by_reput_in_batch(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.aput(ns, "k", {"v": 0})
    before = await store.aget(ns, "k")
    assert before is not None
    await asyncio.sleep(0.05)
    await store.abatch([PutOp(ns, "k", {"v": 1}), PutOp(ns, "other", {"v": 1})])
    after = await store.aget(ns, "k")
    assert after is not None
    assert after.created_at == before.created_at and after.updated_at > before.updated_at


async def test_empty_batch(store: RecallStore) -> None:
    assert await store.abatch([]) == []


async def test_failing_batch_writes_nothing(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.aput(ns, "kept", {"v": "original"})
    ops = [
        PutOp(ns, "kept", {"v": "changed"}),
        PutOp(ns, "new", {"v": 1}),
        PutOp(ns, "kept2", None),
        PutOp(("langgraph", "x"), "k", {"v": 1}),
    ]
    with pytest.raises(InvalidNamespaceError):
        await store.abatch(ops)
    item = await store.aget(ns, "kept")
    assert item is not None and item.value == {"v": "original"}
    assert await store.aget(ns, "new") is None

    with pytest.raises((ValueError, TypeError)):
        await store.abatch(
            [PutOp(ns, "kept", {"v": "changed"}), PutOp(ns, "bad", {"v": float("nan")})]
        )
    item = await store.aget(ns, "kept")
    assert item is not None and item.value == {"v": "original"}
    assert await store.aget(ns, "bad") is None


async def test_concurrent_batches(store: RecallStore, ns: tuple[str, ...]) -> None:
    """Many batches at once (the store's pool is smaller): each lands whole."""
    await asyncio.gather(
        *[
            store.abatch([PutOp((*ns, f"g{g}"), f"k{i}", {"g": g, "i": i}) for i in range(10)])
            for g in range(30)
        ]
    )
    namespaces = await store.alist_namespaces(prefix=ns)
    assert namespaces == sorted((*ns, f"g{g}") for g in range(30))
    for g in range(30):
        items = await store.asearch((*ns, f"g{g}"), limit=20)
        assert sorted(i.value["i"] for i in items) == list(range(10))
