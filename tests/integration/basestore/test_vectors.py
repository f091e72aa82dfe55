"""Vector search: LangGraph's vector tests (InMemoryStore's and AsyncPostgresStore's), ported,
and the promises RecallStore adds: exact search per namespace prefix (never short), one result
per item with its best field's cosine, `offset` paging the same ranking, field paths, and
re-puts that leave no stale vector.

Scores are checked against cosines computed here from the same embedder (`cosine`,
`best_cosine`), to 1e-3 (vectors are stored as float4). With the bag-of-words embedder
(`word_store`, `word_embeddings`), texts with the same words score 1.0 and texts without a
common word score near 0, so a stale vector shows up as a score near 1.0 where the current
texts give far less."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from langgraph.store.base import IndexConfig, PutOp

from recall import RecallStore
from recall.testing import FakeEmbeddings
from tests.integration.basestore.conftest import (
    CharacterEmbeddings,
    assert_unscored_after_scored,
    best_cosine,
    cosine,
    keys,
    open_store,
)


async def test_vector_store_initialization(
    char_store: RecallStore, char_embeddings: CharacterEmbeddings
) -> None:
    assert char_store.index_config is not None
    assert char_store.index_config["dims"] == char_embeddings.dims


async def test_vector_insert_with_auto_embedding(
    char_store: RecallStore, ns: tuple[str, ...]
) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        await char_store.aput(ns, key, value)

    results = await char_store.asearch(ns, query="long text")
    assert len(results) == 6
    assert "doc2" in keys(results) and "doc3" in keys(results)
    assert all(r.score is not None for r in results)
    scores = [r.score for r in results if r.score is not None]
    assert scores == sorted(scores, reverse=True)


async def test_vector_update_with_embedding(char_store: RecallStore, ns: tuple[str, ...]) -> None:
    await char_store.aput(ns, "doc1", {"text": "zany zebra Xerxes"})
    await char_store.aput(ns, "doc2", {"text": "something about dogs"})
    await char_store.aput(ns, "doc3", {"text": "text about birds"})

    results_initial = await char_store.asearch(ns, query="Zany Xerxes")
    assert results_initial[0].key == "doc1"
    initial_score = results_initial[0].score
    assert initial_score is not None

    await char_store.aput(ns, "doc1", {"text": "new text about dogs"})

    results_after = await char_store.asearch(ns, query="Zany Xerxes")
    after_score = next(r.score for r in results_after if r.key == "doc1")
    assert after_score is not None
    assert after_score < initial_score

    results_new = await char_store.asearch(ns, query="new text about dogs")
    doc1_new = next(r.score for r in results_new if r.key == "doc1")
    assert doc1_new is not None and doc1_new > after_score

    # not indexed: never ahead of the three indexed items
    await char_store.aput(ns, "doc4", {"text": "new text about dogs"}, index=False)
    results_new = await char_store.asearch(ns, query="new text about dogs", limit=3)
    assert "doc4" not in keys(results_new)
    assert_unscored_after_scored(await char_store.asearch(ns, query="new text about dogs"), "doc4")


async def test_vector_search_pagination(char_store: RecallStore, ns: tuple[str, ...]) -> None:
    for i in range(5):
        await char_store.aput(ns, f"doc{i}", {"text": f"test document number {i}"})

    page1 = await char_store.asearch(ns, query="test", limit=2)
    page2 = await char_store.asearch(ns, query="test", limit=2, offset=2)
    page3 = await char_store.asearch(ns, query="test", limit=2, offset=4)
    assert len(page1) == 2 and len(page2) == 2 and len(page3) == 1
    assert len(set(keys(page1 + page2 + page3))) == 5
    assert len(await char_store.asearch(ns, query="test", limit=10)) == 5


async def test_vector_search_edge_cases(char_store: RecallStore, ns: tuple[str, ...]) -> None:
    await char_store.aput(ns, "doc1", {"text": "test document"})

    perfect = (await char_store.asearch(ns, query="text test document"))[0].score
    assert perfect is not None

    # an empty query is no query: nothing is ranked
    results = await char_store.asearch(ns, query="")
    assert len(results) == 1 and results[0].score is None
    results = await char_store.asearch(ns, query=None)
    assert len(results) == 1 and results[0].score is None

    results = await char_store.asearch(ns, query="foo " * 100)
    assert len(results) == 1
    assert results[0].score is not None and results[0].score < perfect

    results = await char_store.asearch(ns, query="test!@#$%^&*()")
    assert len(results) == 1
    assert results[0].score is not None and results[0].score < perfect


async def test_embed_with_path(
    module_url: str, char_embeddings: CharacterEmbeddings, ns: tuple[str, ...]
) -> None:
    index: IndexConfig = {
        "dims": char_embeddings.dims,
        "embed": char_embeddings,
        "fields": ["key0", "key1", "key3"],
    }
    async with open_store(module_url, index=index) as store:
        # two vectors (key0 is missing: not an error)
        await store.aput(ns, "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
        # three vectors (key2 is not indexed)
        await store.aput(ns, "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})

        results = await store.asearch(ns, query="xxx")
        assert len(results) == 2 and results[0].key != results[1].key
        ascore, bscore = results[0].score, results[1].score
        assert ascore is not None and bscore is not None
        assert ascore == pytest.approx(bscore, abs=1e-3)
        assert ascore == pytest.approx(1.0, abs=1e-3)

        results = await store.asearch(ns, query="uuu")
        assert keys(results) == ["doc2", "doc1"]
        assert results[0].score == pytest.approx(ascore, abs=1e-3)
        assert results[1].score == pytest.approx(
            best_cosine(char_embeddings, "uuu", ["xxx", "zzz"]), abs=1e-3
        )

        results = await store.asearch(ns, query="zzz")
        assert keys(results) == ["doc1", "doc2"]

        # un-indexed: both low
        results = await store.asearch(ns, query="www")
        assert len(results) == 2
        assert all(r.score is not None and r.score < ascore - 0.05 for r in results)
        doc2 = next(r for r in results if r.key == "doc2")
        assert doc2.score == pytest.approx(
            best_cosine(char_embeddings, "www", ["uuu", "vvv", "xxx"]), abs=1e-3
        )


async def test_embed_with_path_operation_config(
    module_url: str, char_embeddings: CharacterEmbeddings, ns: tuple[str, ...]
) -> None:
    # the store's default field matches nothing in these values
    index: IndexConfig = {
        "dims": char_embeddings.dims,
        "embed": char_embeddings,
        "fields": ["key17"],
    }
    async with open_store(module_url, index=index) as store:
        doc3 = {"key0": "aaa", "key1": "bbb", "key2": "ccc", "key3": "ddd"}
        doc4 = {"key0": "eee", "key1": "bbb", "key2": "fff", "key3": "ggg"}
        await store.aput(ns, "doc3", doc3, index=["key0", "key1"])
        await store.aput(ns, "doc4", doc4, index=["key1", "key3"])

        results = await store.asearch(ns, query="aaa")
        assert keys(results) == ["doc3", "doc4"]
        assert results[0].score is not None and results[1].score is not None
        assert results[0].score > results[1].score

        results = await store.asearch(ns, query="ggg")
        assert keys(results) == ["doc4", "doc3"]

        results = await store.asearch(ns, query="bbb")
        assert len(results) == 2 and results[0].key != results[1].key
        assert results[0].score == pytest.approx(results[1].score, abs=1e-3)

        results = await store.asearch(ns, query="ccc")
        assert len(results) == 2
        assert all(r.score is not None and r.score < 0.9 for r in results)

        await store.aput(ns, "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
        results = await store.asearch(ns)
        assert len(results) == 3
        assert all(r.score is None for r in results)

        results = await store.asearch(ns, query="hhh")
        assert_unscored_after_scored(results, "doc5")
        assert {"doc3", "doc4"} <= set(keys(results))


@pytest.mark.parametrize("query", ["aaa", "bbb", "ccc", "abcd", "poisson"])
async def test_scores_are_cosine_similarity(
    module_url: str, char_embeddings: CharacterEmbeddings, ns: tuple[str, ...], query: str
) -> None:
    index: IndexConfig = {
        "dims": char_embeddings.dims,
        "embed": char_embeddings,
        "fields": ["key0"],
    }
    async with open_store(module_url, index=index) as store:
        await store.aput(ns, "doc", {"key0": "aaa"}, index=["key0", "key1"])
        results = await store.asearch(ns, query=query)
        assert len(results) == 1
        assert results[0].score == pytest.approx(cosine(char_embeddings, query, "aaa"), abs=1e-3)


async def test_search_sorting(
    module_url: str, char_embeddings: CharacterEmbeddings, ns: tuple[str, ...]
) -> None:
    index: IndexConfig = {
        "dims": char_embeddings.dims,
        "embed": char_embeddings,
        "fields": ["key1"],
    }
    async with open_store(module_url, index=index) as store:
        await store.aput((*ns, "M"), "M", {"key1": "mmm"})
        await store.abatch([PutOp((*ns, "A"), f"A{i}", {"key1": "no"}) for i in range(100)])
        await store.abatch([PutOp((*ns, "Z"), f"Z{i}", {"key1": "no"}) for i in range(100)])

        results = await store.asearch(ns, query="mmm", limit=10)
        assert len(results) == 10
        assert len(set(keys(results))) == 10
        assert results[0].key == "M"
        assert results[0].score is not None and results[1].score is not None
        assert results[0].score > results[1].score


async def test_non_ascii(char_store: RecallStore, ns: tuple[str, ...]) -> None:
    texts = {
        "1": "这是中文",
        "2": "これは日本語です",
        "3": "이건 한국어야",
        "4": "Это русский",
        "5": "यह रूसी है",
    }
    namespace = (*ns, "memories")
    for key, text in texts.items():
        await char_store.aput(namespace, key, {"text": text})
    for key, text in texts.items():
        results = await char_store.asearch(namespace, query=text)
        assert results[0].key == key
        item = await char_store.aget(namespace, key)
        assert item is not None and item.value == {"text": text}


async def test_whole_value_is_the_default_field(
    module_url: str, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
) -> None:
    """fields ["$"] (the default) embeds the whole value as JSON: its keys' and values' words."""
    index: IndexConfig = {"dims": word_embeddings.dimensions, "embed": word_embeddings}
    async with open_store(module_url, index=index) as store:
        value = {"title": "alpha", "body": {"note": "bravo"}}
        await store.aput(ns, "k", value)
        [hit] = await store.asearch(ns, query="title alpha body note bravo")
        assert hit.score == pytest.approx(1.0, abs=1e-3)
        [hit] = await store.asearch(ns, query="bravo")
        assert hit.score == pytest.approx(
            cosine(word_embeddings, "bravo", json.dumps(value, sort_keys=True)), abs=1e-3
        )


@pytest.mark.parametrize(
    ("path", "value", "queries"),
    [
        pytest.param(
            "a.b",
            {"a": {"b": "zebra stripes"}, "c": "violin music"},
            {"zebra stripes": ["zebra stripes"], "violin music": ["zebra stripes"]},
            id="nested",
        ),
        pytest.param(
            "arr[*].c",
            {"arr": [{"c": "red fox"}, {"c": "blue whale"}, {"d": "green frog"}]},
            {
                "red fox": ["red fox", "blue whale"],
                "blue whale": ["red fox", "blue whale"],
                "green frog": ["red fox", "blue whale"],
            },
            id="every-element",
        ),
        pytest.param(
            "arr[0].c",
            {"arr": [{"c": "red fox"}, {"c": "blue whale"}]},
            {"red fox": ["red fox"], "blue whale": ["red fox"]},
            id="first-element",
        ),
        pytest.param(
            "tags[*]",
            {"tags": ["quiet lake", "loud city"], "other": "deep forest"},
            {"loud city": ["quiet lake", "loud city"], "deep forest": ["quiet lake", "loud city"]},
            id="array-of-texts",
        ),
    ],
)
async def test_field_paths(
    module_url: str,
    word_embeddings: FakeEmbeddings,
    ns: tuple[str, ...],
    path: str,
    value: dict[str, Any],
    queries: dict[str, list[str]],
) -> None:
    """Only the texts at the path are embedded: each query scores its best cosine against
    those texts (given here), whether the path is the store's or the put's."""
    index: IndexConfig = {
        "dims": word_embeddings.dimensions,
        "embed": word_embeddings,
        "fields": [path],
    }
    async with open_store(module_url, index=index) as store:
        await store.aput((*ns, "store"), "k", value)
        await store.aput((*ns, "op"), "k", value, index=[path])
        for sub in ("store", "op"):
            for query, texts in queries.items():
                [hit] = await store.asearch((*ns, sub), query=query)
                assert hit.score == pytest.approx(
                    best_cosine(word_embeddings, query, texts), abs=1e-3
                ), (
                    sub,
                    query,
                )


async def test_one_item_with_many_fields_counts_once(
    module_url: str, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
) -> None:
    index: IndexConfig = {
        "dims": word_embeddings.dimensions,
        "embed": word_embeddings,
        "fields": ["arr[*].c"],
    }
    async with open_store(module_url, index=index) as store:
        elements = [f"shared element{i}" for i in range(30)]
        await store.aput(ns, "big", {"arr": [{"c": text} for text in elements]})
        others = {f"o{j}": f"shared other{j} extra{j}" for j in range(5)}
        for key, text in others.items():
            await store.aput(ns, key, {"arr": [{"c": text}]})

        query = "shared element7"
        results = await store.asearch(ns, query=query, limit=10)
        assert sorted(keys(results)) == sorted(["big", *others])
        assert results[0].key == "big"
        assert results[0].score == pytest.approx(1.0, abs=1e-3)
        for r in results[1:]:
            assert r.score == pytest.approx(cosine(word_embeddings, query, others[r.key]), abs=1e-3)

        # the big item does not crowd a small page
        top2 = await store.asearch(ns, query=query, limit=2)
        assert len(top2) == 2 and top2[0].key == "big" and top2[1].key != "big"
        second = await store.asearch(ns, query=query, limit=1, offset=1)
        assert keys(second) == [top2[1].key]
        rest = await store.asearch(ns, query=query, limit=10, offset=1)
        assert "big" not in keys(rest) and len(rest) == 5


async def test_offset_pages_the_query_ranking(
    module_url: str, char_embeddings: CharacterEmbeddings, ns: tuple[str, ...]
) -> None:
    index: IndexConfig = {
        "dims": char_embeddings.dims,
        "embed": char_embeddings,
        "fields": ["text"],
    }
    texts = {
        f"k{i:02d}": text
        for i, text in enumerate(
            [
                "a quiet morning by the lake",
                "the lake was frozen solid",
                "quantum physics lecture notes",
                "morning coffee and a croissant",
                "zzz sleepy zzz",
                "lakeside cabin rental",
                "xylophone practice",
                "the quick brown fox",
                "morning lake mist",
                "tax return deadline",
                "a walk around the lake in the morning",
                "jazz on vinyl",
                "mmm pancakes",
                "quiet lake morning",
            ]
        )
    }
    query = "morning by the lake"
    expected = sorted(texts, key=lambda k: cosine(char_embeddings, query, texts[k]), reverse=True)
    expected_scores = [cosine(char_embeddings, query, texts[k]) for k in expected]
    # distinct scores, so the ranking is one order
    assert all(a - b > 2e-3 for a, b in itertools.pairwise(expected_scores))

    async with open_store(module_url, index=index) as store:
        await store.abatch([PutOp(ns, key, {"text": text}) for key, text in texts.items()])
        full = await store.asearch(ns, query=query, limit=len(texts))
        assert keys(full) == expected
        assert [r.score for r in full] == pytest.approx(expected_scores, abs=1e-3)
        pages = [await store.asearch(ns, query=query, limit=4, offset=o) for o in range(0, 16, 4)]
        assert [len(p) for p in pages] == [4, 4, 4, 2]
        assert [k for page in pages for k in keys(page)] == expected
        assert await store.asearch(ns, query=query, limit=4, offset=len(texts)) == []
        # and with a filter, the filtered ranking is paged
        odd = {k for k in texts if int(k[1:]) % 2}
        filtered = [k for k in expected if k in odd]
        await store.abatch([PutOp(ns, k, {"text": texts[k], "odd": True}) for k in odd])
        pages = [
            await store.asearch(ns, query=query, filter={"odd": True}, limit=3, offset=o)
            for o in range(0, 9, 3)
        ]
        assert [k for page in pages for k in keys(page)] == filtered


async def test_exact_search_never_short(
    word_store: RecallStore, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
) -> None:
    """The 400 items nearest the query sit in a sibling namespace and in the same namespace
    under a failing filter: an approximate index's candidate list would hold only them. The
    search still returns every item the namespace and filter admit, best first."""
    query = "needle haystack"
    await word_store.abatch(
        [PutOp((*ns, "big"), f"b{i}", {"text": query, "keep": False}) for i in range(400)]
    )
    small = {f"s{i:02d}": f"needle other{i} words{i}" for i in range(25)}
    await word_store.abatch(
        [PutOp((*ns, "small"), key, {"text": text, "keep": True}) for key, text in small.items()]
    )
    mixed_keep = {f"m{i:02d}": f"unrelated{i} text{i}" for i in range(10)}
    await word_store.abatch(
        [PutOp((*ns, "mixed"), f"x{i}", {"text": query, "keep": False}) for i in range(400)]
        + [
            PutOp((*ns, "mixed"), key, {"text": text, "keep": True})
            for key, text in mixed_keep.items()
        ]
    )

    results = await word_store.asearch((*ns, "small"), query=query, limit=25)
    assert sorted(keys(results)) == sorted(small)
    for r in results:
        assert r.score == pytest.approx(cosine(word_embeddings, query, small[r.key]), abs=1e-3)

    results = await word_store.asearch((*ns, "mixed"), query=query, filter={"keep": True}, limit=10)
    assert sorted(keys(results)) == sorted(mixed_keep)

    results = await word_store.asearch(ns, query=query, filter={"keep": True}, limit=50)
    assert sorted(keys(results)) == sorted([*small, *mixed_keep])
    texts = small | mixed_keep
    for r in results:
        assert r.score == pytest.approx(cosine(word_embeddings, query, texts[r.key]), abs=1e-3)
    scores = [r.score for r in results if r.score is not None]
    assert len(scores) == 35 and scores == sorted(scores, reverse=True)

    results = await word_store.asearch(ns, query=query, limit=1000)
    assert len(results) == 835
    assert all(r.score == pytest.approx(1.0, abs=1e-3) for r in results[:800])


async def test_identical_texts_in_one_batch(word_store: RecallStore, ns: tuple[str, ...]) -> None:
    await word_store.abatch(
        [
            PutOp(ns, "a", {"text": "same words here"}),
            PutOp(ns, "b", {"text": "same words here"}),
            PutOp(ns, "c", {"text": "same words here", "extra": 1}),
            PutOp(ns, "d", {"text": "different entirely"}),
        ]
    )
    results = await word_store.asearch(ns, query="same words here")
    assert sorted(keys(results[:3])) == ["a", "b", "c"]
    assert all(r.score == pytest.approx(1.0, abs=1e-3) for r in results[:3])
    assert results[3].key == "d"


class TestRePutLeavesNoStaleVector:
    """A re-put replaces all of an item's vectors. After it, a query matching only the old
    texts scores the item by its current texts (`best_cosine` of them, well below the 1.0 the
    old text gave), or, when it has no vector any more, `assert_unscored_after_scored`."""

    async def test_removed_field(
        self, module_url: str, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
    ) -> None:
        index: IndexConfig = {
            "dims": word_embeddings.dimensions,
            "embed": word_embeddings,
            "fields": ["title", "body"],
        }
        async with open_store(module_url, index=index) as store:
            await store.aput(ns, "k", {"title": "alpha bravo", "body": "charlie delta"})
            [hit] = await store.asearch(ns, query="charlie delta")
            assert hit.score == pytest.approx(1.0, abs=1e-3)

            await store.aput(ns, "k", {"title": "echo foxtrot"})
            [hit] = await store.asearch(ns, query="charlie delta")
            expected = cosine(word_embeddings, "charlie delta", "echo foxtrot")
            assert expected < 0.5
            assert hit.score == pytest.approx(expected, abs=1e-3)
            [hit] = await store.asearch(ns, query="alpha bravo")
            assert hit.score == pytest.approx(
                cosine(word_embeddings, "alpha bravo", "echo foxtrot"), abs=1e-3
            )

    async def test_changed_text(
        self, word_store: RecallStore, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
    ) -> None:
        await word_store.aput(ns, "k", {"text": "golf hotel"})
        await word_store.aput(ns, "k", {"text": "india juliet"})
        [hit] = await word_store.asearch(ns, query="golf hotel")
        assert hit.score == pytest.approx(
            cosine(word_embeddings, "golf hotel", "india juliet"), abs=1e-3
        )
        [hit] = await word_store.asearch(ns, query="india juliet")
        assert hit.score == pytest.approx(1.0, abs=1e-3)

    async def test_shrunk_array(
        self, module_url: str, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
    ) -> None:
        index: IndexConfig = {
            "dims": word_embeddings.dimensions,
            "embed": word_embeddings,
            "fields": ["arr[*]"],
        }
        async with open_store(module_url, index=index) as store:
            await store.aput(ns, "k", {"arr": ["kilo lima", "mike november", "oscar papa"]})
            [hit] = await store.asearch(ns, query="oscar papa")
            assert hit.score == pytest.approx(1.0, abs=1e-3)

            await store.aput(ns, "k", {"arr": ["kilo lima"]})
            for old in ("mike november", "oscar papa"):
                [hit] = await store.asearch(ns, query=old)
                assert hit.score == pytest.approx(
                    cosine(word_embeddings, old, "kilo lima"), abs=1e-3
                )

            await store.aput(ns, "k", {"arr": []})
            await store.aput(ns, "other", {"arr": ["quebec romeo"]})
            results = await store.asearch(ns, query="kilo lima")
            assert_unscored_after_scored(results, "k")
            assert results[0].key == "other"

    async def test_reput_with_index_false(
        self, word_store: RecallStore, ns: tuple[str, ...]
    ) -> None:
        await word_store.aput(ns, "k", {"text": "sierra tango"})
        await word_store.aput(ns, "indexed", {"text": "uniform victor"})
        [first, *_] = await word_store.asearch(ns, query="sierra tango")
        assert first.key == "k" and first.score == pytest.approx(1.0, abs=1e-3)

        await word_store.aput(ns, "k", {"text": "sierra tango whiskey"}, index=False)
        results = await word_store.asearch(ns, query="sierra tango")
        assert_unscored_after_scored(results, "k")
        assert results[0].key == "indexed" and results[0].score is not None
        item = await word_store.aget(ns, "k")
        assert item is not None and item.value == {"text": "sierra tango whiskey"}

        # indexed again: scored again, by the new text
        await word_store.aput(ns, "k", {"text": "sierra tango whiskey"})
        [first, *_] = await word_store.asearch(ns, query="sierra tango whiskey")
        assert first.key == "k" and first.score == pytest.approx(1.0, abs=1e-3)

    async def test_reput_with_other_fields(
        self, word_store: RecallStore, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
    ) -> None:
        value = {"a": "xray yankee", "b": "zulu alpha"}
        await word_store.aput(ns, "k", value, index=["a"])
        [hit] = await word_store.asearch(ns, query="xray yankee")
        assert hit.score == pytest.approx(1.0, abs=1e-3)
        await word_store.aput(ns, "k", value, index=["b"])
        [hit] = await word_store.asearch(ns, query="xray yankee")
        assert hit.score == pytest.approx(
            cosine(word_embeddings, "xray yankee", "zulu alpha"), abs=1e-3
        )

    async def test_reput_in_one_batch(
        self, word_store: RecallStore, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
    ) -> None:
        """The last put of an item in a batch wins, vectors included."""
        await word_store.abatch(
            [PutOp(ns, "k", {"text": "bravo charlie"}), PutOp(ns, "k", {"text": "delta echo"})]
        )
        [hit] = await word_store.asearch(ns, query="bravo charlie")
        assert hit.score == pytest.approx(
            cosine(word_embeddings, "bravo charlie", "delta echo"), abs=1e-3
        )
        item = await word_store.aget(ns, "k")
        assert item is not None and item.value == {"text": "delta echo"}

    async def test_delete_then_put(
        self, word_store: RecallStore, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
    ) -> None:
        await word_store.aput(ns, "k", {"text": "foxtrot golf"})
        await word_store.adelete(ns, "k")
        assert await word_store.asearch(ns, query="foxtrot golf") == []
        await word_store.aput(ns, "k", {"text": "hotel india"})
        [hit] = await word_store.asearch(ns, query="foxtrot golf")
        assert hit.score == pytest.approx(
            cosine(word_embeddings, "foxtrot golf", "hotel india"), abs=1e-3
        )


async def test_item_without_text_at_paths_is_unscored(
    word_store: RecallStore, ns: tuple[str, ...]
) -> None:
    await word_store.aput(ns, "notext", {"title": "juliet kilo"})
    await word_store.aput(ns, "blank", {"text": "   "})
    await word_store.aput(ns, "text", {"text": "lima mike"})
    results = await word_store.asearch(ns, query="juliet kilo")
    assert_unscored_after_scored(results, "notext")
    assert_unscored_after_scored(results, "blank")
    assert results[0].key == "text"


async def test_concurrent_reputs_leave_only_the_final_vectors(
    module_url: str, word_embeddings: FakeEmbeddings, ns: tuple[str, ...]
) -> None:
    """Twenty puts of one item at once: whichever lands last, the item's vectors are exactly
    those of its final value (no vector of a losing put survives)."""
    index: IndexConfig = {
        "dims": word_embeddings.dimensions,
        "embed": word_embeddings,
        "fields": ["arr[*]"],
    }
    async with open_store(module_url, index=index) as store:
        for round_ in range(3):
            values = [[f"r{round_}x{i} alpha{i}", f"r{round_}y{i} beta{i}"] for i in range(20)]
            await asyncio.gather(*[store.aput(ns, "k", {"arr": texts}) for texts in values])
            item = await store.aget(ns, "k")
            assert item is not None and item.value["arr"] in values
            final = item.value["arr"]
            for texts in values:
                [hit] = await store.asearch(ns, query=texts[0])
                expected = best_cosine(word_embeddings, texts[0], final)
                assert hit.score == pytest.approx(expected, abs=1e-3), (texts, final)


async def test_vectors_of_another_dimension_are_not_compared(
    module_url: str, ns: tuple[str, ...]
) -> None:
    """Two stores with different models share a namespace: each ranks the items it embedded
    and returns the other's unscored, rather than failing on a dimension mismatch."""
    small: IndexConfig = {"dims": 32, "embed": FakeEmbeddings(32), "fields": ["text"]}
    large: IndexConfig = {"dims": 64, "embed": FakeEmbeddings(64), "fields": ["text"]}
    async with open_store(module_url, index=small) as a, open_store(module_url, index=large) as b:
        await a.aput(ns, "a", {"text": "shared words"})
        await b.aput(ns, "b", {"text": "shared words"})
        results = await a.asearch(ns, query="shared words")
        assert results[0].key == "a" and results[0].score == pytest.approx(1.0, abs=1e-3)
        assert_unscored_after_scored(results, "b")
        results = await b.asearch(ns, query="shared words")
        assert results[0].key == "b" and results[0].score == pytest.approx(1.0, abs=1e-3)
        assert_unscored_after_scored(results, "a")
