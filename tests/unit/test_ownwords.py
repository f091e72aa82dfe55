"""A reply's own words: the sentences that restate the memories it quotes removed (issue 45,
decision 0038), recorded with the provenance and embedded with the user text."""

from __future__ import annotations

import json
import uuid

import pytest

from recall.errors import InvalidInputError
from recall.memory import embedding_text, make_turn, own_words
from recall.search.ownwords import own_part, quotes_a_sentence, sentences, within
from recall.search.provenance import KEY, Provenance, provenance_of, with_provenance

ALLERGY = ("My daughter Mia is allergic to peanuts.", "Noted.")
VEGETARIAN = "We're going vegetarian this month."
QUOTING = "Remember that Mia is allergic to peanuts! Try a lentil curry or a chickpea stew."


def test_sentences_split_on_ends_and_lines() -> None:
    text = "First one. Second one!? Third\nfourth line...  \n\n fifth"
    assert sentences(text) == ["First one.", "Second one!?", "Third", "fourth line...", "fifth"]
    assert sentences("... !") == []


def test_the_sentence_that_quotes_a_source_is_removed() -> None:
    assert own_part(QUOTING, [ALLERGY]) == "Try a lentil curry or a chickpea stew."


def test_a_sentence_that_uses_a_fact_is_kept() -> None:
    # under half of its content words are the source's: it says something of its own
    reply = "Since Mia is allergic to peanuts, keep satay and peanut sauces off the menu."
    assert own_part(reply, [ALLERGY]) is None


def test_without_sources_or_quotes_the_reply_is_its_own() -> None:
    assert own_part(QUOTING, []) is None
    assert own_part("Try a lentil curry.", [ALLERGY]) is None
    assert own_part("Mia is allergic to peanuts.", [ALLERGY]) == ""  # all of it quoted


def test_each_source_is_judged_on_its_own() -> None:
    # half of the sentence's words are in the two sources together, under half in each
    reply = "Mia and Leo like skating in Oslo."
    sources = [("Mia likes skating.", "Noted."), ("Leo lives in Oslo.", "Noted.")]
    assert own_part(reply, sources) is None
    assert own_part(reply, [("Mia and Leo like skating.", "Noted.")]) == ""


def test_within_keeps_only_what_the_stored_reply_holds() -> None:
    stored = "Try a lentil curry. Or a stew."
    assert within("Try a lentil curry. Or a stew.", stored) is None  # every sentence: whole
    assert within("Or a stew.", stored) == "Or a stew."
    assert within("Or a st\x00ew. Then rice.", stored) == "Or a stew."  # cleaned, cut off
    assert within(None, stored) is None


def test_the_writer_records_the_own_part_with_the_provenance() -> None:
    fact = {"id": str(uuid.uuid4()), "user_message": ALLERGY[0], "ai_response": ALLERGY[1]}
    provenance = provenance_of(VEGETARIAN, QUOTING, [fact])
    assert provenance is not None and provenance.quoted == (fact["id"],)
    assert provenance.own == "Try a lentil curry or a chickpea stew."
    assert Provenance.from_dict(json.loads(json.dumps(provenance.as_dict()))) == provenance

    turn = with_provenance(make_turn("u", VEGETARIAN, QUOTING), provenance)
    assert turn.ai_response == QUOTING  # what callers are shown is unchanged
    assert turn.metadata[KEY]["own"] == "Try a lentil curry or a chickpea stew."
    assert json.loads(turn.metadata_json) == turn.metadata
    assert turn.text == f"{VEGETARIAN}\nTry a lentil curry or a chickpea stew."


def test_a_reply_that_quotes_but_keeps_every_sentence_records_null() -> None:
    fact = {"id": str(uuid.uuid4()), "user_message": ALLERGY[0], "ai_response": ALLERGY[1]}
    reply = "Noted: Mia, allergic to peanuts, so satay and peanut sauce are off the menu."
    provenance = provenance_of(VEGETARIAN, reply, [fact])
    assert provenance is not None and provenance.quoted and provenance.own is None
    turn = with_provenance(make_turn("u", VEGETARIAN, reply), provenance)
    assert KEY in turn.metadata and turn.metadata[KEY]["own"] is None  # judged: the whole reply
    assert turn.text == embedding_text(VEGETARIAN, reply)


def test_a_reply_that_quotes_nothing_records_no_own_part() -> None:
    fact = {"id": str(uuid.uuid4()), "user_message": ALLERGY[0], "ai_response": ALLERGY[1]}
    provenance = provenance_of(VEGETARIAN, "Try a lentil curry.", [fact])
    assert provenance is not None and provenance.quoted == ()
    assert "own" not in provenance.as_dict()


def test_provenance_written_before_own_words_is_not_judged() -> None:
    ids = [str(uuid.uuid4())]
    older = Provenance.from_dict({"sources": ids, "quoted": ids, "restates": False})
    assert older is not None and not older.own_judged and "own" not in older.as_dict()


def test_only_a_string_is_an_own_part() -> None:
    # as the full-text trigger reads it (migration 0024)
    assert own_words({KEY: {"own": "Try a curry."}}) == "Try a curry."
    assert own_words({KEY: {"own": ""}}) == ""
    for metadata in ({}, None, {KEY: {"own": None}}, {KEY: {"own": 3}}, {KEY: "own"}):
        assert own_words(metadata) is None
    assert embedding_text("Hi", "Whole reply.", None) == "Hi\nWhole reply."
    assert embedding_text("Hi", "Whole reply.", "") == "Hi\n"


def test_the_librarys_entry_does_not_count_against_the_callers_metadata_limit() -> None:
    # a memory `recall export` wrote, with the caller's metadata at its limit and the reply's
    # own part recorded beside it, imports again (recall.memory.make_turn, as `recall import`)
    ids = [str(uuid.uuid4())]
    caller = {"note": "x" * 90}
    limit = len(json.dumps(caller))  # 102: the caller's metadata is at the limit
    library = {"sources": ids, "quoted": ids, "restates": False, "own": "y" * 200}
    turn = make_turn(
        "u", "hi", "y" * 200, metadata={**caller, KEY: library}, max_metadata_bytes=limit
    )
    assert turn.metadata[KEY]["own"] == "y" * 200
    with pytest.raises(InvalidInputError, match=f"metadata is {limit + 1} bytes"):
        make_turn(
            "u", "hi", "ok", metadata={"note": "x" * 91, KEY: library}, max_metadata_bytes=limit
        )
    with pytest.raises(InvalidInputError, match="'recall' entry"):
        make_turn(
            "u",
            "hi",
            "ok",
            metadata={KEY: {"own": "z" * 9000}},
            max_metadata_bytes=10,
            max_length=10,
        )


# A question turn whose answer quoted three other memories: an agent handed it restates only
# the answer's first line, a small share of the whole source.
LONG_SOURCE = (
    "What does my partner do for a living?",
    "Your partner Sam is a firefighter. You support Celtic in the Scottish league. "
    "You ride a red Vespa scooter to work. You live in Portland, Oregon.",
)


def test_a_reply_that_restates_one_line_of_a_long_memory_quotes_it() -> None:
    reply = "Your partner Sam is a firefighter."
    retrieved = [{"id": str(uuid.uuid4()), "user_message": LONG_SOURCE[0],
                  "ai_response": LONG_SOURCE[1]}]  # fmt: skip
    assert quotes_a_sentence(reply, *LONG_SOURCE)
    provenance = provenance_of("When is Sam's birthday?", reply, retrieved)
    assert provenance is not None and provenance.quoted == (retrieved[0]["id"],)
    assert provenance.own == ""  # nothing of its own: the turn only asks


def test_a_sentence_sharing_one_word_with_a_memory_quotes_nothing() -> None:
    assert not quotes_a_sentence("Have fun in Portland!", *LONG_SOURCE)
    assert not quotes_a_sentence("", *LONG_SOURCE)
    assert quotes_a_sentence("Have fun in Portland, Oregon!", *LONG_SOURCE)
