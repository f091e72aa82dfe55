"""RecallStore's pure parts: namespace rules and matching, filter compilation, index set-up."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from typing import Any, cast

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from recall.basestore.indexing import keyword_text, resolve_index
from recall.basestore.namespaces import join, list_matching, literal_prefix, split, validate_op
from recall.basestore.planning import IndexPlanner
from recall.config import Settings
from recall.db.filters import compile_filter
from recall.db.items import SearchPlan, search_items
from recall.db.storeindex import EVERY_NAMESPACE, Breadth, StoreIndexes
from recall.errors import ConfigError, InvalidInputError
from recall.testing import FakeEmbeddings

STORED = ["a.b.c", "a.b.d.e", "a.b.d.i", "a.b.f", "a.c.f", "ab.x", "z"]


def _list(*conditions: MatchCondition, **kw: Any) -> list[tuple[str, ...]]:
    return list_matching(STORED, ListNamespacesOp(match_conditions=conditions, **kw))


def test_namespaces_round_trip_through_their_stored_form() -> None:
    assert split(join(("users", "u_1%", "memories"))) == ("users", "u_1%", "memories")


def test_max_depth_truncates_and_merges_as_langgraph_documents() -> None:
    prefix = MatchCondition("prefix", ("a", "b"))
    assert _list(prefix, max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]


def test_prefix_and_suffix_conditions_match_whole_labels_with_wildcards() -> None:
    assert _list(MatchCondition("prefix", ("a",))) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert _list(MatchCondition("suffix", ("f",))) == [("a", "b", "f"), ("a", "c", "f")]
    assert _list(MatchCondition("prefix", ("a", "*", "f"))) == [("a", "b", "f"), ("a", "c", "f")]
    both = (MatchCondition("prefix", ("a",)), MatchCondition("suffix", ("d", "*")))
    assert _list(*both) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert _list(MatchCondition("prefix", ("a", "b")), limit=2, offset=1) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]


def test_the_literal_prefix_stops_at_the_first_wildcard() -> None:
    assert literal_prefix([MatchCondition("prefix", ("a", "*", "c"))]) == ("a",)
    assert literal_prefix([MatchCondition("suffix", ("a",))]) == ()


@pytest.mark.parametrize(
    "op",
    [
        PutOp((), "k", {"x": 1}),
        PutOp(("langgraph", "x"), "k", {"x": 1}),
        PutOp(("a", ""), "k", {"x": 1}),
        PutOp(("a.b",), "k", {"x": 1}),
        GetOp(("a\x00",), "k"),
        SearchOp(("a.b",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),)),
        GetOp("ab", "k"),  # type: ignore[arg-type]  # a bare string is the mistake tested
    ],
)
def test_ops_given_to_batch_are_checked_as_the_store_methods_check_them(op: Any) -> None:
    with pytest.raises(InvalidNamespaceError):
        validate_op(op)


def test_a_delete_may_name_any_namespace_a_put_could_not() -> None:
    validate_op(PutOp(("langgraph",), "k", None))  # deleting nothing is harmless


def test_filters_compile_to_parameters_only() -> None:
    hostile = "x'); DROP TABLE items; --"
    compiled = compile_filter({hostile: {"$gt": hostile}, "a.b": [1, {"c": None}]})
    assert "DROP" not in repr(compiled.condition)  # neither the key nor the value is spliced
    assert [hostile] in compiled.params.values() and hostile in compiled.params.values()


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        ({"n": {"$foo": 1}}, "unknown operator '$foo'"),
        ({"n": {"$gt": [1]}}, "a range compares"),
        ({"n": {"$gt": None}}, "a range compares"),
        ({"n": {"$lt": float("nan")}}, "cannot be compared"),
        ({"when": {"$gt": "2024-13-45"}}, "not an ISO 8601"),
        ({"": 1}, "non-empty field names"),
        ({"n": {"$eq": object()}}, "not JSON serializable"),
    ],
)
def test_an_unusable_filter_is_a_clear_error(filter: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message.replace("$", r"\$")):
        compile_filter(filter)


def test_dates_in_filters_become_aware_times() -> None:
    for value in (date(2024, 5, 1), datetime(2024, 5, 1), "2024-05-01", "2024-05-01T00:00:00Z"):
        compiled = compile_filter({"when": {"$gte": value}})
        assert datetime(2024, 5, 1, tzinfo=UTC) in compiled.params.values(), value


def test_keyword_text_reads_texts_and_numbers_not_keys() -> None:
    value = {"title": "Trip", "stops": [{"city": "Lisbon", "days": 3}], "done": True, "x": None}
    assert keyword_text(value) == "Trip Lisbon 3"


async def test_index_settings_are_checked() -> None:
    settings = Settings(embedding_cache_ttl=0)
    spec = await resolve_index({"embed": FakeEmbeddings(8)}, settings)
    assert spec is not None and spec.dims == 8 and spec.fields == ("$",)
    assert spec.texts({"a": {"b": ["x", "  ", "y"]}}, ["a.b[*]"]) == [
        ("a.b[*]", 0, "x"),
        ("a.b[*]", 2, "y"),
    ]
    for bad in ({"dims": 0, "embed": FakeEmbeddings(8)}, {"embed": 42}, {"fields": "text"}):
        with pytest.raises(ConfigError):
            await resolve_index(bad, settings)  # type: ignore[arg-type]  # wrong on purpose


def _planner(sizes: dict[tuple[str, int], int], **settings: Any) -> IndexPlanner:
    planner = IndexPlanner(None, Settings(**settings))  # type: ignore[arg-type]  # no I/O here
    names = {key: f"index{n}" for n, key in enumerate(sizes)}
    planner._indexes = StoreIndexes(names, sum(sizes.values()), sizes)
    return planner


def test_an_indexed_search_looks_wider_the_more_its_index_holds() -> None:
    planner = _planner({("a", 8): 5_000, ("b", 8): 20_000, ("c", 8): 50_000, ("d", 8): 90_000})
    assert [planner.breadth(ns, 8, "namespace") for ns in "abcd"] == [200, 400, 1000, 1000]
    assert _planner({("a", 8): 5_000}, hnsw_ef_search=300).breadth("a", 8, "namespace") == 300


def test_an_index_larger_than_any_measured_is_not_used() -> None:
    planner = _planner({("a", 8): 170_000, ("b", 8): 170_001, (EVERY_NAMESPACE, 8): 340_001})
    assert planner.through("a", 8) == "namespace"
    assert planner.through("b", 8) is None


def _calibrated(size: int, ef_search: int, recall: float, vectors: int) -> IndexPlanner:
    planner = _planner({("a", 8): size})
    breadths = {("a", 8): Breadth(ef_search, recall, vectors)}
    planner._indexes = dataclasses.replace(planner._indexes, breadths=breadths)
    return planner


def test_a_calibrated_index_is_searched_as_wide_as_its_calibration_says() -> None:
    planner = _calibrated(20_000, 100, 0.995, 20_000)
    assert planner.through("a", 8) == "namespace"
    assert planner.breadth("a", 8, "namespace") == 100  # the rule would say 400


async def test_an_index_grown_by_a_quarter_goes_back_to_the_rule_until_calibrated_again() -> None:
    planner = _calibrated(20_000, 100, 0.995, 20_000)
    await planner.written({"a": 5_000}, 8)  # 25,000: a quarter more, not past it
    assert planner.breadth("a", 8, "namespace") == 100
    await planner.written({"a": 1}, 8)
    assert planner.breadth("a", 8, "namespace") == 501  # 25,001 / 50, at least the old 100
    wide = _calibrated(20_000, 800, 0.995, 20_000)
    await wide.written({"a": 10_000}, 8)
    assert wide.breadth("a", 8, "namespace") == 800  # never narrower than calibrated before


async def test_an_index_under_the_floor_is_not_used_unless_it_has_grown_since() -> None:
    planner = _calibrated(20_000, 1000, 0.95, 20_000)
    assert planner.through("a", 8) is None
    await planner.written({"a": 6_000}, 8)  # grown: its old recall says nothing now
    assert planner.through("a", 8) == "namespace"
    assert planner.breadth("a", 8, "namespace") == 1000


async def test_a_hybrid_plan_is_not_a_page_of_search_items() -> None:
    """A hybrid search's statement returns candidates, not a page: `search_items` refuses the
    plan (the store pages it with `recall.basestore.hybrid.fused_page`) before any I/O."""
    plan = SearchPlan(prefix="a", filter=compile_filter(None), limit=3, offset=0, mode="hybrid")
    with pytest.raises(ValueError, match="ranked_items"):
        await search_items(cast(Any, None), plan)
