"""The asking model (`recall.search.asking`): the intent a turn's gate weighs with the match."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recall.errors import ConfigError
from recall.search.asking import AskingModel
from recall.search.second_stage import second_stage_for


def test_the_logit_adds_the_vector_the_words_the_intercept_and_the_offset() -> None:
    model = AskingModel.of([1.0, -2.0], [("me", r"\bmy\b", 0.5), ("q", r"\?", 0.25)], -1.0, 0.1)
    vector = np.array([0.5, 0.25])  # 0.5 - 0.5 = 0
    assert model.logit("what is my name?", vector) == pytest.approx(0.5 + 0.25 - 1.0 + 0.1)
    assert model.logit("hello", vector) == pytest.approx(-1.0 + 0.1)
    assert model.logit("WHAT IS MY NAME", vector) == pytest.approx(0.5 - 0.9)  # lower-cased


def test_json_round_trip_and_bad_files() -> None:
    model = AskingModel.of([1.0, -2.0], [("me", r"\bmy\b", 0.5)], -1.0, 0.1)
    again = AskingModel.from_json(json.loads(json.dumps(model.to_json())), 2)
    assert again.to_json() == model.to_json()
    with pytest.raises(ConfigError, match="dimensions"):
        AskingModel.from_json(model.to_json(), 3)
    broken = {**model.to_json(), "words": [{"name": "x", "pattern": "(", "weight": 1.0}]}
    with pytest.raises(ConfigError, match="not an intent model"):
        AskingModel.from_json(broken, 2)
    with pytest.raises(ConfigError, match="not an intent model"):
        AskingModel.from_json({"weights": [1.0, 2.0]}, 2)


def test_a_hidden_layer_of_rectified_units_reads_the_vector_and_the_words() -> None:
    # inputs: the vector's 2 values, then the word "my"; two units
    layer = np.array([[1.0, -1.0], [0.0, 1.0], [2.0, 0.0]])
    hidden = (layer, np.array([0.0, -0.5]))
    model = AskingModel.of([1.5, -2.0], [("me", r"\bmy\b", 0.0)], -1.0, 0.25, hidden)
    vector = np.array([0.5, 1.0])
    # with "my": units relu(0.5 + 2, -0.5 + 1 - 0.5) = (2.5, 0); without: (0.5, 0)
    assert model.logit("what is my name?", vector) == pytest.approx(1.5 * 2.5 - 1.0 + 0.25)
    assert model.logit("hello", vector) == pytest.approx(1.5 * 0.5 - 1.0 + 0.25)
    again = AskingModel.from_json(json.loads(json.dumps(model.to_json())), 2)
    assert again.to_json() == model.to_json()
    assert again.logit("what is my name?", vector) == model.logit("what is my name?", vector)
    with pytest.raises(ConfigError, match="hidden layer"):
        AskingModel.from_json(model.to_json(), 3)  # inputs do not match the layer
    wrong = {**model.to_json(), "weights": [1.0, 2.0, 3.0]}
    with pytest.raises(ConfigError, match="hidden layer"):
        AskingModel.from_json(wrong, 2)


def test_the_shipped_model_tells_a_question_about_the_user_from_small_talk() -> None:
    stage = second_stage_for("bge-small-en-v1.5")
    assert stage is not None
    words = {name for name, _pattern, _weight in stage.asking.words}
    assert {"first_person", "question"} <= words
    # the words alone: a first-person question leans towards asking, a bare greeting does not
    hidden = stage.asking.hidden
    assert hidden is not None  # one hidden layer (decision 0040)
    zero = np.zeros(hidden[0].shape[0] - len(stage.asking.words))  # the vector's dimensions
    assert stage.asking.logit("where do I live?", zero) > stage.asking.logit("hello", zero)
