"""Which stored turns count as an echo of a query (recall.search.echo)."""

from __future__ import annotations

import pytest

from recall.search.echo import is_echo, is_question, terms


@pytest.mark.parametrize(
    ("query", "user_message", "ai_response"),
    [
        ("Where does my sister live?", "Where does my sister live?", "I'm not sure."),
        ("where does my sister live", "Where does my sister live?", "I don't know, sorry."),
        ("What do I do for a living?", "what do I do for a living?", "No idea!"),
        (
            "Which concert did I go to?",
            "Which concert did I go to?",
            "Which concert did you go to?",
        ),
    ],
)
def test_an_unanswered_earlier_asking_is_an_echo(
    query: str, user_message: str, ai_response: str
) -> None:
    assert is_echo(query, user_message, ai_response)


@pytest.mark.parametrize(
    ("query", "user_message", "ai_response"),
    [
        # the memory that answers it
        ("Where does my sister live?", "My sister Ana lives in Lisbon", "Lovely city!"),
        # the same question, answered
        ("Where does my sister live?", "Where does my sister live?", "In Lisbon, you told me."),
        # another question, unanswered
        ("Where does my sister live?", "What is my dog's name?", "I'm not sure."),
        # a statement with an uninformative reply
        ("Where does my sister live?", "My sister lives somewhere warm", "I'm not sure."),
        ("?", "?", "I'm not sure."),
    ],
)
def test_anything_else_is_kept(query: str, user_message: str, ai_response: str) -> None:
    assert not is_echo(query, user_message, ai_response)


def test_questions_and_terms() -> None:
    assert is_question("Where is it") and is_question("it is where?")
    assert not is_question("I moved to Berlin.")
    assert terms("Where does my SISTER live?") == {"sister", "live"}
