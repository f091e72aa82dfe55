"""The explanation in the user's words (`recall.store.explaining`): one function writes what
`recall search --explain` and the inspector show."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from recall.memory import Memory
from recall.search.verdict import Verdict
from recall.store.explaining import raw_lines, reasons

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


def _memory(score: float, explanation: dict[str, object] | None = None) -> Memory:
    return Memory(
        id="m",
        user_message="I adopted a dog named Max",
        ai_response="Max is a lovely name!",
        similarity=0.74,
        conversation_id=None,
        created_at=NOW - timedelta(days=3),
        score=score,
        explanation=explanation,
    )


def _raw(gate: float, match: float, intent: float) -> dict[str, object]:
    return {
        "score": 0.9,
        "gate": gate,
        "match": match,
        "intent": intent,
        "logit": 1.0,
        "best_logit": 1.0,
        "ranker": {"bm25_qnorm": 1.5, "cos": 0.5, "recency": -0.2, "intercept": -3.0},
        "gate_parts": {"coverage": 1.2, "best_cos": -0.4, "offset": 0.5, "intent": 0.1},
    }


def test_words_meaning_age_and_verdict() -> None:
    why = reasons(
        "what is my dog called?",
        _memory(0.9),
        passes=True,
        verdict=Verdict("semantic", 0.5),
        now=NOW,
    )
    assert why[0] == 'It holds 1 of the message\'s 2 words: "dog".'
    assert why[1] == "In meaning it is close to the message (similarity 0.74)."
    assert why[2] == "It was said 3 days ago (2026-11-24)."
    assert why[-1] == "Similarity 0.900 reaches the threshold 0.5: it is returned."


def test_the_words_a_memory_holds_are_the_ones_it_is_indexed_by() -> None:
    """A reply that quoted another memory holds that memory's words in its text, not in its
    own words (metadata "recall"/"own", decision 0038): the keyword index and the explanation
    leave them out alike (issue 54's "job" that `--explain` claimed and `--mode keyword` did
    not find)."""
    quoting = Memory(
        id="m",
        user_message="I'm training for the Berlin marathon",
        ai_response="You told me:\n- My sister moved to Lisbon for a job at a bakery",
        similarity=0.5,
        conversation_id=None,
        created_at=NOW,
        metadata={"recall": {"own": "You told me:"}},
    )
    why = reasons("what's my job?", quoting, passes=True, verdict=Verdict("hybrid", 0.5), now=NOW)
    assert why[0] == "It holds none of the message's words."
    whole = replace(quoting, metadata={})  # no own words recorded: the whole reply is its own
    why = reasons("what's my job?", whole, passes=True, verdict=Verdict("hybrid", 0.5), now=NOW)
    assert why[0] == 'It holds 1 of the message\'s 2 words: "job".'


def test_keyword_mode_has_no_threshold() -> None:
    why = reasons("Max", _memory(0.2), passes=True, verdict=Verdict("keyword", 0.5), now=NOW)
    assert "the threshold does not apply in keyword mode, so it is returned" in why[-1]


def test_the_gate_in_words() -> None:
    opened = reasons(
        "what is my dog called?",
        _memory(0.9, _raw(1.0, 1.0, 2.0)),
        passes=True,
        verdict=Verdict("hybrid", 0.5),
        now=NOW,
    )
    assert opened[3].startswith("The gate opened")
    assert "how many of the message's words the memories hold at all (+1.20)" in opened[3]
    assert "the message's words it holds (+1.50)" in opened[4]
    assert not any("bm25" in w or "coverage" in w for w in opened)  # no feature names
    asks_nothing = reasons(
        "thanks!",
        _memory(0.1, _raw(-2.0, 1.0, -2.0)),
        passes=False,
        verdict=Verdict("hybrid", 0.5),
        now=NOW,
    )
    assert "does not read as asking about something said before" in asks_nothing[3]
    assert asks_nothing[-1] == "Relevance 0.100 is under the threshold 0.5: it is kept out."
    unanswered = reasons(
        "what is my cat called?",
        _memory(0.1, _raw(-1.0, -1.0, 2.0)),
        passes=False,
        verdict=Verdict("hybrid", 0.5),
        now=NOW,
    )
    assert unanswered[3].startswith("The gate stayed shut: no memory looks like it answers")
    assert "how close the nearest memories are in meaning (-0.40)" in unanswered[3]


def test_ages_in_words() -> None:
    def age(delta: timedelta) -> str:
        memory = Memory("m", "x", "y", None, None, NOW - delta)
        why = reasons("x", memory, passes=True, verdict=Verdict("keyword", 0.5), now=NOW)
        return why[1]

    assert age(timedelta(minutes=5)).startswith("It was said less than an hour ago")
    assert age(timedelta(hours=1)).startswith("It was said 1 hour ago")
    assert age(timedelta(days=45)).startswith("It was said 45 days ago")
    assert age(timedelta(days=400)).startswith("It was said 13 months ago")
    assert age(timedelta(days=800)).startswith("It was said 2 years ago")


def test_raw_parts_keep_the_feature_names() -> None:
    lines = raw_lines(_raw(1.0, 1.0, 2.0), Verdict("hybrid", 0.5))
    assert lines[0].startswith("gate +1.00 (below +0.00: nothing passes 0.5)")
    assert lines[1].startswith("gate: coverage +1.20") and "ranker: bm25_qnorm +1.50" in lines[2]


def test_the_gate_line_and_the_verdict_read_the_same_threshold() -> None:
    """The gate's words used a literal 0.5: at threshold 0.3 a gate of -0.5 (best score 0.38)
    was "shut, nothing passes the threshold 0.5" beside "reaches the threshold 0.3"."""
    memory = _memory(0.38, _raw(-0.5, -0.5, 2.0))
    at_half = reasons(
        "what is my cat called?", memory, passes=False, verdict=Verdict("hybrid", 0.5), now=NOW
    )
    assert at_half[3].startswith("The gate stayed shut") and "threshold 0.5" in at_half[3]
    lower = reasons(
        "what is my cat called?", memory, passes=True, verdict=Verdict("hybrid", 0.3), now=NOW
    )
    assert lower[3].startswith("The gate opened")
    assert lower[-1] == "Relevance 0.380 reaches the threshold 0.3: it is returned."
    assert "nothing passes 0.3" in raw_lines(memory.explanation or {}, Verdict("hybrid", 0.3))[0]


def test_a_turn_the_intent_opened_says_so() -> None:
    """Decision 0039: a question about the user's life opens a turn's gate though no memory
    matches it in words; the sentence says that, not that some memory answers it."""
    memory = _memory(0.6, _raw(0.5, -0.8, 0.8))  # (match + 4 * intent + 1) / 5
    why = reasons(
        "which city am I in?", memory, passes=True, verdict=Verdict("hybrid", 0.5), now=NOW
    )
    assert why[3] == (
        "The gate opened: the message reads as asking about something said before (intent "
        "+0.80), so the best memories are handed over though none matches it closely "
        "(match -0.80)."
    )
    searched = reasons(
        "city",
        _memory(0.6, _raw(0.4, 0.4, -1.0)),
        passes=True,
        verdict=Verdict("hybrid", 0.5),
        now=NOW,
    )
    assert searched[3].startswith("The gate opened: some memory looks like it answers")
