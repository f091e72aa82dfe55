"""The second stage's features and models on hand-made candidates (no database): the query's
idf and coverage, the per-candidate features, scores that split into their parts, the gate's
meaning, and the shipped weights file."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from recall.errors import ConfigError
from recall.rows import CandidateRow
from recall.search.asking import AskingModel
from recall.search.features import RANK_FEATURES, _has_time, query_facts, rank_features
from recall.search.gate_features import GATE_FEATURES, gate_features
from recall.search.rankers import load_model
from recall.search.second_stage import (
    LinearModel,
    SecondStage,
    second_stage_for,
)
from recall.search.trees import TreeModel

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIMS = 4


def row(n: int, **changes: Any) -> CandidateRow:
    base: dict[str, Any] = {
        "id": UUID(int=n),
        "conversation_id": "c1",
        "user_message": f"message {n}",  # a digit: a date-like word
        "ai_response": "a reply",
        "created_at": T0 + timedelta(minutes=n),
        "metadata": {},
        "kind": "turn",
        "distance": 0.5,
        "bm25": 0.0,
        "doc_len": 10,
        "matched": [],
        "prev_distance": None,
        "prev_matched": [],
        "prev_bm25": 0.0,
        "next_distance": None,
        "next_matched": [],
        "next_bm25": 0.0,
        "term_idf": [math.log(1 + 98.5 / 2.5), 0.0],  # BM25's idf: 2 of 100 hold the first
        "unheld_idf": math.log(1 + 100.5 / 0.5),
        "memories": 100.0,
    }
    base.update(changes)
    return CandidateRow(**base)


def col(name: str) -> int:
    return RANK_FEATURES.index(name)


def test_idf_and_coverage_follow_bm25() -> None:
    facts = query_facts("when did I adopt a cello", [row(0)])
    idf_seen = math.log(1 + (100 - 2 + 0.5) / 2.5)
    assert facts.idf == pytest.approx((idf_seen, 0.0))
    most = math.log(1 + 100.5 / 0.5)  # a term the user never used weighs the most a term can
    assert facts.coverage == pytest.approx(idf_seen / (idf_seen + most))
    assert facts.asks_when
    assert query_facts("hi", []).coverage == 0.0


def test_rank_features_read_matches_neighbours_and_lists() -> None:
    rows = [
        row(0, distance=0.2, bm25=3.0, matched=[1], next_distance=0.1, next_matched=[1]),
        row(1, distance=0.4, conversation_id="c2"),
        row(2, distance=0.3, bm25=1.0, matched=[1], user_message="Where is it?"),
    ]
    facts = query_facts("cello lessons", rows)
    x = rank_features(facts, rows, vector_order=[0, 2, 1], k=25)
    assert x[0, col("cos")] == pytest.approx(0.8)
    assert x[0, col("idf_frac")] == pytest.approx(1.0)  # holds the only term the user used
    assert x[0, col("term_frac")] == pytest.approx(0.5)  # one of the query's two terms
    assert x[0, col("bm25_qnorm")] == pytest.approx(3.0 / facts.idf_sum)
    assert x[0, col("nb_cos")] == pytest.approx(0.9)
    assert x[0, col("nb_idf_frac")] == pytest.approx(1.0)
    assert x[1, col("nb_cos")] == 0.0  # no neighbour
    assert x[0, col("sess_n")] == pytest.approx(2 / 3)  # two of three candidates share c1
    assert x[0, col("sess_cos")] == pytest.approx(0.7)  # the other c1 candidate's cosine
    assert x[1, col("sess_cos")] == 0.0
    assert [x[i, col("rank_cos")] for i in range(3)] == pytest.approx([1.0, 1 / 3, 1 / 2])
    assert [x[i, col("rank_bm25")] for i in range(3)] == pytest.approx([1.0, 0.0, 1 / 2])
    assert x[2, col("bm25_rel")] == pytest.approx(1 / 3)
    assert x[2, col("cos_gap")] == pytest.approx(0.1)
    assert x[2, col("is_question")] == 1.0 and x[0, col("is_question")] == 0.0
    assert x[0, col("recency")] == 0.0 and x[2, col("recency")] == 1.0


def test_tied_keyword_scores_share_a_place_whatever_order_the_rows_came_in() -> None:
    # two memories with the same terms and length tie exactly (migration 0016); the database
    # returns them in the order of their random ids, which must not change any feature
    rows = [
        row(0, distance=0.3, bm25=2.0, matched=[1]),
        row(1, distance=0.2, bm25=2.0, matched=[1]),
        row(2, distance=0.4, bm25=1.0, matched=[1]),
    ]
    facts = query_facts("cello lessons", rows)
    x = rank_features(facts, rows, vector_order=[1, 0, 2], k=25)
    assert [x[i, col("rank_bm25")] for i in range(3)] == pytest.approx([1.0, 1.0, 1 / 3])
    swapped = [rows[1], rows[0], rows[2]]
    y = rank_features(facts, swapped, vector_order=[0, 1, 2], k=25)
    assert np.array_equal(y[[1, 0, 2]], x)
    assert rank_features(facts, rows, [1, 0, 2], k=2)[2, col("rank_bm25")] == 0.0  # third place


def test_a_date_counts_only_when_the_query_asks_when() -> None:
    rows = [row(0, ai_response="It was last May"), row(1, user_message="no date here")]
    asks = rank_features(query_facts("When was the trip?", rows), rows, [0, 1], 25)
    plain = rank_features(query_facts("Where was the trip?", rows), rows, [0, 1], 25)
    assert asks[0, col("when_x_temporal")] == 1.0 and asks[1, col("when_x_temporal")] == 0.0
    assert plain[0, col("cand_temporal")] == 1.0 and plain[0, col("when_x_temporal")] == 0.0


def test_gate_features_name_every_feature_once() -> None:
    rows = [row(0, distance=0.2), row(1, distance=0.6)]
    facts = query_facts("cello", rows)
    x = rank_features(facts, rows, [0, 1], 25)
    g = gate_features(facts, x, np.array([1.0, -2.0]), [0.8, 0.4], intent=0.5)
    assert len(g) == len(GATE_FEATURES) == len(set(GATE_FEATURES))
    values = dict(zip(GATE_FEATURES, g, strict=True))
    assert values["z1"] == 1.0 and values["z2"] == -2.0 and values["z3"] == -10.0
    assert values["best_cos"] == pytest.approx(0.8) and values["intent"] == 0.5
    assert values["cos_standout"] == pytest.approx(0.8 - 0.6)


def test_the_gate_reads_the_rankers_top_candidate_on_its_own() -> None:
    rows = [
        row(0, distance=0.5, bm25=2.0, matched=[1]),  # the ranker's top: first by BM25 only
        row(1, distance=0.1),  # first by cosine, holds no term
        row(2, distance=0.3, bm25=1.0, matched=[1]),
    ]
    facts = query_facts("what cello", rows)
    x = rank_features(facts, rows, [1, 2, 0], 25)
    g = gate_features(facts, x, np.array([3.0, 1.0, 2.0]), [0.9, 0.7, 0.5], intent=0.0)
    values = dict(zip(GATE_FEATURES, g, strict=True))
    assert values["top_idf"] == pytest.approx(1.0) and values["top_cos"] == pytest.approx(0.5)
    assert values["top_rank_bm25"] == 1.0 and values["top_rank_cos"] == pytest.approx(1 / 3)
    assert values["top_agree"] == 0.0  # the lists disagree on it
    assert values["top3_idf"] == pytest.approx(2.0)  # two of the top three hold the term
    assert values["cos_z"] == pytest.approx((0.9 - 0.7) / np.std([0.9, 0.7, 0.5]))


def linear(names: tuple[str, ...], weights: list[float], intercept: float) -> LinearModel:
    n = len(names)
    return LinearModel(names, np.zeros(n), np.ones(n), np.array(weights), intercept)


def stage(
    gate_intercept: float,
    *,
    cos_weight: float = 10.0,
    intent_offset: float = 0.0,
    intent_weight: float = 0.0,
) -> SecondStage:
    rank_w = [0.0] * len(RANK_FEATURES)
    rank_w[col("cos")] = cos_weight
    return SecondStage(
        embedding_model="test",
        candidates=25,
        ranker=linear(RANK_FEATURES, rank_w, -1.0),
        intent=np.zeros(DIMS),
        intent_intercept=0.0,
        gate=linear(GATE_FEATURES, [0.0] * len(GATE_FEATURES), gate_intercept),
        gate_offset=0.5,
        intent_offset=intent_offset,
        intent_weight=intent_weight,
        gate_bias=0.0,
        slope=0.3,
        source={},
        asking=AskingModel(np.zeros(DIMS), (), 0.0, intent_offset),
    )


def test_an_open_gate_hands_over_the_best_candidates_in_the_rankers_order() -> None:
    rows = [row(0, distance=0.6), row(1, distance=0.1), row(2, distance=0.3)]
    scored = stage(1.0).score("cello", np.ones(DIMS), rows, [1, 2, 0])
    assert scored.order == [1, 2, 0]
    assert scored.gate == pytest.approx(1.5)  # intercept plus offset
    assert scored.scores[1] == pytest.approx(1 / (1 + math.exp(-1.5)))
    assert scored.scores[1] > scored.scores[2] > scored.scores[0]
    # open: however far below the best, a candidate passes 0.5 (issue 45: reach first)
    assert min(scored.scores) >= 0.5
    # the second scores between 0.5 and the best, by how far the ranker puts it below
    below = float(scored.logits[2] - scored.logits[1])
    assert below < 0
    expected = 0.5 + (1 / (1 + math.exp(-1.5)) - 0.5) * math.exp(0.3 * below)
    assert scored.scores[2] == pytest.approx(expected)
    # a closed gate: nothing reaches 0.5, whatever the ranker thinks
    closed = stage(-3.0).score("cello", np.ones(DIMS), rows, [1, 2, 0])
    assert max(closed.scores) < 0.5
    assert closed.scores[1] == pytest.approx(1 / (1 + math.exp(2.5)))


def test_a_turns_gate_weighs_the_match_with_the_intent() -> None:
    rows = [row(0, distance=0.6), row(1, distance=0.1), row(2, distance=0.3)]
    # a message that asks nothing of memory: the intent pulls an open match below the gate
    chat = stage(1.0, intent_offset=-2.0, intent_weight=2.0)
    said = chat.score("hi", np.ones(DIMS), rows, [1, 2, 0])
    assert said.match == pytest.approx(1.5) and said.intent == pytest.approx(-2.0)
    assert said.gate == pytest.approx((1.5 + 2.0 * -2.0) / 3.0)
    assert max(said.scores) < 0.5
    # a question about the user's life: the intent opens a gate the match alone would close
    own = stage(-1.0, intent_offset=2.0, intent_weight=2.0)
    asked = own.score("which city am I in?", np.ones(DIMS), rows, [1, 2, 0])
    assert asked.match == pytest.approx(-0.5) and asked.gate == pytest.approx(3.5 / 3.0)
    assert min(asked.scores) >= 0.5
    # a search: the intent opens it where it would open a turn (decision 0050) ...
    searched = own.score("which city am I in?", np.ones(DIMS), rows, [1, 2, 0], intent=False)
    assert searched.gate == pytest.approx(3.5 / 3.0) and min(searched.scores) >= 0.5
    # ... and never shuts it: the match alone opens a search that asks nothing of memory
    box = stage(1.0, intent_offset=-2.0, intent_weight=2.0)
    sought = box.score("sister", np.ones(DIMS), rows, [1, 2, 0], intent=False)
    assert sought.gate == pytest.approx(1.5) and min(sought.scores) >= 0.5


def test_an_explanation_adds_up_to_the_logit_and_the_gate() -> None:
    rows = [row(0, distance=0.2, bm25=2.0, matched=[1]), row(1, distance=0.5)]
    s = stage(0.7)
    scored = s.score("cello", np.ones(DIMS), rows, [0, 1])
    for i in range(2):
        why = scored.explain(s, i)
        assert sum(why.ranker.values()) == pytest.approx(why.logit)
        assert sum(why.gate_parts.values()) == pytest.approx(why.match)
        assert why.gate == pytest.approx(s.verdict(why.match, why.intent))
        assert why.score == pytest.approx(scored.scores[i])
        data = why.as_dict()
        assert next(iter(data["ranker"])) == "cos"  # the largest part first
        json.dumps(data)


def test_json_round_trip_and_bad_files() -> None:
    s = stage(0.2)
    again = load_model(json.dumps(s.to_json()), SecondStage.from_json)
    assert again.to_json() == s.to_json()
    with pytest.raises(ConfigError, match="not JSON"):
        load_model("{", SecondStage.from_json)
    data = s.to_json()
    data["ranker"]["features"] = ["cos"]
    with pytest.raises(ConfigError, match="second-stage model over"):
        SecondStage.from_json(data)
    data = s.to_json()
    data["intent"]["weights"] = [0.0]
    with pytest.raises(ConfigError, match="dimensions"):
        SecondStage.from_json(data)
    with pytest.raises(ConfigError, match="not a second-stage model"):
        SecondStage.from_json({"ranker": {}})


def test_the_shipped_stage_is_for_bge_small_and_none_for_other_models() -> None:
    shipped = second_stage_for("bge-small-en-v1.5")
    assert shipped is not None
    assert shipped.embedding_model == "bge-small-en-v1.5"
    assert len(shipped.intent) == 384
    # a ranker of trees over the features, no learned similarity of the vectors, and a linear
    # gate (decision 0027)
    assert isinstance(shipped.ranker, TreeModel) and isinstance(shipped.gate, LinearModel)
    assert shipped.source["command"].startswith("python benchmarks/fit_second_stage.py")
    assert "uncommitted" not in shipped.source["commit"]  # a clean checkout reproduces it
    assert second_stage_for("all-MiniLM-L6-v2") is None
    assert second_stage_for("fake-hash-64") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We went hiking last weekend", True),
        ("In MAY we moved", True),
        ("It was 2023 then", True),
        ("1,000 people came", True),  # "1" is a number of its own
        ("I got 5th place", False),  # "5th" is not a number
        ("the weekly meeting", False),  # not a listed word
        ("a week_end", False),  # one word of word characters
        ("Yesterday!", True),
        ("", False),
        ("caf\u00e9 \u0663\u0664", True),  # Unicode decimal digits are a number, as \d was
        ("x\u00b2", False),  # a superscript two is a digit but not decimal
        # a text that is not ASCII has its words lower-cased one by one, as an ASCII one whole
        ("Stra\u00dfe, TONIGHT", True),
        ("na\u00efve weekend-ish", True),
        ("\u0130stanbul", False),  # lower-cased it holds a dot above: not "istanbul", no word
        ("s\u0130nce", False),  # "si\u0307nce" is not "since"
        ("\uff21\uff27\uff2f", False),  # full-width "AGO" lower-cases to full-width "ago"
    ],
)
def test_a_word_of_time_or_a_number_makes_a_text_temporal(text: str, expected: bool) -> None:
    assert _has_time(text) is expected


def little_trees() -> TreeModel:
    """Two trees of depth 2 over three features: the first splits on "a" then "b", the second
    is a single leaf padded to depth 2 (every split goes left)."""
    inf = float("inf")
    return TreeModel(
        features=("a", "b", "c"),
        baseline=0.5,
        depth=2,
        feature=np.array([[0, 1, 1], [0, 0, 0]]),
        threshold=np.array([[1.0, 0.0, 0.0], [inf, inf, inf]]),
        # node means: root, its two children, then the four leaves
        value=np.array([[0.0, -1.0, 1.0, -2.0, 0.0, 0.5, 1.5], [0.25] * 7]),
    )


def test_trees_take_each_row_down_its_path() -> None:
    trees = little_trees()
    x = np.array([[0.5, -1.0, 9.0], [0.5, 3.0, 9.0], [2.0, -1.0, 9.0], [2.0, 3.0, 9.0]])
    # a <= 1 goes left, then b <= 0 goes left; the padded tree adds 0.25 to every row
    assert trees.logits(x) == pytest.approx([0.5 - 2.0 + 0.25, 0.5 + 0.25, 1.25, 2.25])
    assert trees.logits(np.zeros((0, 3))).shape == (0,)
    # a value exactly at the threshold goes left, as LightGBM's numeric splits do
    assert trees.logits(np.array([[1.0, 0.0, 0.0]]))[0] == pytest.approx(0.5 - 2.0 + 0.25)


def test_tree_contributions_add_up_to_the_logit() -> None:
    trees = little_trees()
    row = np.array([2.0, 3.0, 9.0])
    parts = trees.contributions(row)
    assert sum(parts.values()) == pytest.approx(trees.logits(row[None, :])[0])
    assert parts["a"] == pytest.approx(1.0)  # the root's mean 0 to its right child's 1
    assert parts["b"] == pytest.approx(0.5)  # 1 to the leaf's 1.5
    assert parts["c"] == 0.0  # never split on
    assert parts["bias"] == pytest.approx(0.5 + 0.0 + 0.25)


def test_trees_json_round_trip_and_bad_arrays() -> None:
    trees = little_trees()
    data = json.loads(json.dumps(trees.to_json()))  # +inf thresholds survive as JSON numbers
    again = TreeModel.from_json(data, ("a", "b", "c"))
    x = np.array([[0.0, 0.0, 0.0], [5.0, -5.0, 1.0]])
    assert again.logits(x) == pytest.approx(trees.logits(x))
    with pytest.raises(ConfigError, match="tree model over"):
        TreeModel.from_json(data, ("a", "b"))
    for key, bad in (("feature", [[0, 1, 7], [0, 0, 0]]), ("value", [[0.0], [0.0]])):
        broken = {**data, key: bad}
        with pytest.raises(ConfigError, match="do not match"):
            TreeModel.from_json(broken, ("a", "b", "c"))


def test_a_stage_of_trees_scores_and_explains_without_vector_products() -> None:
    rank = little_trees()
    splits = np.array([[col("cos"), 0, 0], [0, 0, 0]])
    ranker = TreeModel(RANK_FEATURES, rank.baseline, rank.depth, splits, rank.threshold, rank.value)
    gate = TreeModel(GATE_FEATURES, 1.0, rank.depth, np.zeros((2, 3), dtype=np.intp),
                     rank.threshold, rank.value)  # fmt: skip
    s = SecondStage(
        embedding_model="test", candidates=25, ranker=ranker,
        intent=np.zeros(DIMS), intent_intercept=0.0, gate=gate, gate_offset=0.5,
        intent_offset=0.0, intent_weight=0.0, gate_bias=0.0, slope=0.3, source={},
        asking=AskingModel(np.zeros(DIMS), (), 0.0, 0.0),
    )  # fmt: skip
    rows = [row(0, distance=0.95), row(1, distance=0.5)]  # cos 0.05 <= 1, cos 0.5 <= 1
    scored = s.score("cello", np.ones(DIMS), rows, [1, 0])
    why = scored.explain(s, 0)
    assert "vectors" not in why.ranker and "intercept" not in why.ranker
    assert sum(why.ranker.values()) == pytest.approx(why.logit)
    assert sum(why.gate_parts.values()) == pytest.approx(why.match)
    again = load_model(json.dumps(s.to_json()), SecondStage.from_json)
    assert isinstance(again.ranker, TreeModel)
    assert again.score("cello", np.ones(DIMS), rows, [1, 0]).scores == scored.scores


def test_a_time_the_message_names_puts_the_memories_from_then_first() -> None:
    now = T0 + timedelta(days=30)
    rows = [
        row(0, distance=0.1, created_at=now - timedelta(days=14)),  # the ranker's best
        row(1, distance=0.4, created_at=now - timedelta(days=1)),  # from yesterday
    ]
    s = stage(1.0)
    plain = s.score("where did I go hiking", np.ones(DIMS), rows, [0, 1], now=now)
    timed = s.score("where did I go hiking yesterday", np.ones(DIMS), rows, [0, 1], now=now)
    assert plain.order == [0, 1] and timed.order == [1, 0]
    # the gate reads the ranker's own logits, and that a candidate is from the time named
    assert timed._gate_x[GATE_FEATURES.index("time_hit")] == 1.0
    assert plain._gate_x[GATE_FEATURES.index("time_hit")] == 0.0
    why = timed.explain(s, 1)
    assert why.ranker["when"] > 0 and sum(why.ranker.values()) == pytest.approx(why.logit)
    assert "when" not in timed.explain(s, 0).ranker
