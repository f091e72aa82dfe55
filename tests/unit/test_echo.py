"""Which stored turns are questions left unanswered (recall.search.echo)."""

from __future__ import annotations

import pytest

from recall.search.echo import is_question, is_unanswered, terms


@pytest.mark.parametrize(
    ("user_message", "ai_response"),
    [
        ("Where does my sister live?", "I'm not sure."),
        ("where does my sister live", "I don't know, sorry."),
        ("What do I do for a living?", "No idea!"),
        ("Which concert did I go to?", "Which concert did you go to?"),  # says nothing new
    ],
)
def test_a_question_left_unanswered_is_an_echo(user_message: str, ai_response: str) -> None:
    assert is_unanswered(user_message, ai_response)


@pytest.mark.parametrize(
    ("user_message", "ai_response"),
    [
        ("My sister Ana lives in Lisbon", "Lovely city!"),  # not a question
        ("Where does my sister live?", "In Lisbon, you told me."),  # answered
        ("My sister lives somewhere warm", "I'm not sure."),  # a statement, whatever the reply
        ("?", "I'm not sure."),  # no words
    ],
)
def test_anything_else_is_kept(user_message: str, ai_response: str) -> None:
    assert not is_unanswered(user_message, ai_response)


def test_questions_and_terms() -> None:
    assert is_question("Where is it") and is_question("it is where?")
    assert not is_question("I moved to Berlin.")
    assert terms("Where does my SISTER live?") == {"sister", "live"}
