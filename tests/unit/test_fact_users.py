"""Issue 45's fact users (benchmarks/data/fact_users.json): their counts, their split, questions
in other words, and no overlap with the gate's training users, the held-out probes, or between
the fit, the measure and the fresh users."""

from __future__ import annotations

import json

import pytest
from harness.factusers import FactUser, fact_users
from harness.heldout import DATA, PARAPHRASE_PROBE, same_line, shared_content_words, small_talk

FACTS = 30


def _statements_elsewhere() -> list[str]:
    """What the gate's training users, the restatement probe and the paraphrase probe state."""
    training = json.loads((DATA / "gate_training.json").read_text())
    restatement = json.loads((DATA / "restatement_probe.json").read_text())
    paraphrase = json.loads(PARAPHRASE_PROBE.read_text())
    statements = [turn["user_message"] for user in training["new_users"] for turn in user]
    for fact in restatement["facts"]:
        statements += [fact["said"], *([fact["changed"]] if "changed" in fact else [])]
    statements += [turn["user"] for turn in paraphrase["thread"] if turn["fact"] is not None]
    return statements


def _facts(users: list[FactUser]) -> list[str]:
    return [turn.user for user in users for turn in user.facts]


def _chat(user: FactUser) -> list[str]:
    """A user's small talk: what they send later and the thread's turns that tell no fact."""
    return [*user.small_talk, *(t.user for t in user.thread if t.fact is None)]


@pytest.fixture(scope="module")
def users() -> list[FactUser]:
    return fact_users()


def test_sixteen_users_four_fit_four_measure_eight_fresh(users: list[FactUser]) -> None:
    assert len(users) == 16 and len({u.name for u in users}) == 16
    assert [u.split for u in users] == ["fit"] * 4 + ["measure"] * 4 + ["fresh"] * 8
    assert fact_users(split="fit") == users[:4]
    assert fact_users(split="measure") == users[4:8]
    assert fact_users(split="fresh") == users[8:]


def test_each_user_tells_thirty_facts_among_fifteen_chat_turns(users: list[FactUser]) -> None:
    for user in users:
        assert [t.fact for t in user.facts] == list(range(FACTS)), user.name
        assert sum(t.fact is None for t in user.thread) == 15, user.name
        assert all(t.user.strip() and t.assistant.strip() for t in user.thread), user.name


def test_each_fact_is_asked_once_in_other_words(users: list[FactUser]) -> None:
    for user in users:
        assert sorted(q.fact for q in user.questions) == list(range(FACTS)), user.name
        for question in user.questions:
            turn = user.fact_turn(question.fact)
            told = f"{turn.user} {turn.assistant}"
            assert shared_content_words(question.text, told) == set(), (user.name, question)


def test_never_said_questions_and_small_talk(users: list[FactUser]) -> None:
    training = json.loads((DATA / "gate_training.json").read_text())["small_talk"]
    held_out = {line.casefold() for line in [*small_talk(), *training]}
    for user in users:
        assert len(user.never_said) == 10 and len(set(user.never_said)) == 10, user.name
        assert len(user.small_talk) == 10 and len(set(user.small_talk)) == 10, user.name
        assert not {line.casefold() for line in _chat(user)} & held_out, user.name


def test_fresh_small_talk_repeats_no_line_held_out_or_of_the_other_users(
    users: list[FactUser],
) -> None:
    training = json.loads((DATA / "gate_training.json").read_text())["small_talk"]
    held_out = {same_line(line) for line in [*small_talk(), *training]}
    for user in users[8:]:
        others = {same_line(line) for other in users if other is not user for line in _chat(other)}
        lines = [same_line(line) for line in _chat(user)]
        assert len(set(lines)) == len(lines), user.name
        assert not set(lines) & held_out, user.name
        assert not set(lines) & others, user.name


def test_no_fact_shares_two_content_words_with_the_other_data(users: list[FactUser]) -> None:
    overlaps = [
        (fact, other)
        for fact in _facts(users)
        for other in _statements_elsewhere()
        if len(shared_content_words(fact, other)) >= 2
    ]
    assert overlaps == []


def test_measure_facts_share_at_most_one_content_word_with_fit_facts(
    users: list[FactUser],
) -> None:
    fit, measure = _facts(users[:4]), _facts(users[4:8])
    overlaps = [(m, f) for m in measure for f in fit if len(shared_content_words(m, f)) >= 2]
    assert overlaps == []


def test_fresh_facts_share_at_most_one_content_word_with_fit_or_measure_facts(
    users: list[FactUser],
) -> None:
    earlier, fresh = _facts(users[:8]), _facts(users[8:])
    overlaps = [(n, e) for n in fresh for e in earlier if len(shared_content_words(n, e)) >= 2]
    assert overlaps == []
