"""What `index["embed"]` may be (a LangChain Embeddings, a sync or async function of texts,
or nothing: the project's offline MiniLM model, 384 dimensions), and embedding failures: a
clear error, nothing written, the stored item kept."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langgraph.store.base import IndexConfig, PutOp

from recall import RecallStore
from recall.errors import RecallError
from recall.testing import FakeEmbeddings
from tests.integration.basestore.conftest import cosine, keys, open_store

WORDS = FakeEmbeddings(32)


def sync_embed(texts: Sequence[str]) -> list[list[float]]:
    return WORDS.embed_documents(list(texts))


async def async_embed(texts: Sequence[str]) -> list[list[float]]:
    return WORDS.embed_documents(list(texts))


@pytest.mark.parametrize(
    "embed", [sync_embed, async_embed], ids=["sync-function", "async-function"]
)
async def test_embed_functions(module_url: str, ns: tuple[str, ...], embed: object) -> None:
    index: IndexConfig = {"dims": 32, "embed": embed, "fields": ["text"]}  # type: ignore[typeddict-item]
    async with open_store(module_url, index=index) as store:
        await store.aput(ns, "a", {"text": "red kite soaring"})
        await store.aput(ns, "b", {"text": "deep sea diver"})
        results = await store.asearch(ns, query="red kite soaring")
        assert keys(results) == ["a", "b"]
        assert results[0].score == pytest.approx(1.0, abs=1e-3)
        assert results[1].score == pytest.approx(
            cosine(WORDS, "red kite soaring", "deep sea diver"), abs=1e-3
        )


class Flaky(FakeEmbeddings):
    """Fails on any text containing "boom"; otherwise the bag-of-words embedder."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any("boom" in t for t in texts):
            raise RuntimeError("the embedding service is down")
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


class WrongSize(FakeEmbeddings):
    """Returns vectors of 8 dimensions whatever it was configured with."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * 7 for _ in texts]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


async def test_embedding_failure_is_a_clear_error_and_loses_nothing(
    module_url: str, ns: tuple[str, ...]
) -> None:
    index: IndexConfig = {"dims": 32, "embed": Flaky(32), "fields": ["text"]}
    async with open_store(module_url, index=index) as store:
        await store.aput(ns, "k", {"text": "calm words"})
        with pytest.raises(RecallError, match=r"\w"):
            await store.aput(ns, "k", {"text": "boom words"})
        with pytest.raises(RecallError):
            await store.abatch(
                [PutOp(ns, "new", {"text": "fine"}), PutOp(ns, "k2", {"text": "boom"})]
            )
        item = await store.aget(ns, "k")
        assert item is not None and item.value == {"text": "calm words"}
        assert await store.aget(ns, "new") is None
        assert await store.aget(ns, "k2") is None
        # the old vector is intact too
        [hit] = await store.asearch(ns, query="calm words")
        assert hit.key == "k" and hit.score == pytest.approx(1.0, abs=1e-3)
        # a failing query embedding is a clear error as well
        with pytest.raises(RecallError):
            await store.asearch(ns, query="boom")
        # an unindexed put needs no embedding
        await store.aput(ns, "k", {"text": "boom but not indexed"}, index=False)
        item = await store.aget(ns, "k")
        assert item is not None and item.value == {"text": "boom but not indexed"}


async def test_wrong_vector_size_is_a_clear_error(module_url: str, ns: tuple[str, ...]) -> None:
    index: IndexConfig = {"dims": 32, "embed": WrongSize(32), "fields": ["text"]}
    async with open_store(module_url, index=index) as store:
        with pytest.raises(RecallError):
            await store.aput(ns, "k", {"text": "anything"})
        assert await store.aget(ns, "k") is None
        await store.aput(ns, "plain", {"text": "anything"}, index=False)
        assert await store.aget(ns, "plain") is not None


@pytest.mark.model
async def test_default_offline_model(module_url: str, ns: tuple[str, ...]) -> None:
    """`embed` left out: the project's default model (bge-small-en-v1.5), 384 dimensions,
    semantic enough to tell food from weather."""
    async with open_store(module_url, index={"fields": ["text"]}) as store:
        assert store.index_config is not None and store.index_config["dims"] == 384
        await store.aput(ns, "peanuts", {"text": "Allergic to peanuts"})
        await store.aput(ns, "sky", {"text": "The sky is blue today"})
        await store.aput(ns, "car", {"text": "My car needs new tyres"})
        results = await store.asearch(ns, query="food allergies", limit=3)
        assert results[0].key == "peanuts"
        scores = [r.score for r in results]
        assert all(s is not None and -1.0 <= s <= 1.0 for s in scores)
        [exact] = await store.asearch(ns, query="Allergic to peanuts", limit=1)
        # not 1.0: bge-small puts its retrieval instruction before a query, not a document
        assert exact.key == "peanuts" and exact.score is not None and exact.score > 0.9


async def test_index_fields_must_be_paths(module_url: str) -> None:
    bad: IndexConfig = {"dims": 32, "embed": WORDS, "fields": "text"}  # type: ignore[typeddict-item]
    with pytest.raises((RecallError, ValueError)):
        async with open_store(module_url, index=bad):
            pass


async def test_unknown_search_mode_is_a_clear_error(module_url: str) -> None:
    with pytest.raises((RecallError, ValueError), match="mode"):
        async with open_store(module_url, mode="fuzzy"):
            pass


async def test_store_without_index_has_no_index_config(store: RecallStore) -> None:
    assert store.index_config is None


async def test_dims_asked_of_the_model_when_left_out(module_url: str, ns: tuple[str, ...]) -> None:
    index: IndexConfig = {"embed": FakeEmbeddings(48), "fields": ["text"]}
    async with open_store(module_url, index=index) as store:
        assert store.index_config is not None and store.index_config["dims"] == 48
        await store.aput(ns, "k", {"text": "plain words"})
        [hit] = await store.asearch(ns, query="plain words")
        assert hit.score == pytest.approx(1.0, abs=1e-3)


async def test_unloadable_provider_model_is_a_clear_error(module_url: str) -> None:
    """A "provider:model" whose package is not installed fails at connect, with an error that
    names what the caller passed (index["embed"]), not an environment variable they never set."""
    index: IndexConfig = {"dims": 8, "embed": "cohere:embed-english-v3.0"}
    with pytest.raises((RecallError, ValueError, ImportError), match="cohere") as caught:
        async with open_store(module_url, index=index):
            pass
    assert "RECALL_EMBEDDING_MODEL" not in str(caught.value)
