"""Hybrid fusion: one calibrated relevance score from vector and keyword evidence.

For each candidate (the union of the vector and the BM25 top lists) five features are taken,
and a logistic model turns them into a relevance in 0-1. The model was fitted with balanced
classes on the LoCoMo dev split (`benchmarks/locomo.py --fit`), so 0.5 is where the evidence
for and against relevance weigh the same: the default `similarity_threshold` (0.5) means
"more likely relevant than not" in hybrid mode. docs/decisions/0005-hybrid-retrieval.md gives
the figures. The fitted weights ship as package data, `models/fusion/default.json`
(`default_fusion`), and the model is a `recall.search.rankers.Ranker` like the second stage:
it gathers the user's nearest memories and their best by BM25 (`Settings.hybrid_candidates`
each, at least the limit) and merges the two lists (`merge_candidates`). RecallStore's hybrid
search ranks its items' two lists with the same model (`recall.basestore.hybrid`): the fusion
is written here only.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from recall.errors import ConfigError
from recall.rows import MemoryRow
from recall.search.bm25 import saturated
from recall.search.rankers import Ask, CandidateSource, Gathered, Query, shipped_model
from recall.search.ranking import cosine

__all__ = [
    "FEATURES",
    "Candidate",
    "FusionModel",
    "FusionRanking",
    "default_fusion",
    "features",
    "merge",
    "merge_candidates",
]

FEATURES = ("cosine", "bm25_relative", "bm25_saturated", "vector_rank", "keyword_rank")
KIND = "fusion"


@dataclass(slots=True)
class Candidate:
    """What fusion knows of one candidate (a memory, or a RecallStore item): its cosine, its
    BM25 and its place in each list."""

    key: Hashable
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
                saturated(c.bm25),
                1.0 / (1 + c.vector_rank) if c.vector_rank is not None else 0.0,
                1.0 / (1 + c.keyword_rank) if c.keyword_rank is not None else 0.0,
            )
        )
    return rows


def merge(
    vector: Iterable[tuple[Hashable, float]], keyword: Iterable[tuple[Hashable, float, float]]
) -> list[Candidate]:
    """The union of two lists as fusion sees it: `vector` (key, cosine) nearest first and
    `keyword` (key, cosine, BM25) best first, each candidate with its place in each (a
    keyword-only hit can enter), in the vector list's order, then the keyword list's."""
    candidates: dict[Hashable, Candidate] = {}
    for rank, (key, cos) in enumerate(vector):
        candidates[key] = Candidate(key, cos, vector_rank=rank)
    for rank, (key, cos, bm25) in enumerate(keyword):
        cand = candidates.setdefault(key, Candidate(key, cos))
        cand.bm25 = bm25
        cand.keyword_rank = rank
    return list(candidates.values())


def merge_candidates(
    vector_hits: list[MemoryRow], keyword_hits: list[MemoryRow]
) -> tuple[dict[Hashable, MemoryRow], list[Candidate]]:
    """The union of a user's nearest memories and their best by BM25 (`merge`), each keyed by
    its id as text, with each candidate's row by that key."""
    rows: dict[Hashable, MemoryRow] = {}
    for row in (*vector_hits, *keyword_hits):
        rows.setdefault(str(row.id), row)
    merged = merge(
        ((str(r.id), cosine(r.distance) or 0.0) for r in vector_hits),
        ((str(r.id), cosine(r.distance) or 0.0, float(r.bm25 or 0.0)) for r in keyword_hits),
    )
    return rows, merged


@dataclass(frozen=True, slots=True)
class FusionRanking:
    """The fusion's verdict on one query's candidates (a `recall.search.rankers.Ranking`):
    best first by relevance, ties in the candidates' order; it gives no parts of a score."""

    order: list[int]
    scores: list[float]

    def explanation(self, index: int) -> dict[str, Any] | None:
        """None: the fusion explains nothing (explanations are the second stage's)."""
        return None


@dataclass(frozen=True, slots=True)
class FusionModel:
    """A logistic model over `FEATURES`: relevance = sigmoid(intercept + weights . x).

    Attributes:
        intercept, weights: the fitted model.
        source: how it was fitted (command, data, commit, date), for the record.
    """

    intercept: float
    weights: tuple[float, float, float, float, float]
    source: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """ "fusion": its files live in `models/fusion/`."""
        return KIND

    @property
    def early_terms(self) -> bool:
        """False: its keyword side is one call with the query's vector."""
        return False

    async def gather(
        self, source: CandidateSource, ask: Ask
    ) -> Gathered[Sequence[Candidate]] | None:
        """The user's nearest memories and their best by BM25, `ask.breadth` each (at least
        the limit), merged (`merge_candidates`); None: neither side found any."""
        k = max(ask.limit, ask.breadth)
        # two connections at once: the two candidate queries run in parallel on the server
        vector_hits, keyword_hits = await asyncio.gather(
            source.nearest(ask.user_id, ask.vector, k),
            source.best_by_words(ask.user_id, ask.query.text, ask.vector, k),
        )
        rows, ordered = merge_candidates(vector_hits, keyword_hits)
        if not ordered:
            return None
        return Gathered([rows[c.key] for c in ordered], [c.cosine for c in ordered], ordered)

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

    def rank(self, query: Query, candidates: Sequence[Candidate]) -> FusionRanking:
        """Score the merged candidates (`recall.search.ranking.merge_candidates`); the query
        itself is not read: the candidates carry all the fusion knows of it (`ranked`)."""
        return self.ranked(candidates)

    def ranked(self, candidates: Sequence[Candidate]) -> FusionRanking:
        """The candidates (`merge`'s) best first by relevance, with their relevance."""
        scores = self.relevance(candidates)
        # ties keep the candidates' order (the vector side's, then the keyword side's), which
        # the SQL made stable (migration 0023); their ids are random
        order = sorted(range(len(candidates)), key=lambda i: -scores[i])
        return FusionRanking(order, scores)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FusionModel:
        """Read a fusion model (`to_json`'s format).

        Raises:
            ConfigError: the data is not a fusion model over `FEATURES`.
        """
        try:
            if data.get("kind") != KIND or tuple(data["features"]) != FEATURES:
                raise ConfigError(f"not a fusion model over {FEATURES}")
            w0, w1, w2, w3, w4 = (float(w) for w in data["weights"])
            source = dict(data.get("source", {}))
            return cls(float(data["intercept"]), (w0, w1, w2, w3, w4), source)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a fusion model: {exc!r}") from exc

    def to_json(self) -> dict[str, Any]:
        """The model as JSON data (`from_json` reads it back)."""
        return {
            "kind": KIND,
            "features": list(FEATURES),
            "intercept": self.intercept,
            "weights": list(self.weights),
            "source": dict(self.source),
        }


@cache
def default_fusion() -> FusionModel:
    """The shipped fusion (`models/fusion/default.json`), read once per process.

    Raises:
        ConfigError: the package data is missing or not a fusion model.
    """
    model = shipped_model(KIND, "default", FusionModel.from_json)
    if model is None:
        raise ConfigError("the package data models/fusion/default.json is missing")
    return model
