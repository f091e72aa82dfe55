"""Hybrid fusion: one calibrated relevance score from vector and keyword evidence.

For each candidate (the union of the vector and the BM25 top lists) five features are taken,
and a logistic model turns them into a relevance in 0-1. The model was fitted with balanced
classes on the LoCoMo dev split (`benchmarks/locomo.py --fit`), so 0.5 is where the evidence
for and against relevance weigh the same: the default `similarity_threshold` (0.5) means
"more likely relevant than not" in hybrid mode. docs/decisions/0005-hybrid-retrieval.md gives
the figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_FUSION", "FEATURES", "Candidate", "FusionModel", "features"]

FEATURES = ("cosine", "bm25_relative", "bm25_saturated", "vector_rank", "keyword_rank")


@dataclass(slots=True)
class Candidate:
    """What fusion knows of one memory: its cosine, its BM25 and its rank in each list."""

    key: str
    cosine: float
    bm25: float = 0.0
    vector_rank: int | None = None
    keyword_rank: int | None = None


def features(candidates: Sequence[Candidate]) -> list[tuple[float, ...]]:
    """The feature vector of each candidate (BM25 relative to the best of this query)."""
    best = max((c.bm25 for c in candidates), default=0.0)
    rows: list[tuple[float, ...]] = []
    for c in candidates:
        rows.append(
            (
                c.cosine,
                c.bm25 / best if best > 0 else 0.0,
                c.bm25 / (c.bm25 + 5.0),
                1.0 / (1 + c.vector_rank) if c.vector_rank is not None else 0.0,
                1.0 / (1 + c.keyword_rank) if c.keyword_rank is not None else 0.0,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class FusionModel:
    """A logistic model over `FEATURES`: relevance = sigmoid(intercept + weights . x)."""

    intercept: float
    weights: tuple[float, float, float, float, float]

    def relevance(self, candidates: Sequence[Candidate]) -> list[float]:
        """Calibrated relevance (0-1) of each candidate."""
        return self.relevance_of(features(candidates))

    def relevance_of(self, rows: Sequence[tuple[float, ...]]) -> list[float]:
        """Calibrated relevance (0-1) of feature vectors (see `features`)."""
        out = []
        for row in rows:
            z = self.intercept + sum(w * x for w, x in zip(self.weights, row, strict=True))
            out.append(1.0 / (1.0 + math.exp(-z)))
        return out


# Fitted by `python benchmarks/locomo.py --fit` (LoCoMo dev, balanced classes); see
# docs/decisions/0005-hybrid-retrieval.md. Replace with your own fit for other data.
DEFAULT_FUSION = FusionModel(intercept=-3.1015, weights=(2.9865, 3.0351, -0.6942, 1.7329, 1.7555))
