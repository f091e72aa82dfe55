"""Provenance, slots and the post-step after ranking (issue 37), with no database."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from recall.memory import make_turn
from recall.search.provenance import (
    KEY,
    Provenance,
    near_duplicate,
    provenance_of,
    quotes,
    repeats_of,
    with_provenance,
)
from recall.search.restatements import arrange
from recall.search.slots import slots
from recall.search.verdict import Verdict

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def memory(text: str, reply: str = "ok") -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "user_message": text, "ai_response": reply}


def test_a_reply_quotes_a_source_it_restates() -> None:
    assert quotes("Since you're training for the Berlin marathon, rest.", "I'm training for the "
                  "Berlin marathon.", "Great!")  # fmt: skip
    assert not quotes("Here is a cake recipe.", "I'm training for the Berlin marathon.", "Great!")
    # a question's content is its answer
    assert quotes("You drive a Prius.", "What car do I drive?", "You drive a Toyota Prius.")


def test_a_question_answered_from_memory_restates_it() -> None:
    fact = memory("I drive a Toyota Prius.")
    other = memory("I live in Portland.")
    p = provenance_of("What car do I drive?", "You drive a Toyota Prius.", [fact, other])
    assert p is not None
    assert p.sources == (fact["id"], other["id"])
    assert p.quoted == (fact["id"],)
    assert p.is_restatement


def test_a_statement_with_news_is_not_a_restatement() -> None:
    fact = memory("I drive a Toyota Prius.")
    said = "I sold the Prius last week, I drive a Tesla now."
    p = provenance_of(said, "Oh, no more Prius! You drive a Tesla now.", [fact])
    assert p is not None and p.quoted == (fact["id"],)
    assert not p.is_restatement


def test_provenance_survives_its_json_form_and_ignores_junk() -> None:
    p = Provenance(sources=(str(uuid.uuid4()), str(uuid.uuid4())), restates=True)
    p = Provenance(p.sources, p.sources[:1], True)
    assert Provenance.from_dict(p.as_dict()) == p
    assert Provenance.of({KEY: p.as_dict(), "other": 1}) == p
    assert Provenance.from_dict({"sources": ["not-a-uuid"]}) is None
    assert Provenance.from_dict("text") is None
    assert Provenance.of({KEY: "mine"}) is None
    assert provenance_of("hi", "hello", []) is None
    assert provenance_of("hi", "hello", [{"id": "x"}]) is None


def test_provenance_is_metadata_outside_the_content_hash() -> None:
    turn = make_turn("u", "I drive a Prius.", "Nice.", metadata={"mine": 1})
    p = Provenance((str(uuid.uuid4()),))
    marked = with_provenance(turn, p)
    assert marked.metadata == {"mine": 1, KEY: p.as_dict()}
    assert marked.content_hash == turn.content_hash
    assert with_provenance(turn, None) is turn


def test_near_duplicates_are_word_for_word() -> None:
    text = "I drive a Toyota Prius.\nNice car!"
    assert near_duplicate(text, text)
    assert near_duplicate("i drive a toyota prius\nnice car", text)  # case, punctuation
    assert not near_duplicate("I drive a Toyota Prius.\nNice car, a hybrid!", text)  # a new word
    assert not near_duplicate("I do not drive a Toyota Prius.\nNice car!", text)
    assert not near_duplicate("Prius a Toyota drive I.\nNice car!", text)  # another order
    assert not near_duplicate("", text)
    # a word in another's place, though every word is in the stored text: a different turn
    said = "turn 1 of user 11: today I did some books\nNoted (3 memories)."
    assert not near_duplicate(
        "turn 11 of user 11: today I did some books\nNoted (3 memories).", said
    )
    kids = "my son is 5 and my daughter is 7 and we live in Leeds"
    assert not near_duplicate("my son is 7 and my daughter is 7 and we live in Leeds", kids)
    assert near_duplicate("my son is 5 and my daughter is 7 and we live in Leeds!", kids)


def test_repeats_are_read_from_metadata() -> None:
    assert repeats_of({KEY: {"repeats": 2}}) == 2
    assert repeats_of({KEY: {"repeats": "2"}}) == 0
    assert repeats_of({}) == 0
    assert repeats_of(None) == 0


def test_slots_name_what_a_statement_is_about() -> None:
    assert slots("I drive a Toyota Prius.") == {"i drive a"}
    assert "i drive a" in slots("I sold the Prius, I drive a Tesla now.")
    assert slots("I'm training for Berlin") == slots("I'm now training for a triathlon")
    assert slots("My favourite band is Radiohead") == slots("My favourite band is now Muse")
    assert slots("My dog is a beagle") == slots("my dog now is a greyhound")
    assert slots("I live in Boston") != slots("I live with my sister")
    # general verbs and descriptions name no slot
    assert slots("I have a dog") == frozenset()
    assert slots("I'm a nurse") == frozenset()
    assert slots("The weather is nice") == frozenset()


@dataclass
class Row:
    user_message: str
    ai_response: str = "ok"
    created_at: datetime = T0
    metadata: dict[str, Any] = field(default_factory=dict)
    id: uuid.UUID = field(default_factory=uuid.uuid4)


def restating(*sources: Row, at: int = 1, question: str = "What car do I drive?") -> Row:
    ids = tuple(str(s.id) for s in sources)
    p = Provenance(ids, ids, True)
    return Row(question, "You drive a Prius.", T0 + timedelta(hours=at), {KEY: p.as_dict()})


def run(
    query: str,
    rows: list[Row],
    scores: list[float],
    limit: int = 3,
    nearness: list[float] | None = None,
) -> list[Row]:
    order = sorted(range(len(rows)), key=lambda i: -scores[i])
    near = nearness or [0.5] * len(rows)
    picked = arrange(query, rows, order, scores, near, Verdict("hybrid", 0.5), limit)
    return [rows[i] for i, _s in picked]


def test_a_source_comes_before_its_restatements_and_takes_one_slot() -> None:
    fact = Row("I drive a Toyota Prius.")
    other = Row("I live in Portland.")
    r1, r2 = restating(fact, at=1), restating(fact, at=2)
    rows = [r1, r2, fact, other]
    # the restatements score highest; the source is below the threshold
    assert run("What car do I drive?", rows, [0.9, 0.8, 0.3, 0.6]) == [fact, other]


def test_a_restatement_gives_its_slot_to_the_source_the_query_is_about() -> None:
    car, home = Row("I drive a Toyota Prius."), Row("I live in Portland.")
    both = restating(home, car)
    assert run("Which car do I drive?", [both, car, home], [0.9, 0.2, 0.3])[0] is car


def test_a_restatement_without_its_source_keeps_its_slot_once() -> None:
    gone = Row("I drive a Toyota Prius.")
    r1, r2 = restating(gone, at=1), restating(gone, at=2)
    other = Row("I live in Portland.")
    assert run("What car do I drive?", [r1, r2, other], [0.9, 0.8, 0.7]) == [r1, other]


def test_the_newest_statement_on_a_slot_comes_first() -> None:
    old = Row("I drive a Toyota Prius.")
    restated = [restating(old, at=h) for h in (1, 2, 3)]
    new = Row("I sold the Prius, I drive a Tesla now.", created_at=T0 + timedelta(hours=5))
    rows = [*restated, old, new]
    found = run("What car do I drive?", rows, [0.9, 0.85, 0.8, 0.6, 0.2])
    assert found[:2] == [new, old]


def test_an_older_statement_never_jumps_a_newer_one() -> None:
    new = Row("I drive a Tesla.", created_at=T0 + timedelta(hours=5))
    old = Row("I drive a Toyota Prius.")
    assert run("What car do I drive?", [new, old], [0.9, 0.6]) == [new, old]


def test_without_provenance_the_order_is_the_rankers() -> None:
    rows = [Row("I like tea"), Row("What is tea?", "A drink."), Row("I have a cat")]
    assert run("tea", rows, [0.9, 0.7, 0.4]) == rows[:2]
    assert run("tea", rows, [0.9, 0.7, 0.6], limit=1) == rows[:1]


def test_only_a_slot_the_query_asks_about_puts_the_newer_first() -> None:
    old = Row("I'm looking for a gym near work, I drive a Prius.")
    new = Row("I'm looking for a recipe with lentils.", created_at=T0 + timedelta(hours=5))
    # "i looking for" is shared, but the question asks about driving, and the newer one is
    # farther from it
    near = [0.7, 0.5]
    assert run("What car do I drive?", [old, new], [0.9, 0.6], nearness=near) == [old, new]
    # a slot the question names: the newer one goes first if about as near (within 0.1)
    assert run("What am I looking for?", [old, new], [0.9, 0.6], nearness=[0.7, 0.65]) == [
        new,
        old,
    ]
    assert run("What am I looking for?", [old, new], [0.9, 0.6], nearness=near) == [old, new]
    # any shared slot: the newer one goes first when it is at least as near the query
    assert run("What car do I drive?", [old, new], [0.9, 0.6], nearness=[0.6, 0.6]) == [
        new,
        old,
    ]


def test_a_restatement_whose_source_on_the_subject_is_gone_keeps_its_slot() -> None:
    """Issue 37: provenance keeps the ids of erased memories. A restatement of two facts whose
    fact on the query's subject was erased does not hand its slot to the other fact."""
    car, home = Row("I drive a Toyota Prius."), Row("I live in Portland.")
    both = restating(home, car)  # its reply: "You drive a Prius."
    other = Row("I like tea")
    assert run("Which car do I drive?", [both, home, other], [0.9, 0.3, 0.6]) == [both, other]
    # both present: the source the query is about, as before
    assert run("Which car do I drive?", [both, home, car], [0.9, 0.3, 0.2])[0] is car
    # the source present is on the query's subject: it takes the slot
    assert run("Where do I live?", [restating(home, car), home], [0.9, 0.3])[0] is home


def test_a_newer_statement_that_says_something_changed_goes_first_when_about_as_near() -> None:
    """Decision 0039: "What race am I preparing for?" is nearer the older statement (by 0.05);
    the newer says that the plan changed, and goes first."""
    old = Row("I'm training for the Berlin marathon.")
    new = Row("I dropped the marathon plan, I'm training for a triathlon in Nice instead.",
              created_at=T0 + timedelta(hours=5))  # fmt: skip
    asked = "What race am I preparing for?"
    assert run(asked, [old, new], [0.9, 0.6], nearness=[0.58, 0.53]) == [new, old]
    # farther than the margin: the older keeps its place
    assert run(asked, [old, new], [0.9, 0.6], nearness=[0.7, 0.53]) == [old, new]
    # a newer statement on the slot that says nothing changed keeps the ranker's order
    plain = Row("I'm training for a triathlon in Nice.", created_at=T0 + timedelta(hours=5))
    assert run(asked, [old, plain], [0.9, 0.6], nearness=[0.58, 0.53]) == [old, plain]
