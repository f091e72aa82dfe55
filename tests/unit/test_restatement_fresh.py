"""The fresh restatement probe (benchmarks/data/restatement_probe_fresh.json), written after the
first was used to choose the changed-facts rule: the first probe's counts, questions in other
words, marker words that only the statements hold, and no fact close to the other data's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from harness.factusers import fact_users
from harness.heldout import DATA, PARAPHRASE_PROBE, shared_content_words

FRESH = DATA / "restatement_probe_fresh.json"


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FRESH.read_text())
    return data


def _statements(fact: dict[str, Any]) -> list[str]:
    """What a fact's user says: the fact, and its change where it has one."""
    return [fact["said"], *([fact["changed"]] if "changed" in fact else [])]


def _statements_elsewhere() -> list[str]:
    """What the first restatement probe, the gate's training users, the paraphrase probe and
    the fact users state."""
    training = json.loads((DATA / "gate_training.json").read_text())
    first = json.loads((DATA / "restatement_probe.json").read_text())
    paraphrase = json.loads(PARAPHRASE_PROBE.read_text())
    statements = [turn["user_message"] for user in training["new_users"] for turn in user]
    statements += [s for fact in first["facts"] for s in _statements(fact)]
    statements += [turn["user"] for turn in paraphrase["thread"] if turn["fact"] is not None]
    statements += [turn.user for user in fact_users() for turn in user.facts]
    return statements


def test_the_first_probes_counts(probe: dict[str, Any]) -> None:
    first = json.loads((DATA / "restatement_probe.json").read_text())
    assert set(probe) == set(first)
    facts = probe["facts"]
    assert len(facts) == 30 and len({f["said"] for f in facts}) == 30
    assert all(len(f["asked"]) == 2 for f in facts)
    changed = [f for f in facts if "changed" in f]
    assert len(changed) == 10 and all("new_key" in f for f in changed)
    assert not any("new_key" in f for f in facts if "changed" not in f)
    assert len(set(probe["requests"])) == 8 and len(set(probe["topics"])) == 24
    assert not set(probe["requests"]) & set(first["requests"])
    assert not set(probe["topics"]) & set(first["topics"])


def test_each_question_shares_no_content_word_with_its_statement_or_change(
    probe: dict[str, Any],
) -> None:
    shared = [
        (question, said, words)
        for fact in probe["facts"]
        for question in fact["asked"]
        for said in _statements(fact)
        if (words := shared_content_words(question, said))
    ]
    assert shared == []


def test_each_key_is_in_its_statement_and_not_in_its_questions(probe: dict[str, Any]) -> None:
    for fact in probe["facts"]:
        pairs = [(fact["key"], fact["said"])]
        if "changed" in fact:
            pairs.append((fact["new_key"], fact["changed"]))
            assert fact["new_key"] not in fact["said"].lower(), fact["said"]
        for key, said in pairs:
            assert key in said.lower(), (key, said)
            assert not any(key in q.lower() for q in fact["asked"]), (key, fact["asked"])


def test_each_key_marks_its_own_fact_only(probe: dict[str, Any]) -> None:
    """No key is in another fact's statements or questions, nor in the small talk."""
    facts = probe["facts"]
    chat = [*probe["requests"], *probe["topics"]]
    for i, fact in enumerate(facts):
        others = [
            text
            for j, other in enumerate(facts)
            if j != i
            for text in [*_statements(other), *other["asked"]]
        ]
        for key in [fact["key"], *([fact["new_key"]] if "changed" in fact else [])]:
            assert not [text for text in [*others, *chat] if key in text.lower()], key


def test_no_fact_shares_two_content_words_with_the_other_data(probe: dict[str, Any]) -> None:
    elsewhere = _statements_elsewhere()
    overlaps = [
        (said, other)
        for fact in probe["facts"]
        for said in _statements(fact)
        for other in elsewhere
        if len(shared_content_words(said, other)) >= 2
    ]
    assert overlaps == []
