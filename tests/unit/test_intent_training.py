"""The asking model's training data (benchmarks/data/intent_training.json) stays apart from the
texts reported as evidence: the fresh fact users and the fresh restatement probe (issue 45)."""

from __future__ import annotations

import json

from harness.factusers import fact_users
from harness.heldout import DATA, same_line, shared_content_words


def _training() -> dict[str, list[str]]:
    data = json.loads((DATA / "intent_training.json").read_text())
    return {"personal": data["personal"], "small_talk": data["small_talk"]}


def _reported_questions() -> list[str]:
    fresh = json.loads((DATA / "restatement_probe_fresh.json").read_text())
    asked = [q for fact in fresh["facts"] for q in fact["asked"]]
    return [q.text for u in fact_users(split="fresh") for q in u.questions] + asked


def test_no_training_line_is_a_reported_message() -> None:
    reported = {same_line(t) for u in fact_users(split="fresh") for t in (
        *(q.text for q in u.questions), *u.never_said, *u.small_talk)}  # fmt: skip
    reported |= {same_line(q) for q in _reported_questions()}
    training = _training()
    lines = [*training["personal"], *training["small_talk"]]
    assert len({same_line(t) for t in lines}) == len(lines)  # no line twice
    assert not {same_line(t) for t in lines} & reported


def test_no_personal_line_shares_two_words_with_a_reported_question() -> None:
    questions = _reported_questions()
    clashes = [
        (line, q)
        for line in _training()["personal"]
        for q in questions
        if len(shared_content_words(line, q)) >= 2
    ]
    assert clashes == []
