import re

from hypothesis import given
from hypothesis import strategies as st

from recall.nodes.keyword import NO_DISCUSSION_MESSAGE, NO_RESULTS_MESSAGE, RESULT_SEPARATOR
from recall.search.keywords import MAX_KEYWORDS, keywords_from_text, parse_keywords

# the only characters a tsquery built from keywords may contain besides letters and digits
_SAFE = re.compile(r"^[\w ()'|<\->]*$")


def test_the_seed_strings_exactly() -> None:
    assert NO_DISCUSSION_MESSAGE == "Cannot perform VectorMemorySearch without a discussionId."
    assert NO_RESULTS_MESSAGE == (
        "No relevant memories found in the vector database for the given keywords."
    )
    assert RESULT_SEPARATOR == "\n\n---\n\n"


def test_split_on_semicolons_trimmed_or_logic_phrases() -> None:
    q = parse_keywords("  dog ;vet appointment;; Max  ")
    assert q.keywords == (("dog",), ("vet", "appointment"), ("max",))
    assert q.tsquery == "('dog') | ('vet' <-> 'appointment') | ('max')"


def test_at_most_60_keywords_the_rest_ignored() -> None:
    q = parse_keywords(";".join(f"word{i}" for i in range(100)))
    assert len(q.keywords) == MAX_KEYWORDS
    assert q.keywords[-1] == ("word59",)


def test_empty_segments_do_not_count_toward_the_limit() -> None:
    q = parse_keywords(";" * 500 + "last")
    assert q.keywords == (("last",),)


def test_hostile_syntax_is_reduced_to_words() -> None:
    for hostile in ["&|!:*()'\"\\", "a <-> b", "x:*", "!!!", "'; DROP TABLE recall.memories; --"]:
        q = parse_keywords(hostile)
        assert _SAFE.match(q.tsquery), q.tsquery
    assert parse_keywords("&|!:*()'\"\\").empty
    assert parse_keywords("a <-> b").keywords == (("a", "b"),)
    assert parse_keywords("x:*").keywords == (("x",),)


@given(st.text())
def test_any_input_gives_a_safe_tsquery(text: str) -> None:
    for q in (parse_keywords(text), keywords_from_text(text)):
        assert _SAFE.match(q.tsquery)
        assert "''" not in q.tsquery  # no empty or escaped quote can appear
        assert len(q.keywords) <= MAX_KEYWORDS
        for words in q.keywords:
            assert all(w and w.isalnum() for w in words)


def test_free_text_is_one_keyword_per_distinct_word() -> None:
    q = keywords_from_text("What is my dog's name? My DOG!")
    assert q.keywords == (("what",), ("is",), ("my",), ("dog",), ("s",), ("name",))
    assert q.words == ["what", "is", "my", "dog", "s", "name"]
