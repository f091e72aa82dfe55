"""What a stored turn holds, judged once when it is written (issue 54, decision 0049).

A turn either holds something to remember, or it holds nothing a search should answer with:

- `QUESTION`: its user text asks something and the reply said nothing new (`echo.is_unanswered`);
- `SMALL_TALK`: greetings, thanks and farewells on both sides (`echo.is_small_talk`);
- `RESTATEMENT`: its reply only quotes memories it was handed and the user added nothing of
  their own (`provenance.Provenance.is_restatement`, with no own words beyond the user's);
- `STATEMENT`: anything else.

The judgement depends only on the turn (its texts, its reply's own words and its provenance),
so it is made once, when the turn is written (`judged`), and stored in the turn's metadata
under "recall" with the version of the rule that made it (`RULE`). A trigger copies it into
the columns `holds`, `judged` and `supersedes` (migration 0027), which the searches' SQL
reads: a search leaves out, before it ranks, every turn that holds nothing. Rows written before
this rule (or by an older one) are judged again in the background (`recall.db.judge_stored`); until
then the read path judges them itself (`holds_nothing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recall.memory import LIBRARY_KEY, own_words
from recall.search.echo import is_small_talk, is_unanswered, terms
from recall.search.provenance import Provenance

__all__ = [
    "HOLDS",
    "QUESTION",
    "RESTATEMENT",
    "RULE",
    "SMALL_TALK",
    "STATEMENT",
    "holds",
    "holds_nothing",
    "judged",
    "judgement",
]

RULE = 2
"""The version of the rules a turn is judged by (its own words, what it holds, what it
updates). A change to any of them that would judge a stored turn differently raises it, and
the stored turns are judged again (`recall.db.judge_stored`)."""
STATEMENT = "statement"
QUESTION = "question"
SMALL_TALK = "small_talk"
RESTATEMENT = "restatement"
HOLDS = (STATEMENT, QUESTION, SMALL_TALK, RESTATEMENT)
"""What a turn can hold; migration 0027's trigger accepts only these."""


def holds(
    user_message: str, ai_response: str, own: str | None, provenance: Provenance | None
) -> str:
    """What a turn holds (module docstring): small talk, an unanswered question, a restatement
    or a statement, its reply judged by its own words (`own`, None: the whole reply)."""
    if is_small_talk(user_message, ai_response, own):
        return SMALL_TALK
    if is_unanswered(user_message, ai_response, own):
        return QUESTION
    if (
        provenance is not None
        and provenance.is_restatement
        and _nothing_own(user_message, own, provenance)
    ):
        return RESTATEMENT
    return STATEMENT


def _nothing_own(user_message: str, own: str | None, provenance: Provenance) -> bool:
    """Whether a restatement's reply adds nothing of its own: its own part (judged when it was
    written) has no content word the user's text lacks. A reply never judged for its own part
    (provenance written by hand, or before decision 0038) is taken as its quotes."""
    if not provenance.own_judged:
        return True
    return own is not None and not (terms(own) - terms(user_message))


def judgement(metadata: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """The stored judgement of a memory, (holds, rule), from its metadata; None when it has
    none (stored before migration 0027, or by hand)."""
    recorded = (metadata or {}).get(LIBRARY_KEY)
    if not isinstance(recorded, Mapping):
        return None
    held, rule = recorded.get("holds"), recorded.get("rule")
    if held not in HOLDS or not isinstance(rule, int):
        return None
    return held, rule


def judged(
    metadata: Mapping[str, Any], user_message: str, ai_response: str, kind: str
) -> dict[str, Any]:
    """`metadata` with the turn's judgement under "recall": "holds" and "rule" (by `RULE`).
    A memory that is not a turn (a note, a summary) holds a statement. What the caller put
    under "recall" that is not an object is replaced: the key is the library's."""
    recorded = metadata.get(LIBRARY_KEY)
    entry = dict(recorded) if isinstance(recorded, Mapping) else {}
    if kind == "turn":
        provenance = Provenance.of(metadata)
        entry["holds"] = holds(user_message, ai_response, own_words(metadata), provenance)
    else:
        entry["holds"] = STATEMENT
    entry["rule"] = RULE
    return {**metadata, LIBRARY_KEY: entry}


def holds_nothing(
    user_message: str, ai_response: str, metadata: Mapping[str, Any] | None, kind: str = "turn"
) -> bool:
    """Whether a memory holds nothing a search should answer with: by its stored judgement, or,
    for a memory not judged yet by this rule, judged now (the searches' SQL already leaves out
    the judged ones that hold nothing). A memory that is not a turn holds a statement."""
    if kind != "turn":
        return False
    stored = judgement(metadata)
    if stored is not None and stored[1] >= RULE:
        return stored[0] != STATEMENT
    provenance = Provenance.of(metadata)
    return holds(user_message, ai_response, own_words(metadata), provenance) != STATEMENT
