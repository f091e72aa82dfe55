"""Which stored turns are questions left unanswered (recall.search.echo)."""

from __future__ import annotations

import pytest

from recall.example.responder import offline_reply
from recall.search.echo import (
    is_acknowledgement,
    is_question,
    is_small_talk,
    is_unanswered,
    terms,
)


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


@pytest.mark.parametrize(
    ("user_message", "ai_response"),
    [
        ("hi there!", "Noted."),
        ("hi there", "Hello! How can I help today?"),
        ("good morning!", "Good morning! How are you?"),
        ("thanks, that's all for now", "You're welcome!"),
        ("thanks, that's helpful", "Glad to help!"),
        ("bye for now", "Take care, talk soon!"),
        ("heyy", "Hey! What's up?"),  # drawn out, it is the word it draws out (rule 2)
        ("byeee!!", "Bye, see you soon!"),
    ],
)
def test_small_talk_on_both_sides_holds_nothing(user_message: str, ai_response: str) -> None:
    assert is_small_talk(user_message, ai_response)


@pytest.mark.parametrize(
    ("user_message", "ai_response"),
    [
        ("hi there! I just moved to Lisbon", "Welcome! How do you like it?"),
        ("good morning!", "Morning! Did the Berlin marathon go well?"),  # the reply holds a fact
        ("I'm tired today", "Sorry to hear."),  # a word of the user's own
        ("thanks, the vet said Max is fine", "Glad to hear!"),
        ("", "Hello!"),
        ("I sleep soo badly", "Sorry to hear that."),  # drawn out, still a word of its own
    ],
)
def test_a_turn_with_a_word_of_its_own_is_no_small_talk(
    user_message: str, ai_response: str
) -> None:
    assert not is_small_talk(user_message, ai_response)


def test_the_example_responder_says_nothing_a_search_could_find_in_it() -> None:
    # its reply to what it cannot answer is a bare acknowledgement: the question is an echo
    assert is_unanswered("Which city am I in?", offline_reply("Which city am I in?", []))
    assert is_small_talk("good morning!", offline_reply("good morning!", []))
    # a memory a line, so each quoted line is a quote of one memory (decision 0038)
    handed = [{"user_message": "I drive a grey Skoda"}, {"user_message": "I live in Tucson"}]
    reply = offline_reply("What car do I have?", handed)
    assert reply == "You told me:\n- I drive a grey Skoda\n- I live in Tucson"
    assert is_unanswered("What car do I have?", reply, "You told me:")
