"""`Embedder`: the async face of any LangChain `Embeddings` object, as the store uses it:
calls off the event loop, query truncation, a TTL cache of query vectors, batching, and checks
on what the model returns."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import structlog
from cachetools import TTLCache
from langchain_core.embeddings import Embeddings

from recall.config import Settings
from recall.errors import EmbeddingError

__all__ = ["Embedder", "Vector", "embedder_for", "embedding_model_name", "file_sha256"]

log = structlog.stdlib.get_logger(__name__)

T = TypeVar("T")

Vector = npt.NDArray[np.float32]
_EMPTY: Vector = np.zeros(0, dtype=np.float32)  # a placeholder, every slot is filled


def file_sha256(path: Path) -> str:
    """The sha256 of a (model) file, read in 1 MB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def embedding_model_name(embeddings: Embeddings) -> str:
    """The name recorded with the data: `model_name`/`model` attribute, else the class name."""
    for attr in ("model_name", "model"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(embeddings).__name__


class Embedder:
    """The async face of an `Embeddings` object, as the store uses it.

    Args:
        embeddings: any LangChain embeddings.
        name: the model name recorded with the data; derived from `embeddings` when None.
        max_query_length: queries are cut to this many characters before embedding.
        cache_ttl: seconds a query vector stays cached (0 disables the cache).
        cache_size: how many query vectors the cache holds at most.
        batch_size: texts per `aembed_documents` call.
        dimensions: the vector size, when known (otherwise declared by `embeddings` or probed).
    """

    def __init__(
        self,
        embeddings: Embeddings,
        *,
        name: str | None = None,
        max_query_length: int = 1000,
        cache_ttl: float = 300.0,
        cache_size: int = 1024,
        batch_size: int = 64,
        dimensions: int | None = None,
    ) -> None:
        self.embeddings = embeddings
        self.name = name or embedding_model_name(embeddings)
        self._max_query_length = max_query_length
        self._batch_size = batch_size
        self._cache: TTLCache[str, Vector] | None = (
            TTLCache(maxsize=cache_size, ttl=cache_ttl)
            if cache_ttl > 0 and cache_size > 0
            else None
        )
        self._dimensions: int | None = dimensions or getattr(embeddings, "dimensions", None)
        self._probe_lock = asyncio.Lock()

    @property
    def ready(self) -> bool:
        """Whether the model is loaded. Embeddings that do not say (any but the default model)
        count as ready."""
        return bool(getattr(self.embeddings, "loaded", True))

    async def load(self) -> None:
        """Load the model now (in a worker thread), so no request waits for it later."""
        if not self.ready:
            await asyncio.to_thread(self.embeddings.embed_query, "warm-up")

    async def dimensions(self) -> int:
        """The vector size; asks the model once when it does not declare it."""
        if self._dimensions is None:
            async with self._probe_lock:
                if self._dimensions is None:
                    self._dimensions = len(await self._embed_query("dimension probe"))
        return self._dimensions

    def check_vector(self, raw: Sequence[float] | Vector) -> Vector:
        """Return `raw` as float32 after checking its size and values.

        Raises:
            EmbeddingError: wrong dimension, NaN/infinite values, or a zero vector.
        """
        vector = np.asarray(raw, dtype=np.float32)
        if vector.ndim != 1 or vector.size == 0:
            raise EmbeddingError(f"{self.name} returned a vector of shape {vector.shape}")
        if self._dimensions is not None and vector.size != self._dimensions:
            raise EmbeddingError(
                f"{self.name} returned {vector.size} dimensions, expected {self._dimensions}"
            )
        if not np.all(np.isfinite(vector)):
            raise EmbeddingError(f"{self.name} returned a vector with NaN or infinite values")
        if not np.any(vector):
            raise EmbeddingError(f"{self.name} returned a zero vector (no cosine is defined)")
        return vector

    async def _call(self, what: str, call: Awaitable[T]) -> T:
        """Await the model's `call`; any failure becomes an `EmbeddingError` naming `what`."""
        try:
            return await call
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"{self.name} failed to embed {what}: {exc}") from exc

    async def _embed_query(self, text: str) -> Vector:
        raw = await self._call("a query", self.embeddings.aembed_query(text))
        return self.check_vector(raw)

    async def embed_query(self, text: str) -> Vector:
        """Embed a search query (cut to `max_query_length`), from the cache when it is there.

        Raises:
            EmbeddingError: the model failed or returned an unusable vector.
        """
        text = text[: self._max_query_length]
        if self._cache is not None and (hit := self._cache.get(text)) is not None:
            return hit
        vector = await self._embed_query(text)
        if self._cache is not None:
            self._cache[text] = vector
        return vector

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        """Embed stored texts in batches of `batch_size`, off the event loop.

        Texts are batched by length (and returned in the given order): a transformer pads a
        batch to its longest text, so mixed lengths cost the model up to several times more.

        Raises:
            EmbeddingError: the model failed, or returned a wrong count or unusable vectors.
        """
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Vector] = [_EMPTY] * len(texts)
        for start in range(0, len(order), self._batch_size):
            picked = order[start : start + self._batch_size]
            batch = [texts[i] for i in picked]
            raw = await self._call("documents", self.embeddings.aembed_documents(batch))
            if len(raw) != len(batch):
                raise EmbeddingError(
                    f"{self.name} returned {len(raw)} vectors for {len(batch)} texts"
                )
            for i, v in zip(picked, raw, strict=True):
                out[i] = self.check_vector(v)
        return out


def embedder_for(
    embeddings: Embeddings,
    settings: Settings,
    *,
    name: str | None = None,
    dimensions: int | None = None,
) -> Embedder:
    """An `Embedder` over `embeddings` with the query length, cache and batch size that
    `settings` give (what `MemoryStore` and `RecallStore` both use)."""
    return Embedder(
        embeddings,
        name=name,
        max_query_length=settings.max_query_length,
        cache_ttl=settings.embedding_cache_ttl,
        cache_size=settings.embedding_cache_size,
        batch_size=settings.embedding_batch_size,
        dimensions=dimensions,
    )
