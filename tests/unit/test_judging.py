"""What a turn holds, judged when it is written (`recall.search.judging`, decision 0049), and
the rules it reads: own words without a lead-in, small talk answered socially, a reply that
cannot see live data, a statement that updates a source, and the second stage following cosine
where it has no evidence."""

from __future__ import annotations

import numpy as np
import pytest

from recall.memory import LIBRARY_KEY
from recall.search.echo import is_small_talk, is_unanswered
from recall.search.features import RANK_FEATURES
from recall.search.judging import (
    QUESTION,
    RESTATEMENT,
    RULE,
    SMALL_TALK,
    STATEMENT,
    holds,
    holds_nothing,
    judged,
    judgement,
)
from recall.search.ownwords import own_part
from recall.search.provenance import Provenance, updated
from recall.search.second_stage import follow_cosine

SOURCE = "00000000-0000-0000-0000-000000000001"
PRIYA = "My sister Priya just moved to Lisbon for a job at a bakery"


@pytest.mark.parametrize(
    ("user_message", "reply", "own", "provenance", "want"),
    [
        ("I work as a nurse at St. Mary's", "Noted.", None, None, STATEMENT),
        ("What's my job?", "I'm not sure.", None, None, QUESTION),
        ("What's my job?", f"You told me:\n{PRIYA}", "", None, QUESTION),
        ("thanks a lot!", "You're welcome!", None, None, SMALL_TALK),
        ("kia ora", "Kia ora! What can I help with?", None, None, SMALL_TALK),
        # a reply that only quotes, to a user who adds nothing: a restatement
        ("Yes, Priya is in Lisbon", f"{PRIYA}.", "",
         Provenance((SOURCE,), (SOURCE,), True, own="", own_judged=True), RESTATEMENT),
        # provenance never judged for its own part: the reply is taken as its quotes
        ("Yes, Priya is in Lisbon", f"{PRIYA}.", None,
         Provenance((SOURCE,), (SOURCE,), True), RESTATEMENT),
        # a reply of its own beside the quote: it holds that
        ("Yes, Priya is in Lisbon", f"{PRIYA}. Pastel de nata is the thing to try there.",
         "Pastel de nata is the thing to try there.",
         Provenance((SOURCE,), (SOURCE,), True, own="Pastel de nata is the thing to try there.",
                    own_judged=True), STATEMENT),
    ],
)  # fmt: skip
def test_what_a_turn_holds(
    user_message: str, reply: str, own: str | None, provenance: Provenance | None, want: str
) -> None:
    assert holds(user_message, reply, own, provenance) == want


def test_the_judgement_is_recorded_under_the_librarys_key_with_its_rule() -> None:
    given = {"mine": 1, LIBRARY_KEY: {"sources": [SOURCE], "quoted": [], "restates": False}}
    metadata = judged(given, "hello there", "hi!", "turn")
    assert metadata["mine"] == 1
    assert metadata[LIBRARY_KEY]["sources"] == [SOURCE]  # provenance kept beside it
    assert judgement(metadata) == (SMALL_TALK, RULE)
    assert holds_nothing("hello there", "hi!", metadata)
    # a note is a statement whatever its words; a caller's own value under the key is replaced
    note = judged({LIBRARY_KEY: "mine"}, "hello there", "", "note")
    assert note[LIBRARY_KEY] == {"holds": STATEMENT, "rule": RULE}
    assert not holds_nothing("hello there", "", note, "note")


def test_a_memory_not_judged_yet_is_judged_when_read() -> None:
    assert judgement({}) is None and judgement({LIBRARY_KEY: {"holds": "odd", "rule": 1}}) is None
    assert holds_nothing("thanks a lot!", "You're welcome!", {})
    assert not holds_nothing("I keep bees", "Noted.", {})
    # a stored judgement of the current rule is taken as it is
    assert not holds_nothing("thanks a lot!", "You're welcome!",
                             {LIBRARY_KEY: {"holds": STATEMENT, "rule": RULE}})  # fmt: skip


def test_a_lead_in_to_the_quotes_is_not_the_replys_own() -> None:
    sources = [(PRIYA, "Noted.")]
    assert own_part(f"You told me:\n{PRIYA}", sources) == ""
    assert own_part(f"Have fun in Berlin! You told me:\n{PRIYA}", sources) == "Have fun in Berlin!"
    # a reply that quotes nothing keeps every sentence, its lead-ins too
    assert own_part("You told me: nothing yet.", sources) is None


@pytest.mark.parametrize(
    ("user_message", "reply", "small_talk"),
    [
        ("choice", "Anything else?", True),
        ("ta", "Anytime!", True),
        ("much obliged", "My pleasure.", True),
        ("I got promoted!", "Great!", False),  # "Great!" can answer a fact
        ("I'm vegan", "Got it!", False),  # an acknowledgement answers a statement
        ("I moved to Porto in 2021", "Hi!", False),  # a digit
        ("you around, AI?", "I'm here! What's up?", False),  # a question
    ],
)
def test_a_short_message_answered_only_socially_is_small_talk(
    user_message: str, reply: str, small_talk: bool
) -> None:
    assert is_small_talk(user_message, reply) is small_talk


def test_a_reply_that_cannot_see_live_data_leaves_the_question_unanswered() -> None:
    reply = "I can't see live forecasts; a weather service will show Friday's wind."
    assert is_unanswered("is it going to be windy by the coast on Friday?", reply)
    assert not is_unanswered("how many litres in a gallon?", "About 3.79 litres.")


def test_a_statement_that_says_something_changed_updates_its_source() -> None:
    sources = [("other", "I run on Sundays", "Noted."), (SOURCE, PRIYA, "Noted.")]
    assert updated("Update: Priya moved again, she's in Porto now.", sources) == SOURCE
    assert updated("I quit samba and joined a harp ensemble instead.",
                   [(SOURCE, "I beat a surdo in a samba troupe.", "Noted.")]) == SOURCE  # fmt: skip
    assert updated("Where does Priya live now?", sources) is None  # a question
    assert updated("Priya loves the pastries there.", sources) is None  # nothing changed
    # the same slot, stated anew
    assert updated("I drive a Tesla", [(SOURCE, "I drive a Prius", "Noted.")]) == SOURCE


def _x(cos: list[float], terms: list[float]) -> np.ndarray:
    x = np.zeros((len(cos), len(RANK_FEATURES)))
    x[:, RANK_FEATURES.index("cos")] = cos
    x[:, RANK_FEATURES.index("term_frac")] = terms
    return x


def test_without_evidence_the_ranking_is_cosines() -> None:
    logits = np.array([3.0, 1.0, 2.0])
    x = _x([0.5, 0.7, 0.6], [0.0, 0.0, 0.0])
    out = follow_cosine(logits, x, np.zeros(3))
    assert list(np.argsort(-out)) == [1, 2, 0]  # by cosine
    assert sorted(out) == sorted(logits)  # the same logits, handed out again


def test_a_candidate_with_evidence_keeps_its_place() -> None:
    logits = np.array([3.0, 1.0, 2.0, 0.5])
    x = _x([0.5, 0.7, 0.4, 0.6], [0.0, 0.0, 0.5, 0.0])
    out = follow_cosine(logits, x, np.zeros(4))
    assert out[2] == 2.0  # it holds a query word: where the ranker put it
    assert list(np.argsort(-out)) == [1, 2, 3, 0]  # the others by cosine around it
    # a time the query names is evidence too
    bonus = np.array([1.0, 0.0, 0.0, 0.0])
    assert follow_cosine(logits, x, bonus)[0] == 3.0
