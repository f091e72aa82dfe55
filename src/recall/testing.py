"""Helpers for tests, ours and yours: a deterministic embedder that needs no model."""

from __future__ import annotations

import hashlib
import re

import numpy as np
from langchain_core.embeddings import Embeddings

__all__ = ["FakeEmbeddings"]

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbeddings(Embeddings):
    """Bag-of-words hashing embeddings: texts sharing words get a high cosine.

    Deterministic across processes and machines, instant, and good enough to test ranking,
    thresholds and isolation without loading a model. Texts with no word characters map to a
    fixed vector, so every text embeds.

    Args:
        dimensions: vector size.
    """

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.model_name = f"fake-hash-{dimensions}"

    def _vector(self, text: str) -> list[float]:
        vec = np.zeros(self.dimensions, dtype=np.float64)
        words = _WORD.findall(text.lower()) or ["\x00empty"]
        for word in words:
            digest = hashlib.blake2b(word.encode("utf-8", "replace"), digest_size=8).digest()
            value = int.from_bytes(digest, "big")
            sign = 1.0 if value & 1 else -1.0
            vec[(value >> 1) % self.dimensions] += sign
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # words cancelled out: fall back to a fixed direction
            vec[0], norm = 1.0, 1.0
        return [float(x) for x in vec / norm]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text."""
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._vector(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Same as `embed_documents`: it is cheap enough to run on the event loop."""
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Same as `embed_query`."""
        return self.embed_query(text)
