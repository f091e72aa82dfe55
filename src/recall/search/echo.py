"""Echoes: a stored turn that is only an earlier asking of the same question, left unanswered.

Every question a user asks is stored as a turn with whatever the reply was. Asked again, that
turn is the closest text there is, by meaning and by keywords, and it outranks the memory that
answers it (LoCoMo's repeated-question regime: first 100% of the time; docs/research/issue-20).
Such a turn carries no information, so searches drop it before ranking. A turn is an echo of a
query when its user text is a question, its reply says nothing new (a "not sure" answer, or no
word the question did not have), and its words overlap the query's by at least half.
"""

from __future__ import annotations

import re

__all__ = ["is_echo", "is_question", "terms"]

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_QUESTION_WORDS = frozenset(
    [
        "what",
        "when",
        "where",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "which",
        "did",
        "does",
        "do",
        "is",
        "are",
        "was",
        "were",
        "would",
        "could",
        "can",
        "will",
        "should",
        "has",
        "have",
        "had",
        "may",
        "might",
        "shall",
    ]
)
_UNINFORMATIVE = re.compile(
    r"^\W*(i'?m not (sure|certain)|i am not (sure|certain)|not sure|i don'?t know|i do not know|"
    r"no idea|i have no (idea|information)|i can'?t (say|tell|remember)|"
    r"i cannot (say|tell|remember)|"
    r"sorry,? i don'?t (know|have|remember))\b",
    re.IGNORECASE,
)
# function words that say nothing about what a text is about (a short English list: the
# overlap is on content words; PostgreSQL's own list is not reachable from here, floor 1)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "about",
        "from",
        "as",
        "into",
        "over",
        "after",
        "before",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "when",
        "where",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "which",
        "not",
        "no",
        "so",
        "than",
        "then",
        "too",
        "very",
        "can",
        "could",
        "will",
        "would",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "just",
        "also",
        "any",
        "some",
        "all",
    ]
)


def terms(text: str) -> frozenset[str]:
    """A text's content words, lower-cased."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def is_question(text: str) -> bool:
    """Whether `text` asks something: it ends with "?" or starts with a question word."""
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first = _WORD.match(stripped.lower())
    return first is not None and first.group(0) in _QUESTION_WORDS


def is_echo(query: str, user_message: str, ai_response: str) -> bool:
    """Whether the stored turn (`user_message`, `ai_response`) is `query` asked before and
    left unanswered."""
    if not is_question(user_message):
        return False
    asked, said = terms(query), terms(user_message)
    if not asked or not said:
        return False
    uninformative = bool(_UNINFORMATIVE.search(ai_response)) or not (terms(ai_response) - said)
    return uninformative and len(asked & said) / len(asked | said) >= 0.5
