"""Fixtures of the BaseStore conformance suite: fresh databases, stores opened on them, a
namespace no other test uses, and deterministic embedders.

Every module gets its own database (`module_url`); a test that needs an empty store (listing
every namespace, searching the empty prefix, counting what a sweep deletes) takes `fresh_url`.

Every test runs twice (`search_plan`): with the plans the store chooses (small namespaces: the
exact scan), and with every semantic search sent through the indexed plan (migration 0015:
a namespace's own HNSW index, or the one over every namespace for the empty prefix), the
thresholds at 1 so that the indexes are really built in the background as searches meet
namespaces. Both must give the same answers.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, SearchItem, TTLConfig

from recall import RecallStore
from recall.basestore.planning import IndexPlanner, Through
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

CHAR_DIMS = 256
WORD_DIMS = 256


class CharacterEmbeddings(Embeddings):
    """LangGraph's test embedder (libs/checkpoint/tests/embed_test_utils.py), ported.

    A text is the frequency-weighted sum of one random projection per character, normalised.
    LangGraph draws the projections from one RNG in the order characters are first seen, so
    a vector depends on what was embedded before; here each character's projection is drawn
    from its own seed, so the same text always gets the same vector.
    """

    def __init__(self, dims: int = CHAR_DIMS, seed: int = 42) -> None:
        self.dims = dims
        self.seed = seed
        self._projections: dict[str, np.ndarray[Any, np.dtype[np.float64]]] = {}

    def _projection(self, char: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        proj = self._projections.get(char)
        if proj is None:
            digest = hashlib.blake2b(f"{self.seed}:{char}".encode(), digest_size=8).digest()
            rng = random.Random(int.from_bytes(digest, "big"))
            proj = np.array([rng.gauss(0, 1 / self.dims**0.5) for _ in range(self.dims)])
            self._projections[char] = proj
        return proj

    def _embed_one(self, text: str) -> list[float]:
        if not text:
            # LangGraph's version returns the zero vector, whose cosine is undefined; a fixed
            # direction keeps every test on defined scores (no test embeds an empty text).
            text = "\x00"
        vec = np.zeros(self.dims)
        # the same bits in every process and on every CPU: the characters are added in one
        # order (a set's order changes with PYTHONHASHSEED), and the norm is numpy's own sum
        # (np.linalg.norm of a vector is BLAS's dot, whose last bit depends on the CPU's kernel)
        for char in sorted(set(text)):
            vec += (text.count(char) / len(text)) * self._projection(char)
        return [float(x) for x in vec / np.sqrt(np.sum(vec * vec))]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text."""
        return [self._embed_one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._embed_one(text)


def cosine(embeddings: Embeddings, a: str, b: str) -> float:
    """The cosine similarity of two texts under `embeddings`, computed here, in float64."""
    va, vb = (np.asarray(v) for v in embeddings.embed_documents([a, b]))
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


def keys(items: Sequence[SearchItem]) -> list[str]:
    """The keys of search results, in order."""
    return [item.key for item in items]


def _always_indexed(planner: IndexPlanner, prefix: str, dims: int) -> Through:
    return "namespace" if prefix else "every"


@pytest.fixture(autouse=True, params=["chosen", "indexed"])
def search_plan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store's own choice of plan, or the indexed plan for every semantic search."""
    if request.param == "indexed":
        monkeypatch.setenv("RECALL_STORE_INDEX_THRESHOLD", "1")
        monkeypatch.setenv("RECALL_STORE_WIDE_THRESHOLD", "1")
        monkeypatch.setattr(IndexPlanner, "through", _always_indexed)
    return str(request.param)


@pytest.fixture(scope="module")
async def module_url(databases: Databases) -> str:
    """A database shared by one module's tests (each test works in its own namespace)."""
    return await databases.create("recall_bs")


@pytest.fixture
async def fresh_url(databases: Databases) -> str:
    """A database of this test alone: nothing else is stored in it."""
    return await databases.create("recall_bs_fresh")


@pytest.fixture
def ns() -> tuple[str, ...]:
    """A namespace root no other test uses."""
    return (f"t{uuid.uuid4().hex[:12]}",)


@pytest.fixture
def char_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(CHAR_DIMS)


@pytest.fixture
def word_embeddings() -> FakeEmbeddings:
    """Bag-of-words embeddings: texts without a common word score near 0, equal word sets 1."""
    return FakeEmbeddings(WORD_DIMS)


@asynccontextmanager
async def open_store(
    url: str,
    *,
    index: IndexConfig | None = None,
    ttl: TTLConfig | None = None,
    mode: Any = "semantic",
) -> AsyncIterator[RecallStore]:
    """`RecallStore.connect(...)` as these tests open it."""
    async with RecallStore.connect(database_url=url, index=index, ttl=ttl, mode=mode) as store:
        yield store


@pytest.fixture
async def store(module_url: str) -> AsyncIterator[RecallStore]:
    """A store without an index (nothing embedded) on the module's database."""
    async with open_store(module_url) as s:
        yield s


@pytest.fixture
async def char_store(
    module_url: str, char_embeddings: CharacterEmbeddings
) -> AsyncIterator[RecallStore]:
    """A store indexing the whole value ("$") with LangGraph's character embeddings."""
    index: IndexConfig = {"dims": char_embeddings.dims, "embed": char_embeddings}
    async with open_store(module_url, index=index) as s:
        yield s


@pytest.fixture
async def word_store(
    module_url: str, word_embeddings: FakeEmbeddings
) -> AsyncIterator[RecallStore]:
    """A store indexing the field "text" with bag-of-words embeddings."""
    index: IndexConfig = {
        "dims": word_embeddings.dimensions,
        "embed": word_embeddings,
        "fields": ["text"],
    }
    async with open_store(module_url, index=index) as s:
        yield s


def best_cosine(embeddings: Embeddings, query: str, texts: Sequence[str]) -> float:
    """The best cosine of `query` against any of `texts`: an item's expected score."""
    return max(cosine(embeddings, query, text) for text in texts)


def assert_unscored_after_scored(results: Sequence[SearchItem], key: str) -> None:
    """The check for an item that has no vector (put with `index=False`, re-put with
    `index=False`, or with no text at the indexed paths), in a search with a query: either
    it is not returned at all, or it is returned with `score=None` after every scored item.
    It is never returned with a score, stale or not."""
    scores = [r.score for r in results]
    for r in results:
        if r.key == key:
            assert r.score is None, f"{key} has no vector but scored {r.score}"
    first_none = next((i for i, s in enumerate(scores) if s is None), len(scores))
    assert all(s is None for s in scores[first_none:]), f"scored items after unscored: {scores}"
