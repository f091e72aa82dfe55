"""What the second stage decided for one query's candidates, and why (`recall.search.second_stage`):
its order, scores and gate (`Scored`), the same as a `recall.search.rankers.Ranking`
(`StageRanking`), and the parts of one memory's score, by feature (`Explanation`): a linear
model's weights times its standardised features, a tree model's changes along the row's path
(Saabas's method)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from recall.search.linear import LinearModel
from recall.search.trees import TreeModel

__all__ = ["Explanation", "Fitted", "Model", "Scored", "StageRanking"]

Model = LinearModel | TreeModel
"""A model of the second stage: linear, or gradient-boosted trees (`recall.search.trees`)."""


class Fitted(Protocol):
    """What a score's parts are read from: the fitted stage (`SecondStage`) that gave it."""

    @property
    def ranker(self) -> Model: ...
    @property
    def gate(self) -> Model: ...
    @property
    def gate_offset(self) -> float: ...


_WHEN = "when"  # the name of the time the message names (recall.search.when)
_FOLLOWED = "cosine order"  # what following cosine moved a logit by (follow_cosine)


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a memory scored what it did: the parts of its ranker logit and of the query's gate
    logit, each by feature.

    Attributes:
        score: `SecondStage.score_of(gate, logit - best_logit)`.
        gate: the query's gate, `SecondStage.verdict` of `match` and `intent` (for a search,
            the higher of that and `match`); below 0, nothing passes 0.5.
        match: the gate model's logit (offset included): does a memory answer the message?
        intent: the asking model's logit (`recall.search.asking`, offset included): does the
            message ask about the user's life or earlier talk?
        logit, best_logit: the ranker's logit for this memory and for the best candidate.
        ranker: each feature's part of `logit`.
        gate_parts: each feature's part of `match`.
    """

    score: float
    gate: float
    match: float
    intent: float
    logit: float
    best_logit: float
    ranker: dict[str, float]
    gate_parts: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON): rounded, largest parts first."""

        def ordered(parts: Mapping[str, float]) -> dict[str, float]:
            return {k: round(v, 4) for k, v in sorted(parts.items(), key=lambda kv: -abs(kv[1]))}

        return {
            "score": round(self.score, 4),
            "gate": round(self.gate, 4),
            "match": round(self.match, 4),
            "intent": round(self.intent, 4),
            "logit": round(self.logit, 4),
            "best_logit": round(self.best_logit, 4),
            "ranker": ordered(self.ranker),
            "gate_parts": ordered(self.gate_parts),
        }


@dataclass(frozen=True, slots=True)
class Scored:
    """The second stage's verdict on one query's candidates.

    Attributes:
        order: indexes into the candidates, best first.
        scores: each candidate's score (0-1), in the candidates' order.
        logits: each candidate's ranker logit, in the candidates' order.
        gate: the query's gate logit, `SecondStage.verdict` of `match` and `intent` (offsets
            included; for a search, the higher of that and `match`).
        match: the gate model's logit; intent: the asking model's.
    """

    order: list[int]
    scores: list[float]
    logits: np.ndarray
    gate: float
    match: float
    intent: float
    _rank_x: np.ndarray
    _gate_x: np.ndarray
    _bonus: np.ndarray
    _followed: np.ndarray  # what following cosine moved each logit by (`follow_cosine`)

    def explain(self, stage: Fitted, index: int) -> Explanation:
        """The parts of candidate `index`'s score."""
        ranker = stage.ranker.contributions(self._rank_x[index])
        if isinstance(stage.ranker, LinearModel):
            ranker["intercept"] = stage.ranker.intercept
        if self._bonus[index]:
            ranker[_WHEN] = float(self._bonus[index])
        if self._followed[index]:
            ranker[_FOLLOWED] = float(self._followed[index])
        gate_parts = stage.gate.contributions(self._gate_x)
        if isinstance(stage.gate, LinearModel):
            gate_parts["intercept"] = stage.gate.intercept
        gate_parts["offset"] = stage.gate_offset
        best = float(self.logits[self.order[0]])
        return Explanation(
            score=self.scores[index],
            gate=self.gate,
            match=self.match,
            intent=self.intent,
            logit=float(self.logits[index]),
            best_logit=best,
            ranker=ranker,
            gate_parts=gate_parts,
        )


@dataclass(frozen=True, slots=True)
class StageRanking:
    """The second stage's verdict as a `recall.search.rankers.Ranking`: `scored`'s order and
    scores, and each score's parts from the stage that gave it."""

    stage: Fitted
    scored: Scored

    @property
    def order(self) -> list[int]:
        """Indexes into the candidates, best first."""
        return self.scored.order

    @property
    def scores(self) -> list[float]:
        """Each candidate's score (0-1), in the candidates' order."""
        return self.scored.scores

    def explain(self, index: int) -> Explanation:
        """The parts of candidate `index`'s score."""
        return self.scored.explain(self.stage, index)

    def explanation(self, index: int) -> dict[str, Any] | None:
        """The parts of candidate `index`'s score as plain data (`Explanation.as_dict`)."""
        return self.explain(index).as_dict()
