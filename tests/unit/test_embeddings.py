import asyncio

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from recall.embeddings import (
    BgeSmallEmbeddings,
    Embedder,
    MiniLMEmbeddings,
    embedding_model_name,
    load_embeddings,
)
from recall.errors import ConfigError, EmbeddingError
from recall.testing import FakeEmbeddings


class Counting(FakeEmbeddings):
    def __init__(self) -> None:
        super().__init__(8)
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return super().embed_query(text)


class Broken(Embeddings):
    def __init__(self, vector: list[float]) -> None:
        self.vector = vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vector for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vector


async def test_query_cache_and_truncation() -> None:
    inner = Counting()
    embedder = Embedder(inner, max_query_length=5, cache_ttl=60)
    first = await embedder.embed_query("abcdefgh")
    second = await embedder.embed_query("abcdeXYZ")  # same first five characters
    assert inner.queries == ["abcde"]
    assert np.array_equal(first, second)


async def test_cache_can_be_disabled() -> None:
    inner = Counting()
    embedder = Embedder(inner, cache_ttl=0)
    await embedder.embed_query("same")
    await embedder.embed_query("same")
    assert inner.queries == ["same", "same"]


async def test_dimensions_are_probed_when_not_declared() -> None:
    assert await Embedder(Broken([0.1, 0.2, 0.3])).dimensions() == 3
    assert await Embedder(FakeEmbeddings(16)).dimensions() == 16


@pytest.mark.parametrize(
    ("vector", "message"),
    [([float("nan"), 1.0], "NaN"), ([0.0, 0.0], "zero vector"), ([], "shape")],
)
async def test_unusable_vectors_are_errors(vector: list[float], message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        await Embedder(Broken(vector)).embed_query("x")


async def test_wrong_dimension_is_an_error() -> None:
    embedder = Embedder(FakeEmbeddings(8))
    with pytest.raises(EmbeddingError, match="expected 8"):
        embedder.check_vector([1.0] * 9)


async def test_model_exceptions_become_embedding_errors() -> None:
    class Raising(FakeEmbeddings):
        async def aembed_query(self, text: str) -> list[float]:
            raise RuntimeError("model server down")

    with pytest.raises(EmbeddingError, match="model server down"):
        await Embedder(Raising()).embed_query("x")


async def test_documents_are_batched() -> None:
    calls: list[int] = []

    class Recording(FakeEmbeddings):
        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            calls.append(len(texts))
            return self.embed_documents(texts)

    out = await Embedder(Recording(), batch_size=4).embed_documents([f"t{i}" for i in range(10)])
    assert calls == [4, 4, 2]
    assert len(out) == 10


async def test_documents_are_batched_by_length_and_returned_in_order() -> None:
    batches: list[list[str]] = []

    class Recording(FakeEmbeddings):
        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            batches.append(texts)
            return self.embed_documents(texts)

    texts = ["a " * n + f"w{n}" for n in (9, 1, 7, 3, 8, 2)]
    out = await Embedder(Recording(), batch_size=2).embed_documents(texts)
    # each batch holds texts of neighbouring lengths (less padding for a transformer)
    assert [[len(t) for t in b] for b in batches] == [[4, 6], [8, 16], [18, 20]]
    expected = np.array(FakeEmbeddings().embed_documents(texts), dtype=np.float32)
    assert np.array_equal(np.stack(out), expected)  # in the given order


def test_model_names() -> None:
    assert embedding_model_name(FakeEmbeddings(8)) == "fake-hash-8"
    assert embedding_model_name(MiniLMEmbeddings()) == "all-MiniLM-L6-v2"
    assert embedding_model_name(Broken([1.0])) == "Broken"


def test_models_are_lazy_and_specs_are_checked() -> None:
    model = load_embeddings("all-MiniLM-L6-v2")
    assert isinstance(model, MiniLMEmbeddings)
    assert model._model is None  # nothing loaded until the first embedding
    default = load_embeddings("bge-small-en-v1.5")
    assert isinstance(default, BgeSmallEmbeddings) and not default.loaded
    with pytest.raises(ConfigError, match="RECALL_EMBEDDING_MODEL"):
        load_embeddings("no-such-model")
    with pytest.raises(ConfigError, match="RECALL_EMBEDDING_MODEL"):
        load_embeddings("nosuchprovider:some-model")


def test_fake_embeddings_are_deterministic_and_normalized() -> None:
    fake = FakeEmbeddings(32)
    a = np.array(fake.embed_query("the dog barks"))
    assert np.allclose(a, fake.embed_query("the dog barks"))
    assert abs(np.linalg.norm(a) - 1.0) < 1e-9
    assert np.linalg.norm(fake.embed_query("!!!")) > 0


@pytest.mark.model
async def test_minilm_embeds_offline_without_blocking_the_loop() -> None:
    model = MiniLMEmbeddings()
    embedder = Embedder(model)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    vector = await embedder.embed_query("I adopted a dog named Max")
    task.cancel()
    assert vector.shape == (384,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3
    assert ticks > 1  # the loop kept running while the model loaded and embedded
