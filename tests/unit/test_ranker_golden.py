"""The rankers through their one interface (`recall.search.rankers`) give the scores their old
entry points gave before it existed, exactly: `data/ranker_golden.json` was computed at 0a736af
from the cases of `ranker_cases.py` (the shipped bge-small second stage and fusion)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from recall.search.features import query_facts, rank_features
from recall.search.fusion import default_fusion
from recall.search.rankers import Query
from recall.search.ranking import fuse
from recall.search.restatements import arrange
from recall.search.second_stage import SecondStage, StageCandidates, second_stage_for
from tests.unit.ranker_cases import NOW, Case, cases

GOLDEN = json.loads((Path(__file__).parent / "data" / "ranker_golden.json").read_text("utf-8"))


def _stage() -> SecondStage:
    stage = second_stage_for("bge-small-en-v1.5")
    assert stage is not None
    return stage


@pytest.fixture(scope="module")
def all_cases() -> list[Case]:
    return cases()


def test_the_cases_are_the_recorded_ones(all_cases: list[Case]) -> None:
    assert [c.query for c in all_cases] == [g["query"] for g in GOLDEN["cases"]]


@pytest.mark.parametrize("n", range(len(GOLDEN["cases"])))
def test_second_stage_scores_are_unchanged(all_cases: list[Case], n: int) -> None:
    case, want = all_cases[n], GOLDEN["cases"][n]["second_stage"]
    stage = _stage()
    ranking = stage.rank(
        Query(case.query, case.vector, NOW), StageCandidates(case.rows, case.vector_order)
    )
    assert list(ranking.order) == want["order"]
    assert list(ranking.scores) == want["scores"]  # exactly: the same floats
    assert [float(v) for v in ranking.scored.logits] == want["logits"]
    assert (ranking.scored.gate, ranking.scored.match, ranking.scored.intent) == (
        want["gate"],
        want["match"],
        want["intent"],
    )
    for index, parts in want["explanations"].items():
        assert ranking.explanation(int(index)) == parts
    x = rank_features(
        query_facts(case.query, case.rows), case.rows, case.vector_order, stage.candidates
    )
    assert (
        hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
        == want["rank_features_sha256"]
    )
    near = [1.0 - r.distance for r in case.rows]
    picked = arrange(case.query, case.rows, ranking.order, ranking.scores, near, 0.5, 10)
    assert [[i, s] for i, s in picked] == want["arranged"]


@pytest.mark.parametrize("n", range(len(GOLDEN["cases"])))
def test_fusion_scores_are_unchanged(all_cases: list[Case], n: int) -> None:
    case, want = all_cases[n], GOLDEN["cases"][n]["fusion"]
    query = Query(case.query, case.vector, NOW)
    fused = fuse(case.vector_hits, case.keyword_hits, default_fusion(), query)
    assert [[m.id, score] for m, score in fused] == want
