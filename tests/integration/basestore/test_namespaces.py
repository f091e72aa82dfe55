"""Namespaces: validation (in `aput`, `abatch` and reads), whole-segment prefix and suffix
matching, literal `_` and `%`, and `list_namespaces` (ported from LangGraph's
libs/checkpoint/tests/test_store.py and checkpoint-postgres' segment-boundary tests)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from recall import RecallStore
from tests.integration.basestore.conftest import open_store

DOC = {"foo": "bar"}

BAD_PUT_NAMESPACES = [
    pytest.param((), id="empty"),
    pytest.param(("the", "thing.about"), id="dot-in-label"),
    pytest.param(("some", "fun", ""), id="empty-label"),
    pytest.param(("langgraph", "foo"), id="langgraph-root"),
    pytest.param(("nul", "a\x00b"), id="nul-in-label"),
]


async def _namespaces_found(store: RecallStore, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {item.namespace for item in await store.asearch(prefix, limit=100)}


@pytest.mark.parametrize("namespace", BAD_PUT_NAMESPACES)
async def test_put_rejects_bad_namespace(store: RecallStore, namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.aput(namespace, "foo", DOC)


@pytest.mark.parametrize("namespace", BAD_PUT_NAMESPACES)
async def test_batch_put_rejects_bad_namespace_as_aput_does(
    store: RecallStore, ns: tuple[str, ...], namespace: tuple[str, ...]
) -> None:
    """LangGraph's InMemoryStore lets `batch([PutOp(("langgraph", ...))])` through; the
    contract here is that `abatch` checks a PutOp's namespace exactly as `aput` does, and that
    the failing batch writes nothing, not even its valid ops."""
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(ns, "before", DOC), PutOp(namespace, "foo", DOC)])
    assert await store.aget(ns, "before") is None
    if namespace and all(label and "." not in label and "\x00" not in label for label in namespace):
        assert await store.aget(namespace, "foo") is None


async def test_batch_delete_rejects_bad_namespace(store: RecallStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(("a.b",), "k", None)])
    with pytest.raises(InvalidNamespaceError):
        await store.adelete(("a", ""), "k")


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(GetOp(("a.b",), "k"), id="get-dot"),
        pytest.param(GetOp(("a", ""), "k"), id="get-empty-label"),
        pytest.param(SearchOp(("a.b",)), id="search-dot"),
        pytest.param(SearchOp(("a", "")), id="search-empty-label"),
        pytest.param(
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),)),
            id="list-dot",
        ),
    ],
)
async def test_batch_read_rejects_bad_labels(store: RecallStore, op: Any) -> None:
    """A label with '.' would otherwise address another namespace (("a.b",) is ("a", "b")
    once joined): reads passed straight to `abatch` are checked too (`validate_op_namespace`)."""
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([op])


async def test_read_methods_reject_bad_labels(store: RecallStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.aget(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        await store.asearch(("a.b",))
    with pytest.raises(InvalidNamespaceError):
        await store.alist_namespaces(prefix=("a.b",))
    with pytest.raises(InvalidNamespaceError):
        await store.alist_namespaces(suffix=("",))


async def test_dotted_label_cannot_reach_nested_namespace(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    await store.aput((*ns, "a", "b"), "k", DOC)
    with pytest.raises(InvalidNamespaceError):
        await store.aget((*ns, "a.b"), "k")
    with pytest.raises(InvalidNamespaceError):
        await store.adelete((*ns, "a.b"), "k")
    assert await store.aget((*ns, "a", "b"), "k") is not None


async def test_langgraph_label_allowed_below_root(store: RecallStore, ns: tuple[str, ...]) -> None:
    namespace = ("foo", *ns, "langgraph", "foo")
    await store.aput(namespace, "bar", DOC)
    item = await store.aget(namespace, "bar")
    assert item is not None and item.value == DOC
    assert (await store.asearch(namespace))[0].value == DOC
    await store.adelete(namespace, "bar")
    assert await store.aget(namespace, "bar") is None


async def test_search_namespace_segment_boundary(store: RecallStore, ns: tuple[str, ...]) -> None:
    """A prefix stops at label boundaries: ("foo",) never reaches ("foobar",) or ("foo2",)."""
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
        ("foo-",),
        ("foo", "child-x"),
    ]:
        await store.aput((*ns, *namespace), "k", {"v": 1})

    assert await _namespaces_found(store, (*ns, "foo")) == {
        (*ns, "foo"),
        (*ns, "foo", "child"),
        (*ns, "foo", "child", "deep"),
        (*ns, "foo", "child-x"),
    }
    assert await _namespaces_found(store, (*ns, "foobar")) == {
        (*ns, "foobar"),
        (*ns, "foobar", "baz"),
    }
    assert await _namespaces_found(store, (*ns, "foo", "child")) == {
        (*ns, "foo", "child"),
        (*ns, "foo", "child", "deep"),
    }
    assert await _namespaces_found(store, (*ns, "foo2")) == {(*ns, "foo2")}
    assert await _namespaces_found(store, (*ns, "fo")) == set()
    assert await _namespaces_found(store, (*ns, "foo", "child", "deep", "deeper")) == set()


async def test_search_empty_prefix_is_unconstrained(fresh_url: str) -> None:
    async with open_store(fresh_url) as store:
        for namespace in [("a",), ("b", "c"), ("d", "e", "f")]:
            await store.aput(namespace, "k", {"v": 1})
        assert await _namespaces_found(store, ()) == {("a",), ("b", "c"), ("d", "e", "f")}


async def test_like_metacharacters_are_literal(store: RecallStore, ns: tuple[str, ...]) -> None:
    for namespace in [
        ("user_1",),
        ("user_1", "child"),
        ("userX1",),
        ("a%b",),
        ("axxb",),
        ("a%",),
        ("ab",),
    ]:
        await store.aput((*ns, *namespace), "k", {"v": 1})

    assert await _namespaces_found(store, (*ns, "user_1")) == {
        (*ns, "user_1"),
        (*ns, "user_1", "child"),
    }
    assert await _namespaces_found(store, (*ns, "a%b")) == {(*ns, "a%b")}
    assert await _namespaces_found(store, (*ns, "a%")) == {(*ns, "a%")}
    assert await _namespaces_found(store, (*ns, "user_")) == set()
    listed = await store.alist_namespaces(prefix=(*ns, "user_1"))
    assert listed == [(*ns, "user_1"), (*ns, "user_1", "child")]
    assert await store.alist_namespaces(prefix=(*ns, "a%b")) == [(*ns, "a%b")]
    assert await store.alist_namespaces(prefix=ns, suffix=("%b",)) == []


async def test_list_namespaces_basic(fresh_url: str) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    async with open_store(fresh_url) as store:
        for i, namespace in enumerate(namespaces):
            await store.aput(namespace, f"id_{i}", {"data": f"value_{i:02d}"})

        result = await store.alist_namespaces(prefix=("a", "b"))
        assert result == [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
        ]

        result = await store.alist_namespaces(suffix=("f",))
        assert result == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]

        result = await store.alist_namespaces(prefix=("a",), suffix=("f",))
        assert result == [("a", "b", "f"), ("a", "c", "f")]

        result = await store.alist_namespaces(prefix=("a", "b"), max_depth=3)
        assert result == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]

        result = await store.alist_namespaces(prefix=("a", "b"), limit=2)
        assert result == [("a", "b", "c"), ("a", "b", "d", "e")]

        result = await store.alist_namespaces(prefix=("a", "b"), offset=2)
        assert result == [("a", "b", "d", "i"), ("a", "b", "f")]

        result = await store.alist_namespaces(prefix=("a", "*", "f"))
        assert result == [("a", "b", "f"), ("a", "c", "f")]

        result = await store.alist_namespaces(suffix=("*", "f"))
        assert result == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]

        assert await store.alist_namespaces(prefix=("nonexistent",)) == []
        assert await store.alist_namespaces(prefix=("users", "123")) == [("users", "123")]
        # prefix and suffix may overlap on a short namespace
        assert await store.alist_namespaces(prefix=("users", "123"), suffix=("123",)) == [
            ("users", "123")
        ]
        assert await store.alist_namespaces(prefix=("a", "b", "c"), suffix=("b", "c")) == [
            ("a", "b", "c")
        ]
        assert await store.alist_namespaces() == sorted(namespaces)


async def test_list_namespaces_with_wildcards(fresh_url: str) -> None:
    namespaces = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    async with open_store(fresh_url) as store:
        for i, namespace in enumerate(namespaces):
            await store.aput(namespace, f"id_{i}", {"data": f"value_{i:02d}"})

        assert await store.alist_namespaces(prefix=("users", "*")) == [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
        ]
        assert await store.alist_namespaces(suffix=("*", "preferences")) == [
            ("guests", "456", "preferences")
        ]
        assert await store.alist_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
        assert await store.alist_namespaces(prefix=("*", "users")) == [("admin", "users", "789")]
        assert await store.alist_namespaces(prefix=("*", "*", "*")) == [
            ("admin", "users", "789"),
            ("guests", "456", "preferences"),
            ("users", "789", "settings"),
        ]
        # a wildcard is one whole label, never part of one, and never more than one
        assert await store.alist_namespaces(prefix=("user*",)) == []
        assert await store.alist_namespaces(suffix=("*",), max_depth=1) == [
            ("admin",),
            ("guests",),
            ("users",),
        ]

        await store.aput(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
        assert await store.alist_namespaces(prefix=("*", "users"), suffix=("*", "789")) == [
            ("admin", "users", "789"),
            ("admin", "users", "settings", "789"),
        ]


async def test_list_namespaces_pagination(fresh_url: str) -> None:
    async with open_store(fresh_url) as store:
        for i in range(20):
            await store.aput(
                ("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"}
            )

        for offset in (0, 5, 15):
            result = await store.alist_namespaces(prefix=("namespace",), limit=5, offset=offset)
            assert result == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]
        assert await store.alist_namespaces(prefix=("namespace",), limit=5, offset=18) == [
            ("namespace", "sub_18"),
            ("namespace", "sub_19"),
        ]
        assert await store.alist_namespaces(prefix=("namespace",), offset=20) == []
        assert len(await store.alist_namespaces(prefix=("namespace",))) == 20

        # the default limit is 100
        await store.abatch([PutOp(("many", f"n{i:03d}"), "k", {"i": i}) for i in range(120)])
        listed = await store.alist_namespaces(prefix=("many",))
        assert listed == [("many", f"n{i:03d}") for i in range(100)]
        assert len(await store.alist_namespaces(prefix=("many",), limit=200)) == 120


async def test_list_namespaces_max_depth_truncates_and_dedupes(fresh_url: str) -> None:
    namespaces = [
        ("a", "b", "c", "d"),
        ("a", "b", "c", "e"),
        ("a", "b", "f"),
        ("a", "g"),
        ("h", "i", "j", "k"),
    ]
    async with open_store(fresh_url) as store:
        for i, namespace in enumerate(namespaces):
            await store.aput(namespace, f"id_{i}", {"data": f"value_{i:02d}"})

        assert await store.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]
        assert await store.alist_namespaces(max_depth=1) == [("a",), ("h",)]
        assert await store.alist_namespaces(max_depth=3) == [
            ("a", "b", "c"),
            ("a", "b", "f"),
            ("a", "g"),
            ("h", "i", "j"),
        ]
        # limit and offset page the deduplicated list, not the namespaces under it
        assert await store.alist_namespaces(max_depth=2, limit=2) == [("a", "b"), ("a", "g")]
        assert await store.alist_namespaces(max_depth=2, limit=2, offset=2) == [("h", "i")]
        assert await store.alist_namespaces(max_depth=1, limit=1, offset=1) == [("h",)]
        assert await store.alist_namespaces(prefix=("a",), suffix=("d",), max_depth=3) == [
            ("a", "b", "c")
        ]


async def test_list_namespaces_no_conditions_and_empty(fresh_url: str) -> None:
    async with open_store(fresh_url) as store:
        assert await store.alist_namespaces() == []
        namespaces = [("a", "b"), ("c", "d"), ("e", "f", "g")]
        for i, namespace in enumerate(namespaces):
            await store.aput(namespace, f"id_{i}", {"data": f"value_{i:02d}"})
        assert await store.alist_namespaces() == namespaces


async def test_list_namespaces_sorted_as_tuples(fresh_url: str) -> None:
    """Sorted as Python sorts the tuples: label by label, in code-point order. ("a", "b")
    comes before ("a-x",) although the joined text "a.b" sorts after "a-x"."""
    namespaces = [("ab",), ("a-x",), ("a", "b"), ("a",), ("B",), ("a", "a", "z"), ("a", "B")]
    async with open_store(fresh_url) as store:
        for namespace in namespaces:
            await store.aput(namespace, "k", {"v": 1})
        assert await store.alist_namespaces() == sorted(namespaces)
        assert await store.alist_namespaces(limit=3, offset=2) == sorted(namespaces)[2:5]


async def test_list_namespaces_segment_boundary(store: RecallStore, ns: tuple[str, ...]) -> None:
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    ]:
        await store.aput((*ns, *namespace), "k", {"v": 1})

    assert await store.alist_namespaces(prefix=(*ns, "foo")) == [
        (*ns, "foo"),
        (*ns, "foo", "child"),
    ]
    # a suffix aligns to a label: "malice" does not end with the label "alice"
    assert await store.alist_namespaces(prefix=ns, suffix=("alice",)) == [
        (*ns, "uid", "a", "b", "alice"),
        (*ns, "uid", "users", "alice"),
    ]
    # "*" spans exactly one label
    assert await store.alist_namespaces(prefix=(*ns, "uid", "*", "alice")) == [
        (*ns, "uid", "users", "alice")
    ]
    assert await store.alist_namespaces(prefix=(*ns, "uid")) == [
        (*ns, "uid", "a", "b", "alice"),
        (*ns, "uid", "users", "alice"),
        (*ns, "uid", "users", "malice"),
    ]


async def test_namespace_labels_with_trailing_newline(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    await store.aput((*ns, "users", "alice"), "k", {"v": 1})
    await store.aput((*ns, "users", "alice\n"), "k", {"v": 2})

    assert await store.alist_namespaces(prefix=ns, suffix=("alice",)) == [(*ns, "users", "alice")]
    assert await store.alist_namespaces(prefix=(*ns, "users", "alice")) == [(*ns, "users", "alice")]
    item = await store.aget((*ns, "users", "alice\n"), "k")
    assert item is not None and item.value == {"v": 2}


async def test_emptied_namespaces_disappear(store: RecallStore, ns: tuple[str, ...]) -> None:
    await store.aput((*ns, "x"), "k1", {"v": 1})
    await store.aput((*ns, "x"), "k2", {"v": 2})
    await store.aput((*ns, "y", "z"), "k", {"v": 3})
    assert await store.alist_namespaces(prefix=ns) == [(*ns, "x"), (*ns, "y", "z")]

    await store.adelete((*ns, "x"), "k1")
    assert await store.alist_namespaces(prefix=ns) == [(*ns, "x"), (*ns, "y", "z")]
    await store.adelete((*ns, "x"), "k2")
    assert await store.alist_namespaces(prefix=ns) == [(*ns, "y", "z")]
    await store.abatch([PutOp((*ns, "y", "z"), "k", None)])
    assert await store.alist_namespaces(prefix=ns) == []
    assert await store.alist_namespaces(prefix=ns, max_depth=1) == []
    assert await store.asearch(ns) == []


async def test_list_namespaces_ops_in_batch(store: RecallStore, ns: tuple[str, ...]) -> None:
    test_data = [
        ((*ns, "documents", "public"), "doc1", {"content": "public doc"}),
        ((*ns, "documents", "private"), "doc2", {"content": "private doc"}),
        ((*ns, "images", "public"), "img1", {"content": "public image"}),
        ((*ns, "prod", "documents", "public"), "doc3", {"content": "prod doc"}),
    ]
    for namespace, key, value in test_data:
        await store.aput(namespace, key, value)

    prefix = MatchCondition("prefix", ns)
    results = await store.abatch(
        [
            ListNamespacesOp(match_conditions=(prefix,), max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=(prefix,), max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(prefix, MatchCondition("suffix", ("public",))),
                max_depth=None,
                limit=10,
                offset=0,
            ),
        ]
    )
    assert results[0] == sorted(n for n, _, _ in test_data)
    assert results[1] == [(*ns, "documents"), (*ns, "images"), (*ns, "prod")]
    assert results[2] == [
        (*ns, "documents", "public"),
        (*ns, "images", "public"),
        (*ns, "prod", "documents", "public"),
    ]


async def test_namespaces_given_as_lists(store: RecallStore, ns: tuple[str, ...]) -> None:
    """LangGraph's own tests pass prefixes as lists (`store.search(["test"])`): they work as
    tuples do, and namespaces come back as tuples."""
    await store.aput((*ns, "x"), "k", {"v": 1})
    [hit] = await store.asearch(list(ns))  # type: ignore[arg-type]  # as LangGraph's tests call it
    assert hit.namespace == (*ns, "x") and isinstance(hit.namespace, tuple)
    assert await store.alist_namespaces(prefix=list(ns)) == [(*ns, "x")]  # type: ignore[arg-type]  # idem
    item = await store.aget([*ns, "x"], "k")  # type: ignore[arg-type]  # idem
    assert item is not None and item.namespace == (*ns, "x")
