"""The learned second stage and its gate: the default ranking (docs/retrieval.md, decision 0024).

Three models over `recall.search.features`, fitted by `python benchmarks/fit_second_stage.py`
(every figure it publishes is for data the models were fitted without: decision 0027) and
shipped as package data, one file per embedding model (`models/second_stage/<model>.json`:
the cosines and vectors they read are that model's). `SecondStage` is a
`recall.search.rankers.Ranker` like the fusion: the store calls `rank`. The ranker and the gate
are linear (`recall.search.linear`) or gradient-boosted trees (`recall.search.trees`); the
intents are linear over the query's vector:

- the **ranker** orders the candidates: a logit `z` per memory;
- the **intent** model reads the query's own vector: small talk and generic requests score low
  (decision 0024; the gate model reads it as a feature);
- the **gate** reads the query as a whole (intent, coverage, the best cosines and logits) and
  gives the log-odds that one of the memories answers the message (`match`), shifted by the
  fitted `gate_offset`. The other witness is the **asking** model (`recall.search.asking`):
  does the message ask about the user's life or earlier talk, from its vector and a few of its
  words, fitted on more small talk than the intent was. In a turn of conversation the gate `g`
  weighs the two, the asking model's logit as `intent`:
  `(match + intent_weight * intent - gate_bias) / (1 + intent_weight)` (decision 0039): a
  question about the user's life opens it even when no memory matches it in words ("Which city
  am I in?" after "I live in Tucson"), and a message that asks nothing of memory needs strong
  evidence. A search (`intent=False`) is never shut by the intent: its gate is `match`, or the
  turn's weighed gate where that is higher (decision 0050).

A memory's score: with the gate open (`g >= 0`) the best candidate scores the gate's
probability `sigmoid(g)` and the others `0.5 + (sigmoid(g) - 0.5) * exp(slope * (z - z_best))`,
less by how far the ranker puts them below it but never under 0.5, so an open gate hands over
the first `limit` candidates: a memory returned in vain costs a line of prompt, a fact hidden
is the memory failing (issue 45). With the gate closed every score is
`sigmoid(g + slope * (z - z_best))`, under 0.5. So the default threshold 0.5 is the gate, and a
higher threshold keeps the candidates nearest the best. It is not a per-memory probability.

Each score splits into the features' contributions (`recall.search.scored`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

import numpy as np

from recall.errors import ConfigError
from recall.rows import CandidateRow
from recall.search.asking import AskingModel
from recall.search.features import RANK_FEATURES, query_facts, rank_features
from recall.search.gate_features import GATE_FEATURES, gate_features
from recall.search.linear import LinearModel
from recall.search.rankers import Ask, CandidateSource, Gathered, Query, shipped_model
from recall.search.ranking import cosine
from recall.search.scored import Model, Scored, StageRanking
from recall.search.trees import TreeModel
from recall.search.when import time_bonus, time_window

__all__ = [
    "LinearModel",
    "Model",
    "SecondStage",
    "StageCandidates",
    "second_stage_for",
]

KIND = "second_stage"  # its files live in models/second_stage/


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _model_from_json(data: Mapping[str, Any], names: Sequence[str]) -> Model:
    """A linear model, or trees when the data says `"kind": "trees"`."""
    if data.get("kind", "linear") == "trees":
        return TreeModel.from_json(data, names)
    return LinearModel.from_json(data, names)


_TERM_FRAC = RANK_FEATURES.index("term_frac")
_NB_SHARE = RANK_FEATURES.index("nb_idf_frac")
_COS = RANK_FEATURES.index("cos")


def follow_cosine(logits: np.ndarray, x: np.ndarray, bonus: np.ndarray) -> np.ndarray:
    """The ranker's logits, with those of the candidates it has no evidence on handed out
    again in cosine order (issue 54, decision 0049): a candidate holding none of the query's
    words, whose neighbours hold none either and whom no time the query names favours, is
    placed only by meaning. Where no candidate has evidence, the ranking is cosine's; where
    some have, they keep their places and the others fill the rest by cosine. The set of
    logits is unchanged, so the gate's scores keep their spread."""
    blind = np.flatnonzero((x[:, _TERM_FRAC] <= 0) & (x[:, _NB_SHARE] <= 0) & (bonus == 0))
    if len(blind) < 2:
        return logits
    out = np.array(logits, dtype=np.float64)
    by_logit = blind[np.argsort(-out[blind], kind="stable")]
    by_cosine = blind[np.argsort(-x[blind, _COS], kind="stable")]
    out[by_cosine] = out[by_logit]
    return out


@dataclass(frozen=True, slots=True)
class StageCandidates:
    """The candidates the second stage reads (`MemoryStore.candidates`).

    Attributes:
        rows: the candidates, echoes left out.
        vector_order: the vector side's candidates as indexes into `rows`, best first.
    """

    rows: Sequence[CandidateRow]
    vector_order: Sequence[int]


@dataclass(frozen=True, slots=True)
class SecondStage:
    """The fitted second stage for one embedding model (see the module's docstring).

    Attributes:
        embedding_model: the model whose cosines and vectors it was fitted on.
        candidates: how many memories each side (cosine, BM25) brings.
        ranker: orders the candidates (`RANK_FEATURES`): linear or trees.
        intent: the intent model's weights over the query's vector (decision 0024): a feature
            of the gate model, which was fitted with it.
        intent_intercept: its intercept.
        asking: the intent a turn's gate weighs with `match` (`recall.search.asking`, decision
            0039).
        gate: the gate (`GATE_FEATURES`): linear or trees.
        gate_offset: added to the gate model's logit (`match`).
        intent_offset: the offset the fit chose for the intent (decision 0024); the verdict
            reads the asking model's logit instead since decision 0039.
        intent_weight: the intent's weight beside `match` in a turn's gate.
        gate_bias: subtracted from the weighted sum: the gate's operating point.
        slope: how fast a candidate's score falls below the best one's, per unit of logit.
        source: how the weights were fitted (command, data, date), for the record.
    """

    embedding_model: str
    candidates: int
    ranker: Model
    intent: np.ndarray
    intent_intercept: float
    gate: Model
    gate_offset: float
    intent_offset: float
    intent_weight: float
    gate_bias: float
    slope: float
    source: Mapping[str, Any]
    asking: AskingModel

    @property
    def kind(self) -> str:
        """ "second_stage": its files live in `models/second_stage/`."""
        return KIND

    @property
    def early_terms(self) -> bool:
        """True: its keyword side, the terms' rows, needs no vector (`Ask.words`)."""
        return True

    async def gather(self, source: CandidateSource, ask: Ask) -> Gathered[StageCandidates] | None:
        """The user's best `candidates` memories (at least the limit) by cosine and by BM25,
        with the details it reads (`CandidateSource.for_query`). None: the user has none."""
        k = max(self.candidates, ask.limit)
        rows, near = await source.for_query(
            ask.user_id, ask.query.text, ask.vector, k, words=ask.words
        )
        if not rows:
            return None
        nearness = [cosine(r.distance) or 0.0 for r in rows]
        return Gathered(rows, nearness, StageCandidates(rows, near))

    def rank(self, query: Query, candidates: StageCandidates) -> StageRanking:
        """Score one query's candidates (`score`), as the store calls every ranker."""
        scored = self.score(query.text, query.vector, candidates.rows, candidates.vector_order,
                            query.now, intent=query.intent)  # fmt: skip
        return StageRanking(self, scored)

    def score(
        self,
        query_text: str,
        query_vector: np.ndarray,
        rows: Sequence[CandidateRow],
        vector_order: Sequence[int],
        now: datetime | None = None,
        *,
        intent: bool = True,
    ) -> Scored:
        """Score one query's candidates.

        Args:
            query_text: the message.
            query_vector: its embedding (the same model as `embedding_model`).
            rows: the candidates (`MemoryStore.candidates`, echoes left out).
            vector_order: the vector side's candidates as indexes into `rows`, best first.
            now: when the message is asked (now by default): a time it names ("yesterday",
                "last summer") puts the candidates from then first (`recall.search.when`).
            intent: whether the gate weighs `match` with the intent (`verdict`: a turn of
                conversation); False: a search (`recall.search.rankers.Query`), whose gate the
                intent may open and never shuts (the higher of `match` and `verdict`).
        """
        facts = query_facts(query_text, rows)
        x = rank_features(facts, rows, vector_order, self.candidates)
        logits = self.ranker.logits(x)
        # 0024's intent: a feature of the gate model, which was fitted with it
        asks = float(query_vector @ self.intent + self.intent_intercept)
        cosines = [1.0 - float(rows[i].distance) for i in vector_order]
        window = time_window(query_text, now or datetime.now(UTC))
        bonus = time_bonus(window, [r.created_at for r in rows], np.asarray(logits))
        gx = gate_features(facts, x, np.asarray(logits), cosines, asks, bool(bonus.any()))
        own = logits + bonus
        logits = follow_cosine(own, x, bonus)
        match = float(self.gate.logits(gx[None, :])[0]) + self.gate_offset
        asking = self.asking.logit(query_text, query_vector)  # the intent the verdict weighs
        # a search is never shut by the asking model, and opens where a turn would (decision
        # 0050): a new user's one fact, asked in other words, is found by the search box too
        turn = self.verdict(match, asking)
        gate = turn if intent else max(match, turn)
        # ties keep the candidates' order, which the SQL made stable (migration 0023); an id
        # would differ between two databases holding the same memories
        order = sorted(range(len(rows)), key=lambda i: -float(logits[i]))
        best = float(logits[order[0]]) if order else 0.0
        scores = [self.score_of(gate, float(z) - best) for z in logits]
        return Scored(order, scores, np.asarray(logits), gate, match, asking, x, gx, bonus,
                      logits - own)  # fmt: skip

    def verdict(self, match: float, intent: float) -> float:
        """A turn's gate logit from `match` and the intent (offsets included): their weighted
        sum less `gate_bias`, over the weights' sum, so it reads on `match`'s scale."""
        return (match + self.intent_weight * intent - self.gate_bias) / (1.0 + self.intent_weight)

    def score_of(self, gate: float, below: float) -> float:
        """The score of a candidate whose logit is `below` (<= 0) the best one's, under the
        gate logit `gate` (the module's docstring): at least 0.5 when the gate is open."""
        if gate >= 0.0:
            return 0.5 + (_sigmoid(gate) - 0.5) * math.exp(self.slope * min(below, 0.0))
        return _sigmoid(gate + self.slope * below)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SecondStage:
        """Read a fitted second stage (`to_json`'s format).

        Raises:
            ConfigError: the data is not a second stage over today's features.
        """
        try:
            ranker = _model_from_json(data["ranker"], RANK_FEATURES)
            gate = _model_from_json(data["gate"], GATE_FEATURES)
            dims = int(data["dimensions"])
            if "products" in data["ranker"]:  # decision 0027: the ranker reads no vectors
                raise ConfigError("a second stage with vector products is no longer read")
            intent = np.asarray(data["intent"]["weights"], dtype=np.float64)
            if intent.shape != (dims,):
                raise ConfigError("second-stage vector weights do not match its dimensions")
            return cls(
                embedding_model=str(data["embedding_model"]),
                candidates=int(data["candidates"]),
                ranker=ranker,
                intent=intent,
                intent_intercept=float(data["intent"]["intercept"]),
                gate=gate,
                gate_offset=float(data["gate_offset"]),
                intent_offset=float(data["intent_offset"]),
                intent_weight=float(data["intent_weight"]),
                gate_bias=float(data["gate_bias"]),
                slope=float(data["slope"]),
                source=dict(data.get("source", {})),
                asking=AskingModel.from_json(data["asking"], dims),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a second-stage model: {exc!r}") from exc

    def to_json(self) -> dict[str, Any]:
        """The fitted stage as JSON data."""
        return {
            "embedding_model": self.embedding_model,
            "dimensions": len(self.intent),
            "candidates": self.candidates,
            "ranker": self.ranker.to_json(),
            "intent": {"weights": self.intent.tolist(), "intercept": self.intent_intercept},
            "gate": self.gate.to_json(),
            "gate_offset": self.gate_offset,
            "intent_offset": self.intent_offset,
            "intent_weight": self.intent_weight,
            "gate_bias": self.gate_bias,
            "slope": self.slope,
            "source": dict(self.source),
            "asking": self.asking.to_json(),
        }


@cache
def second_stage_for(embedding_model: str) -> SecondStage | None:
    """The shipped second stage fitted for `embedding_model`
    (`models/second_stage/<embedding_model>.json`), or None when none is (then the store ranks
    by the fusion of decision 0005). Read once per process."""
    return shipped_model(KIND, embedding_model, SecondStage.from_json)
