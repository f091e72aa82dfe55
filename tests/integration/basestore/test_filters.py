"""Filters on `value`: equality (scalars, nested dicts as a subset, lists exactly), the six
operators with typed comparisons, dotted keys, `$ne` on missing fields, and unknown operators.

Each test stores a handful of items in its own namespace and checks the exact set of keys a
filter returns (`_matching`), with and without a query."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from recall import RecallStore


async def _matching(store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any]) -> set[str]:
    return {item.key for item in await store.asearch(ns, filter=flt, limit=100)}


async def _put_all(
    store: RecallStore, ns: tuple[str, ...], items: dict[str, dict[str, Any]]
) -> None:
    for key, value in items.items():
        await store.aput(ns, key, value)


NUMBERS: dict[str, dict[str, Any]] = {
    "n9": {"n": 9},
    "n9_5": {"n": 9.5},
    "n10": {"n": 10},
    "n100": {"n": 100},
    "neg": {"n": -1},
    "s10": {"n": "10"},
    "s9": {"n": "9"},
    "true": {"n": True},
    "null": {"n": None},
    "missing": {"other": 1},
    "list": {"n": [10]},
    "obj": {"n": {"v": 10}},
}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param({"n": {"$gt": 9}}, {"n9_5", "n10", "n100"}, id="gt"),
        pytest.param({"n": {"$gte": 9}}, {"n9", "n9_5", "n10", "n100"}, id="gte"),
        pytest.param({"n": {"$lt": 10}}, {"n9", "n9_5", "neg"}, id="lt"),
        pytest.param({"n": {"$lte": 10}}, {"n9", "n9_5", "n10", "neg"}, id="lte"),
        pytest.param({"n": {"$gt": 9.5}}, {"n10", "n100"}, id="gt-float"),
        pytest.param({"n": {"$gte": 9, "$lt": 100}}, {"n9", "n9_5", "n10"}, id="range"),
        pytest.param({"n": {"$gt": 100}}, set(), id="gt-nothing"),
        pytest.param({"n": {"$eq": 10}}, {"n10"}, id="eq"),
        pytest.param({"n": 10}, {"n10"}, id="equality"),
        pytest.param({"n": 10.0}, {"n10"}, id="equality-float-int"),
        pytest.param({"n": "10"}, {"s10"}, id="equality-text"),
        pytest.param(
            {"n": {"$ne": 10}},
            {"n9", "n9_5", "n100", "neg", "s10", "s9", "true", "null", "missing", "list", "obj"},
            id="ne",
        ),
    ],
)
async def test_numbers_compare_as_numbers(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    """10 > 9 numerically (as text "10" < "9"); a range never matches a text, a boolean, null,
    a missing field, a list or an object; equality is typed ("10" is not 10)."""
    await _put_all(store, ns, NUMBERS)
    assert await _matching(store, ns, flt) == expected


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param({"s": {"$gt": "b"}}, {"ba", "c"}, id="gt"),
        pytest.param({"s": {"$gte": "b"}}, {"b", "ba", "c"}, id="gte"),
        pytest.param({"s": {"$lt": "b"}}, {"a", "Z"}, id="lt"),
        pytest.param({"s": {"$lte": "ba"}}, {"a", "b", "ba", "Z"}, id="lte"),
        pytest.param({"s": "b"}, {"b"}, id="equality"),
    ],
)
async def test_texts_compare_as_texts(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    """Texts compare in code-point order ("Z" < "a"); a number never matches a text range."""
    await _put_all(
        store,
        ns,
        {
            "a": {"s": "a"},
            "b": {"s": "b"},
            "ba": {"s": "ba"},
            "c": {"s": "c"},
            "Z": {"s": "Z"},
            "num": {"s": 5},
        },
    )
    assert await _matching(store, ns, flt) == expected


async def test_digit_texts_compare_as_texts(store: RecallStore, ns: tuple[str, ...]) -> None:
    """As texts "10" < "9"; the numbers 10 and 9 never match a text range."""
    await _put_all(
        store,
        ns,
        {"s10": {"s": "10"}, "s9": {"s": "9"}, "s100": {"s": "100"}, "n10": {"s": 10}},
    )
    assert await _matching(store, ns, {"s": {"$gt": "9"}}) == set()
    assert await _matching(store, ns, {"s": {"$lt": "9"}}) == {"s10", "s100"}
    assert await _matching(store, ns, {"s": {"$gte": "10"}}) == {"s10", "s100", "s9"}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param({"b": True}, {"true"}, id="eq-true"),
        pytest.param({"b": False}, {"false"}, id="eq-false"),
        pytest.param({"b": {"$eq": True}}, {"true"}, id="op-eq-true"),
        pytest.param({"b": {"$gt": False}}, {"true"}, id="gt-false"),
        pytest.param({"b": {"$lte": True}}, {"true", "false"}, id="lte-true"),
        pytest.param({"b": {"$ne": True}}, {"false", "one", "zero", "text", "missing"}, id="ne"),
    ],
)
async def test_booleans_compare_as_booleans(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    """True is not the number 1 nor the text "true" (Python's True == 1 does not leak in)."""
    await _put_all(
        store,
        ns,
        {
            "true": {"b": True},
            "false": {"b": False},
            "one": {"b": 1},
            "zero": {"b": 0},
            "text": {"b": "true"},
            "missing": {"c": True},
        },
    )
    assert await _matching(store, ns, flt) == expected


async def test_number_filter_does_not_match_booleans(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    await _put_all(store, ns, {"true": {"n": True}, "one": {"n": 1}, "zero": {"n": 0}})
    assert await _matching(store, ns, {"n": 1}) == {"one"}
    assert await _matching(store, ns, {"n": {"$gte": 1}}) == {"one"}
    assert await _matching(store, ns, {"n": {"$lt": 1}}) == {"zero"}


TIMES: dict[str, dict[str, Any]] = {
    # 2024-01-02T04:00Z written with a -05:00 offset: as text it sorts before "2024-01-02T01"
    "offset": {"at": "2024-01-01T23:00:00-05:00"},
    "utc_z": {"at": "2024-01-02T01:00:00Z"},
    "utc_plus": {"at": "2024-01-02T02:00:00+00:00"},
    "early": {"at": "2023-12-31T12:00:00+00:00"},
    "fraction": {"at": "2024-01-02T03:00:00.500000+00:00"},
    "text": {"at": "not a date"},
    "number": {"at": 20240102},
}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param(
            {"at": {"$gt": datetime(2024, 1, 2, 3, 30, tzinfo=UTC)}}, {"offset"}, id="gt-datetime"
        ),
        pytest.param({"at": {"$gt": "2024-01-02T03:30:00+00:00"}}, {"offset"}, id="gt-iso-text"),
        pytest.param(
            {"at": {"$gte": datetime(2024, 1, 2, 2, 0, tzinfo=UTC)}},
            {"offset", "utc_plus", "fraction"},
            id="gte-datetime",
        ),
        pytest.param(
            {"at": {"$lt": datetime(2024, 1, 2, 4, 0, tzinfo=timezone(timedelta(hours=1)))}},
            {"utc_z", "utc_plus", "early"},
            id="lt-other-offset",
        ),
        pytest.param(
            {"at": {"$lte": datetime(2024, 1, 2, 1, 0)}},
            {"utc_z", "early"},
            id="lte-naive-is-utc",
        ),
        pytest.param(
            {
                "at": {
                    "$gt": datetime(2024, 1, 1, tzinfo=UTC),
                    "$lt": datetime(2024, 1, 3, tzinfo=UTC),
                }
            },
            {"offset", "utc_z", "utc_plus", "fraction"},
            id="range",
        ),
        pytest.param(
            {"at": {"$gte": datetime(2024, 1, 2, 3, 0, 0, 500000, tzinfo=UTC)}},
            {"offset", "fraction"},
            id="fractions-kept",
        ),
    ],
)
async def test_times_compare_as_times(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    """ISO 8601 texts in values and `datetime` or ISO texts in filters compare as instants:
    "2024-01-01T23:00:00-05:00" is after "2024-01-02T01:00:00Z". A naive datetime is UTC.
    Values that are not times never match a time range."""
    await _put_all(store, ns, TIMES)
    assert await _matching(store, ns, flt) == expected


async def test_dates_compare_as_dates(store: RecallStore, ns: tuple[str, ...]) -> None:
    await _put_all(
        store,
        ns,
        {"d1": {"day": "2024-01-09"}, "d2": {"day": "2024-01-10"}, "d3": {"day": "2023-12-31"}},
    )
    assert await _matching(store, ns, {"day": {"$gt": "2024-01-01"}}) == {"d1", "d2"}
    assert await _matching(store, ns, {"day": {"$lt": datetime(2024, 1, 10, tzinfo=UTC)}}) == {
        "d1",
        "d3",
    }


async def test_equality_with_datetime_value(store: RecallStore, ns: tuple[str, ...]) -> None:
    """`$eq` with a datetime matches the same instant written with another offset."""
    await _put_all(
        store,
        ns,
        {"same": {"at": "2024-01-01T23:00:00-05:00"}, "other": {"at": "2024-01-02T05:00:00Z"}},
    )
    instant = datetime(2024, 1, 2, 4, 0, tzinfo=UTC)
    assert await _matching(store, ns, {"at": {"$eq": instant}}) == {"same"}
    assert await _matching(store, ns, {"at": {"$ne": instant}}) == {"other"}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param({"x": None}, {"null", "missing"}, id="none-matches-null-or-missing"),
        pytest.param({"x": {"$eq": None}}, {"null", "missing"}, id="eq-none"),
        pytest.param({"x": {"$ne": None}}, {"zero", "empty", "false", "text"}, id="ne-none"),
        pytest.param({"x": 0}, {"zero"}, id="zero-is-not-null"),
        pytest.param({"x": ""}, {"empty"}, id="empty-text-is-not-null"),
        pytest.param({"x": False}, {"false"}, id="false-is-not-null"),
    ],
)
async def test_none_and_null(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    await _put_all(
        store,
        ns,
        {
            "null": {"x": None},
            "missing": {"y": 1},
            "zero": {"x": 0},
            "empty": {"x": ""},
            "false": {"x": False},
            "text": {"x": "null"},
        },
    )
    assert await _matching(store, ns, flt) == expected


NESTED: dict[str, dict[str, Any]] = {
    "ada": {"author": {"name": "Ada", "born": 1815, "tags": ["math"]}, "year": 1843},
    "alan": {"author": {"name": "Alan", "born": 1912}, "year": 1936},
    "flat": {"author": "Ada", "year": 1843},
    "deep": {"a": {"b": {"c": 5}}, "year": 2000},
}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param({"author": {"name": "Ada"}}, {"ada"}, id="nested-dict-subset"),
        pytest.param(
            {"author": {"name": "Ada", "born": 1815}}, {"ada"}, id="nested-dict-two-fields"
        ),
        pytest.param({"author": {"name": "Ada", "born": 1900}}, set(), id="nested-dict-mismatch"),
        pytest.param({"author": {}}, {"ada", "alan"}, id="empty-dict-matches-any-dict"),
        pytest.param({"author": "Ada"}, {"flat"}, id="scalar-not-dict"),
        pytest.param({"author.name": "Ada"}, {"ada"}, id="dotted-key-equality"),
        pytest.param({"author.born": {"$gt": 1900}}, {"alan"}, id="dotted-key-operator"),
        pytest.param({"author.born": {"$ne": 1815}}, {"alan", "flat", "deep"}, id="dotted-ne"),
        pytest.param({"a.b.c": 5}, {"deep"}, id="three-levels"),
        pytest.param({"a.b": {"c": 5}}, {"deep"}, id="dotted-then-subset"),
        pytest.param({"a": {"b": {"c": {"$gte": 5}}}}, {"deep"}, id="operator-inside-nested-dict"),
        pytest.param(
            {"author": {"name": "Ada"}, "year": {"$lt": 1900}}, {"ada"}, id="and-of-fields"
        ),
        pytest.param({"author.tags": ["math"]}, {"ada"}, id="dotted-list"),
    ],
)
async def test_nested_fields(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    """A nested dict matches field by field (a subset, as InMemoryStore); a dotted key reaches
    the nested field (it is a path, never a literal key with a dot)."""
    await _put_all(store, ns, NESTED)
    assert await _matching(store, ns, flt) == expected


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        pytest.param({"tags": ["a", "b"]}, {"ab"}, id="exact-list"),
        pytest.param({"tags": ["b", "a"]}, {"ba"}, id="order-matters"),
        pytest.param({"tags": ["a"]}, {"a"}, id="no-containment"),
        pytest.param({"tags": []}, {"empty"}, id="empty-list"),
        pytest.param({"tags": {"$eq": ["a", "b"]}}, {"ab"}, id="eq-list"),
        pytest.param(
            {"tags": {"$ne": ["a", "b"]}},
            {"ba", "a", "abc", "empty", "scalar", "missing", "objs"},
            id="ne-list",
        ),
        pytest.param({"tags": [{"k": 1}]}, {"objs"}, id="list-of-objects"),
    ],
)
async def test_lists_match_exactly(
    store: RecallStore, ns: tuple[str, ...], flt: dict[str, Any], expected: set[str]
) -> None:
    await _put_all(
        store,
        ns,
        {
            "ab": {"tags": ["a", "b"]},
            "ba": {"tags": ["b", "a"]},
            "a": {"tags": ["a"]},
            "abc": {"tags": ["a", "b", "c"]},
            "empty": {"tags": []},
            "scalar": {"tags": "a"},
            "missing": {"other": ["a", "b"]},
            "objs": {"tags": [{"k": 1}]},
        },
    )
    assert await _matching(store, ns, flt) == expected


async def test_ne_matches_items_lacking_the_field(store: RecallStore, ns: tuple[str, ...]) -> None:
    await _put_all(
        store, ns, {"red": {"color": "red"}, "blue": {"color": "blue"}, "none": {"size": 1}}
    )
    assert await _matching(store, ns, {"color": {"$ne": "red"}}) == {"blue", "none"}
    assert await _matching(store, ns, {"color": {"$ne": "green"}}) == {"red", "blue", "none"}
    assert await _matching(store, ns, {"nowhere": {"$ne": 1}}) == {"red", "blue", "none"}
    # a range on a missing field matches nothing and is not an error
    assert await _matching(store, ns, {"nowhere": {"$gt": 1}}) == set()


@pytest.mark.parametrize("operator", ["$regex", "$in", "$contains", "$exists", "$GT", "$"])
async def test_unknown_operator_is_a_value_error(
    store: RecallStore, ns: tuple[str, ...], operator: str
) -> None:
    await store.aput(ns, "k", {"n": 1})
    named = re.escape(operator)
    with pytest.raises(ValueError, match=named):
        await store.asearch(ns, filter={"n": {operator: 1}})
    with pytest.raises(ValueError, match=named):
        await store.asearch(ns, filter={"n": {"$gt": 0, operator: 1}})
    with pytest.raises(ValueError, match=named):
        await store.asearch(ns, filter={"a.b": {operator: 1}})


async def test_unknown_operator_fails_before_anything_is_written(
    store: RecallStore, ns: tuple[str, ...]
) -> None:
    from langgraph.store.base import PutOp, SearchOp

    with pytest.raises(ValueError, match=r"\$nope"):
        await store.abatch([PutOp(ns, "k", {"n": 1}), SearchOp(ns, filter={"n": {"$nope": 1}})])
    assert await store.aget(ns, "k") is None


async def test_filters_with_query(char_store: RecallStore, ns: tuple[str, ...]) -> None:
    """Ported from LangGraph's `test_vector_search_with_filters`."""
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        await char_store.aput(ns, key, value)

    results = await char_store.asearch(ns, query="apple", filter={"color": "red"})
    assert len(results) == 2
    assert results[0].key == "doc1"

    results = await char_store.asearch(ns, query="car", filter={"color": "red"})
    assert len(results) == 2
    assert results[0].key == "doc2"

    results = await char_store.asearch(ns, query="bbbbluuu", filter={"score": {"$gt": 3.2}})
    assert len(results) == 3
    assert results[0].key == "doc4"

    results = await char_store.asearch(
        ns, query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
    )
    assert len(results) == 1
    assert results[0].key == "doc3"
    assert all(r.score is not None for r in results)


async def test_filter_on_many_items_never_short(store: RecallStore, ns: tuple[str, ...]) -> None:
    """A filter selecting 30 of 300 items returns all 30 with a large limit, and pages of 7
    cover them exactly once."""
    from langgraph.store.base import PutOp

    await store.abatch([PutOp(ns, f"k{i:03d}", {"i": i, "pick": i % 10 == 0}) for i in range(300)])
    picked = await store.asearch(ns, filter={"pick": True}, limit=100)
    assert {item.key for item in picked} == {f"k{i:03d}" for i in range(0, 300, 10)}
    pages = [
        await store.asearch(ns, filter={"pick": True}, limit=7, offset=o) for o in range(0, 35, 7)
    ]
    seen = [item.key for page in pages for item in page]
    assert sorted(seen) == sorted(item.key for item in picked)
