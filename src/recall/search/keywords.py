"""Keyword queries for PostgreSQL full-text search, safe from any user input.

The keyword-search node (VectorMemorySearch) takes keywords separated by `;` (at most 60, the
rest ignored) and ORs them. Each keyword is reduced to its word characters (`\\w+`), so no
full-text operator (`& | ! : * ( ) < - >`), quote or backslash from the user can reach the
query: the tsquery text is built only from quoted runs of word characters. A keyword of several
words is a phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MAX_KEYWORDS",
    "KeywordQuery",
    "keywords_from_text",
    "parse_keywords",
]

MAX_KEYWORDS = 60

_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script; not "_"
_MAX_WORDS_PER_KEYWORD = 16
_MAX_WORD_LENGTH = 100  # tsvector lexemes are at most 2047 bytes; real words are far shorter


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """Sanitized keywords: each a tuple of lowercase words."""

    keywords: tuple[tuple[str, ...], ...]

    @property
    def empty(self) -> bool:
        """No usable keyword (all were blank or punctuation)."""
        return not self.keywords

    @property
    def tsquery(self) -> str:
        """tsquery text: phrases of quoted words, ORed. Only word characters are quoted."""
        return " | ".join(
            "(" + " <-> ".join(f"'{w}'" for w in words) + ")" for words in self.keywords
        )

    @property
    def words(self) -> list[str]:
        """Every distinct word: BM25 scores each one's lexeme."""
        return list(dict.fromkeys(w for words in self.keywords for w in words))


def _words(segment: str) -> tuple[str, ...]:
    found = _WORD.findall(segment.lower())
    return tuple(w[:_MAX_WORD_LENGTH] for w in found[:_MAX_WORDS_PER_KEYWORD])


def parse_keywords(text: str) -> KeywordQuery:
    """Parse `;`-separated keywords: trimmed, sanitized, empty ones dropped, the
    first 60 kept."""
    keywords = [w for w in (_words(part) for part in text.split(";")) if w]
    return KeywordQuery(tuple(keywords[:MAX_KEYWORDS]))


def keywords_from_text(text: str) -> KeywordQuery:
    """A free-text query (a user's message) as keywords: every word is one, ORed (at most 60
    distinct words)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        seen.setdefault(word[:_MAX_WORD_LENGTH])
        if len(seen) >= MAX_KEYWORDS:
            break
    return KeywordQuery(tuple((w,) for w in seen))
