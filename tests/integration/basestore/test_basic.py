"""Get, put, delete and search without an index: the key-value half of the BaseStore contract
(ported from LangGraph's checkpoint-postgres tests `test_basic_store_ops` and `test_search`),
timestamps, fresh values, and failures that leave stored data as it was."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from langgraph.store.base import Item, SearchItem

from recall import RecallStore


async def test_basic_store_ops(store: RecallStore, ns: tuple[str, ...]) -> None:
    namespace = (*ns, "documents")
    item_value = {"title": "Test Document", "content": "Hello, World!"}

    await store.aput(namespace, "doc1", item_value)
    item = await store.aget(namespace, "doc1")

    assert item is not None
    assert isinstance(item, Item)
    assert item.namespace == namespace
    assert item.key == "doc1"
    assert item.value == item_value

    updated_value = {"title": "Updated Document", "content": "Hello, Updated!"}
    await store.aput(namespace, "doc1", updated_value)
    updated_item = await store.aget(namespace, "doc1")

    assert updated_item is not None
    assert updated_item.value == updated_value
    assert updated_item.updated_at > item.updated_at

    assert await store.aget((*ns, "other_documents"), "doc1") is None
    assert await store.aget(namespace, "missing") is None

    await store.adelete(namespace, "doc1")
    assert await store.aget(namespace, "doc1") is None
    # deleting what is not there is not an error
    await store.adelete(namespace, "doc1")
    assert await store.aget(namespace, "doc1") is None


async def test_search_without_query(store: RecallStore, ns: tuple[str, ...]) -> None:
    test_data: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
        ((*ns, "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["important"]}),
        ((*ns, "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        ((*ns, "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for namespace, key, value in test_data:
        await store.aput(namespace, key, value)

    all_items = await store.asearch(ns)
    assert len(all_items) == 3
    assert all(isinstance(item, SearchItem) and item.score is None for item in all_items)
    assert {(i.namespace, i.key) for i in all_items} == {(n, k) for n, k, _ in test_data}
    for item in all_items:
        assert item.value == next(
            v for n, k, v in test_data if (n, k) == (item.namespace, item.key)
        )

    docs_items = await store.asearch((*ns, "docs"))
    assert len(docs_items) == 2
    assert all(item.namespace == (*ns, "docs") for item in docs_items)

    alice_items = await store.asearch(ns, filter={"author": "Alice"})
    assert len(alice_items) == 2
    assert all(item.value["author"] == "Alice" for item in alice_items)

    assert len(await store.asearch(ns, limit=2)) == 2
    assert len(await store.asearch(ns, offset=2)) == 1
    # pages of one are disjoint and cover everything
    pages = [await store.asearch(ns, limit=1, offset=i) for i in range(4)]
    assert [len(p) for p in pages] == [1, 1, 1, 0]
    assert {p[0].key for p in pages[:3]} == {"doc1", "doc2", "img1"}

    for namespace, key, _ in test_data:
        await store.adelete(namespace, key)
    assert await store.asearch(ns) == []


async def test_query_without_index_scores_nothing(store: RecallStore, ns: tuple[str, ...]) -> None:
    """Without an index a query ranks nothing: the items come back with score None."""
    for i in range(3):
        await store.aput(ns, f"k{i}", {"text": f"item number {i}"})
    results = await store.asearch(ns, query="item number 1")
    assert {r.key for r in results} == {"k0", "k1", "k2"}
    assert all(r.score is None for r in results)


async def test_created_at_kept_and_updated_at_advances_on_reput(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    await store.aput(ns, "k", {"v": 1})
    first = await store.aget(ns, "k")
    assert first is not None
    assert first.created_at <= first.updated_at
    await asyncio.sleep(0.05)
    await store.aput(ns, "k", {"v": 2})
    second = await store.aget(ns, "k")
    assert second is not None
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    [found] = await store.asearch(ns)
    assert found.created_at == first.created_at
    assert found.updated_at == second.updated_at


async def test_returned_values_are_fresh_dicts(store: RecallStore, ns: tuple[str, ...]) -> None:
    value: dict[str, Any] = {"a": 1, "nested": {"b": [1, 2]}}
    await store.aput(ns, "k", value)
    # mutating what was put does not change what is stored
    value["a"] = 99
    value["nested"]["b"].append(3)

    item = await store.aget(ns, "k")
    assert item is not None
    assert item.value == {"a": 1, "nested": {"b": [1, 2]}}
    item.value["a"] = 2
    item.value["nested"]["b"].append(4)

    again = await store.aget(ns, "k")
    assert again is not None
    assert again.value == {"a": 1, "nested": {"b": [1, 2]}}
    assert again.value is not item.value

    [hit] = await store.asearch(ns)
    hit.value["a"] = 3
    hit.value["nested"]["b"].clear()
    [hit_again] = await store.asearch(ns)
    assert hit_again.value == {"a": 1, "nested": {"b": [1, 2]}}
    item_after = await store.aget(ns, "k")
    assert item_after is not None
    assert item_after.value == {"a": 1, "nested": {"b": [1, 2]}}


async def test_json_values_round_trip(store: RecallStore, ns: tuple[str, ...]) -> None:
    value: dict[str, Any] = {
        "int": 10,
        "big": 2**53 + 1,
        "float": 0.1,
        "neg": -3.5,
        "bool": True,
        "none": None,
        "text": 'naïve 中文 😀 \n\t quote" backslash\\',
        "list": [1, "two", None, {"three": 3}],
        "empty": {},
        "empty_list": [],
        "dotted.key": "a key with a dot",
        "$dollar": "a key with a dollar",
    }
    await store.aput(ns, "k", value)
    item = await store.aget(ns, "k")
    assert item is not None
    assert item.value == value
    assert isinstance(item.value["int"], int) and isinstance(item.value["float"], float)


async def test_keys_and_labels_are_plain_text(store: RecallStore, ns: tuple[str, ...]) -> None:
    odd = ["with space", "slash/and\\back", "percent%_under", "quote'\"", "中文", "-", "a" * 300]
    for i, text in enumerate(odd):
        await store.aput((*ns, text), text, {"i": i})
    await store.aput(ns, "dot.ted.key", {"i": "dot"})
    for i, text in enumerate(odd):
        item = await store.aget((*ns, text), text)
        assert item is not None
        assert (item.namespace, item.key, item.value) == ((*ns, text), text, {"i": i})
    dotted = await store.aget(ns, "dot.ted.key")
    assert dotted is not None and dotted.value == {"i": "dot"}
    assert await store.aget((*ns, "dot", "ted"), "key") is None


@pytest.mark.parametrize(
    "bad_value",
    [
        pytest.param({"x": float("nan")}, id="nan"),
        pytest.param({"x": math.inf}, id="infinity"),
        pytest.param({"x": object()}, id="not-json"),
        pytest.param({"x": "a\x00b"}, id="nul-in-text"),
    ],
)
async def test_unstorable_value_is_a_clear_error_and_keeps_the_old_one(
    store: RecallStore, ns: tuple[str, ...], bad_value: dict[str, Any]
) -> None:
    await store.aput(ns, "k", {"x": "original"})
    with pytest.raises((ValueError, TypeError)):
        await store.aput(ns, "k", bad_value)
    with pytest.raises((ValueError, TypeError)):
        await store.aput(ns, "new", bad_value)
    item = await store.aget(ns, "k")
    assert item is not None and item.value == {"x": "original"}
    assert await store.aget(ns, "new") is None
    # the store still works after the failure
    await store.aput(ns, "after", {"x": 1})
    assert (await store.aget(ns, "after")) is not None


@pytest.mark.parametrize(
    ("limit", "offset"),
    [pytest.param(-1, 0, id="negative-limit"), pytest.param(10, -1, id="negative-offset")],
)
async def test_negative_page_is_a_clear_error(
    store: RecallStore, ns: tuple[str, ...], limit: int, offset: int
) -> None:
    await store.aput(ns, "k", {"v": 1})
    with pytest.raises(ValueError, match=r"(?i)limit|offset|page"):
        await store.asearch(ns, limit=limit, offset=offset)


@pytest.mark.parametrize("bad_value", [[1, 2], "text", 3], ids=["list", "str", "int"])
async def test_value_must_be_a_dict(
    store: RecallStore, ns: tuple[str, ...], bad_value: Any
) -> None:
    with pytest.raises((ValueError, TypeError)):
        await store.aput(ns, "k", bad_value)
    assert await store.aget(ns, "k") is None


async def test_nul_in_key_is_a_clear_error(store: RecallStore, ns: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=r"(?i)key"):
        await store.aput(ns, "a\x00b", {"v": 1})
    assert await store.asearch(ns) == []


async def test_search_default_limit_is_ten(store: RecallStore, ns: tuple[str, ...]) -> None:
    from langgraph.store.base import PutOp

    await store.abatch([PutOp(ns, f"k{i:02d}", {"i": i}) for i in range(15)])
    assert len(await store.asearch(ns)) == 10
    assert len(await store.asearch(ns, limit=15)) == 15
    assert await store.asearch(ns, limit=0) == []
