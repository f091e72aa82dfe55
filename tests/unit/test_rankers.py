"""The two rankers behind one interface (`recall.search.rankers`): each is a `Ranker` whose
model ships as data under `models/<kind>/`, and each scores as its model says."""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np
import pytest

from recall.errors import ConfigError
from recall.search.fusion import (
    FEATURES,
    Candidate,
    FusionModel,
    default_fusion,
)
from recall.search.rankers import MODELS, Query, Ranker, Ranking, load_model, model_text
from recall.search.second_stage import StageCandidates, second_stage_for
from tests.unit.ranker_cases import NOW, cases

QUERY = Query("cello lessons", np.zeros(3))


def test_both_rankers_are_rankers_and_their_models_live_in_their_kind_folder() -> None:
    stage = second_stage_for("bge-small-en-v1.5")
    assert stage is not None
    for ranker in (stage, default_fusion()):
        assert isinstance(ranker, Ranker)
        folder = resources.files("recall.search").joinpath(MODELS, ranker.kind)
        assert folder.is_dir()
        assert ranker.source  # every shipped model says how it was fitted
    assert model_text("second_stage", "no-such-model") is None
    assert second_stage_for("no-such-model") is None


def test_the_shipped_fusion_is_the_fit_of_decision_0005() -> None:
    fusion = default_fusion()
    assert fusion.intercept == -3.1015
    assert fusion.weights == (2.9865, 3.0351, -0.6942, 1.7329, 1.7555)
    assert load_model(json.dumps(fusion.to_json()), FusionModel.from_json) == fusion


def test_fusion_scores_are_its_logistic_model_and_ties_keep_the_candidates_order() -> None:
    fusion = FusionModel(-1.0, (1.0, 2.0, 0.5, 0.25, 0.125))
    cands = [
        Candidate("b", cosine=0.5, bm25=5.0, vector_rank=1, keyword_rank=0),
        Candidate("a", cosine=0.5, bm25=5.0, vector_rank=1, keyword_rank=0),
        Candidate("c", cosine=0.9, vector_rank=0),
    ]
    ranking = fusion.rank(QUERY, cands)
    assert isinstance(ranking, Ranking)
    # b: cosine 0.5, bm25 relative 1, saturated 5 / (5 + 5), vector rank 1 / 2, keyword 1 / 1
    z = -1.0 + 0.5 + 2.0 + 0.5 * 0.5 + 0.25 * 0.5 + 0.125
    assert ranking.scores[0] == pytest.approx(1 / (1 + math.exp(-z)))
    assert ranking.scores[2] == pytest.approx(1 / (1 + math.exp(-(-1.0 + 0.9 + 0.25))))
    # b before a: the same score, and a tie keeps the candidates' order (the SQL's, stable
    # wherever the memories are stored), not their keys (random ids)
    assert list(ranking.order) == [0, 1, 2]
    assert list(fusion.rank(QUERY, [cands[1], cands[0], cands[2]]).order) == [0, 1, 2]
    assert ranking.explanation(0) is None


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "second_stage", "features": list(FEATURES), "intercept": 0, "weights": [0] * 5},
        {"kind": "fusion", "features": ["cosine"], "intercept": 0, "weights": [0]},
        {"kind": "fusion", "features": list(FEATURES), "intercept": 0, "weights": [0] * 4},
        {"kind": "fusion", "features": list(FEATURES), "weights": [0] * 5},
    ],
)
def test_a_fusion_file_that_is_not_one_is_refused(data: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        load_model(json.dumps(data), FusionModel.from_json)
    with pytest.raises(ConfigError):
        load_model("{not json", FusionModel.from_json)


def test_the_second_stage_ranks_as_it_scores_and_explains_each_score() -> None:
    stage = second_stage_for("bge-small-en-v1.5")
    assert stage is not None
    case = next(c for c in cases() if len(c.rows) > 3)
    ranking = stage.rank(
        Query(case.query, case.vector, NOW), StageCandidates(case.rows, case.vector_order)
    )
    assert isinstance(ranking, Ranking)
    scored = stage.score(case.query, case.vector, case.rows, case.vector_order, NOW)
    assert list(ranking.order) == scored.order and list(ranking.scores) == scored.scores
    best = ranking.order[0]
    why = ranking.explanation(best)
    assert why is not None and why == scored.explain(stage, best).as_dict()
    assert why["score"] == round(ranking.scores[best], 4)
    # the best candidate scores the gate's probability (sigmoid of the gate logit)
    assert ranking.scores[best] == pytest.approx(1 / (1 + math.exp(-scored.gate)))
