"""The rankers through their one interface (`recall.search.rankers`) give the scores their old
entry points gave before it existed: `data/ranker_golden.json` was computed at 0a736af from the
cases of `ranker_cases.py` (the shipped bge-small second stage and fusion).

The scores are held to a relative tolerance of `REL` (1e-9), not to the last bit. The cases'
cosines and the second stage's products are numpy dot products, which go through OpenBLAS, and
OpenBLAS picks its kernels by CPU (or `OPENBLAS_CORETYPE`): SkylakeX and Sandybridge sum the 384
products in another order than Haswell and Zen, and the scores come out a unit or two in the
last place apart (0.021511265148848192 against 0.021511265148848213, a relative 1e-15). 1e-9
is a million times that noise, and still far below any change that matters: a weight moved by
a millionth moves the scores by about 1e-7 (`test_a_changed_weight_fails_the_comparison` shows
both comparisons failing on one). An order may swap two candidates only where their scores are
equal within the tolerance (a tie), and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recall.search.features import query_facts, rank_features
from recall.search.fusion import FusionModel, default_fusion, merge_candidates
from recall.search.rankers import Query
from recall.search.restatements import arrange
from recall.search.second_stage import SecondStage, StageCandidates, second_stage_for
from recall.search.verdict import Verdict
from tests.unit.ranker_cases import NOW, Case, cases

GOLDEN = json.loads((Path(__file__).parent / "data" / "ranker_golden.json").read_text("utf-8"))
REL = 1e-9
# Below this an absolute difference is noise too: a feature that cancels to zero (a gap between
# two equal cosines) is 0.0 on one kernel and 1e-17 on another, and a relative test of 0 against
# 1e-17 fails whatever its tolerance.
ABS = 1e-12
# The explanations' parts are rounded to 4 decimals: a value a unit in the last place either side
# of a rounding boundary rounds to two values 1e-4 apart.
ROUNDED = 1e-4 + 1e-12


class Mismatch(AssertionError):
    """A ranking differs from the recorded one beyond the tolerance."""


def close(got: float, want: float) -> bool:
    """Whether two scores are the same within the tolerance."""
    return math.isclose(got, want, rel_tol=REL, abs_tol=ABS)


def same_values(got: Sequence[float], want: Sequence[float], what: str) -> None:
    """Raise `Mismatch` unless the two sequences agree value by value within the tolerance."""
    if len(got) != len(want):
        raise Mismatch(f"{what}: {len(got)} values, recorded {len(want)}")
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        if not close(float(g), float(w)):
            raise Mismatch(f"{what}[{n}]: {g!r}, recorded {w!r}")


def same_parts(got: Any, want: Any) -> bool:
    """Whether two explanations (dicts of rounded numbers, nested) are the same, each number
    within a rounding step of the recorded one."""
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(same_parts(got[k], want[k]) for k in want)
        )
    return bool(math.isclose(got, want, rel_tol=0, abs_tol=ROUNDED))


def same_order(got: Sequence[Any], want: Sequence[Any], score: Sequence[float], what: str) -> None:
    """Raise `Mismatch` unless `got` is `want` with, at most, tied items swapped: the recorded
    order is cut into runs of consecutive items whose scores (`score`, one per place of `want`)
    are equal within the tolerance, and each run must hold the same items in both."""
    if len(got) != len(want):
        raise Mismatch(f"{what}: {len(got)} items, recorded {len(want)}")
    start = 0
    for end in range(1, len(want) + 1):
        if end < len(want) and close(score[end], score[start]):
            continue
        if sorted(map(str, got[start:end])) != sorted(map(str, want[start:end])):
            raise Mismatch(f"{what}: places {start}-{end - 1} hold {got[start:end]}, recorded "
                           f"{want[start:end]}")  # fmt: skip
        start = end


def check_second_stage(stage: SecondStage, case: Case, want: dict[str, Any]) -> None:
    """Compare one case's second-stage ranking with the recorded one (`Mismatch` if not the
    same within the tolerance)."""
    ranking = stage.rank(
        Query(case.query, case.vector, NOW), StageCandidates(case.rows, case.vector_order)
    )
    logits = [float(v) for v in ranking.scored.logits]
    same_values(logits, want["logits"], "logits")
    same_values(ranking.scores, want["scores"], "scores")
    same_order(ranking.order, want["order"], [want["logits"][i] for i in want["order"]], "order")
    scored = ranking.scored
    same_values([scored.gate, scored.match, scored.intent],
                [want["gate"], want["match"], want["intent"]], "gate, match, intent")  # fmt: skip
    for index, parts in want["explanations"].items():
        got = ranking.explanation(int(index))
        if not same_parts(got, parts):
            raise Mismatch(f"explanation of {index}: {got}, recorded {parts}")
    x = rank_features(
        query_facts(case.query, case.rows), case.rows, case.vector_order, stage.candidates
    )
    same_values(x.ravel().tolist(), np.asarray(want["rank_features"]).ravel().tolist(), "x")
    near = [1.0 - r.distance for r in case.rows]
    picked = arrange(
        case.query, case.rows, ranking.order, ranking.scores, near, Verdict("hybrid", 0.5), 10
    )
    same_values([s for _i, s in picked], [s for _i, s in want["arranged"]], "arranged scores")
    same_order([i for i, _s in picked], [i for i, _s in want["arranged"]],
               [s for _i, s in want["arranged"]], "arranged")  # fmt: skip


def check_fusion(fusion: FusionModel, case: Case, want: list[list[Any]]) -> None:
    """Compare one case's fused ranking with the recorded one (`Mismatch` if not the same
    within the tolerance)."""
    _rows, merged = merge_candidates(case.vector_hits, case.keyword_hits)
    ranking = fusion.rank(Query(case.query, case.vector, NOW), merged)
    fused = [(str(merged[i].key), ranking.scores[i]) for i in ranking.order]
    by_id = dict(fused)
    recorded = {i: s for i, s in want}
    if by_id.keys() != recorded.keys():
        raise Mismatch(f"fused ids {sorted(by_id)}, recorded {sorted(recorded)}")
    same_values([by_id[i] for i, _s in want], [s for _i, s in want], "fused scores")
    same_order([key for key, _s in fused], [i for i, _s in want], [s for _i, s in want],
               "fused order")  # fmt: skip


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
    check_second_stage(_stage(), all_cases[n], GOLDEN["cases"][n]["second_stage"])


@pytest.mark.parametrize("n", range(len(GOLDEN["cases"])))
def test_fusion_scores_are_unchanged(all_cases: list[Case], n: int) -> None:
    check_fusion(default_fusion(), all_cases[n], GOLDEN["cases"][n]["fusion"])


def test_a_changed_weight_fails_the_comparison(all_cases: list[Case]) -> None:
    """The tolerance lets kernel noise through and nothing else: one weight moved by a
    millionth of itself fails both comparisons on every case where it counts."""
    fusion = default_fusion()
    weights = (fusion.weights[0] * (1 + 1e-6), *fusion.weights[1:])
    moved = dataclasses.replace(fusion, weights=weights)
    fused_cases = [n for n, c in enumerate(all_cases) if c.vector_hits]
    for n in fused_cases:
        with pytest.raises(Mismatch):
            check_fusion(moved, all_cases[n], GOLDEN["cases"][n]["fusion"])
    stage = _stage()
    moved_stage = dataclasses.replace(stage, slope=stage.slope * (1 + 1e-6))
    failed = 0
    for n, case in enumerate(all_cases):
        try:
            check_second_stage(moved_stage, case, GOLDEN["cases"][n]["second_stage"])
        except Mismatch:
            failed += 1
    # the slope moves every score but a case's best (sigmoid of the gate alone), by an amount
    # the tolerance sees unless the others lie so far below the best that their scores have
    # settled at 0.5 (an open gate) to within it
    assert failed == sum(1 for n in range(len(all_cases)) if _slope_shows(stage, moved_stage, n))


def _slope_shows(stage: SecondStage, moved: SecondStage, n: int) -> bool:
    """Whether `moved` (the stage with another slope) scores one of case `n`'s recorded
    candidates differently beyond the tolerance (`SecondStage.score_of` of both, from the
    recorded gate and logits; for the shipped stage the cases lie at least a factor 2.5
    either side of it)."""
    want = GOLDEN["cases"][n]["second_stage"]
    best = max(want["logits"], default=0.0)
    return any(
        not close(moved.score_of(want["gate"], z - best), stage.score_of(want["gate"], z - best))
        for z in want["logits"]
    )


def test_an_order_may_swap_ties_and_nothing_else() -> None:
    same_order(["a", "b", "c"], ["b", "a", "c"], [1.0, 1.0 + 1e-12, 0.5], "tied")
    with pytest.raises(Mismatch):
        same_order(["a", "b", "c"], ["b", "a", "c"], [1.0, 0.99, 0.5], "not tied")
