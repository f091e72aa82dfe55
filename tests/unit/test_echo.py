"""Which stored turns are questions left unanswered (recall.search.echo)."""

from __future__ import annotations

import pytest

from recall.search.echo import is_acknowledgement, is_question, is_unanswered, terms


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


@pytest.mark.parametrize("reply", ["Noted.", "OK", "Got it.", "Sure!", "Thanks", "Okay, noted."])
def test_a_bare_acknowledgement_answers_nothing(reply: str) -> None:
    # the example graph's offline responder answers "Noted." to what it cannot answer
    assert is_acknowledgement(reply)
    assert is_unanswered("What car do I have?", reply)
    assert not is_unanswered("I drive a grey Skoda now.", reply)  # a statement is kept


@pytest.mark.parametrize("reply", ["Yes.", "No, a bike.", "Noted: a grey Skoda.", ""])
def test_an_answer_is_no_acknowledgement(reply: str) -> None:
    assert not is_acknowledgement(reply)
    if reply:
        assert not is_unanswered("Do I have a car?", reply)


def test_the_reply_is_judged_by_its_own_part() -> None:
    question, reply = "What car do I have?", "You drive a grey Skoda now."
    assert not is_unanswered(question, reply)  # the reply alone holds an answer...
    # ... but every sentence of it quoted a memory: the turn adds nothing of its own
    assert is_unanswered(question, reply, "")
    assert is_unanswered(question, reply, "Noted.")
    assert not is_unanswered(question, reply, "It is a diesel.")
