"""A reply's own words: the reply less the sentences that restate the memories it quotes
(issue 45, decision 0038).

An agent that is handed memories quotes them in its reply ("Since your daughter Mia is
allergic to peanuts, ..."), and a stored turn embedded and indexed with its whole reply looks
like every memory it quoted: a search for the quoted fact finds the turn that repeated it as
well as, or before, the turn that said it. What a stored turn is embedded and indexed by is
its user text and its reply's own part; the texts shown are unchanged.

A reply sentence is a quote when at least `QUOTE_SHARE` of its content words
(`recall.search.echo.terms`) are among the content words of one quoted source (its user text
and its reply). Sentences are split simply, after ".", "!", "?" and at line ends: none of the
package's dependencies splits sentences, and a missed split only keeps a sentence whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from recall.search.echo import is_acknowledgement, terms

__all__ = [
    "LEAD_IN",
    "QUOTE_SHARE",
    "SENTENCE_QUOTE_WORDS",
    "own_part",
    "quotes_a_sentence",
    "sentences",
    "within",
]

QUOTE_SHARE = 0.5
"""A reply quotes a source when it holds at least this share of the source's content words
(`recall.search.provenance.quotes`); a sentence is a quote when at least this share of its
own content words are the source's."""
SENTENCE_QUOTE_WORDS = 2
"""A sentence of a reply makes its source quoted (`quotes_a_sentence`) when it shares at least
this many content words with the source, as well as `QUOTE_SHARE` of its own: "Have fun in
Berlin!" quotes nothing."""
LEAD_IN = frozenset(
    {
        "told", "said", "mentioned", "shared", "remember", "recall", "know", "knew", "noted",
        "note", "earlier", "before", "previously", "memory", "memories", "here's", "what's",
        "based", "according",
    }
)  # fmt: skip
"""Words of a sentence that only leads in to the quotes ("You told me:", "From what you've
shared before:"): with no other content word, and in a reply that quotes, it is not the
reply's own (issue 54: "You told me:" alone moved a turn's vector toward every question)."""
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_WORDLIKE = re.compile(r"\w")


def sentences(text: str) -> list[str]:
    """`text`'s sentences, stripped: split after ".", "!" and "?" (a run of them ends one
    sentence) and at line ends; text with no letter or digit between two ends is no sentence."""
    return [s for m in _SENTENCE.finditer(text) if _WORDLIKE.search(s := m.group(0).strip())]


def _is_quote(sentence: str, sources: list[frozenset[str]], least: int = 1) -> bool:
    """Whether at least `QUOTE_SHARE` of the sentence's content words, and at least `least` of
    them, are those of one of `sources`."""
    words = terms(sentence)
    need = max(least, QUOTE_SHARE * len(words))
    return bool(words) and any(len(words & s) >= need for s in sources)


def quotes_a_sentence(reply: str, source_user: str, source_reply: str) -> bool:
    """Whether a sentence of `reply` is a quote of the source memory (its user text and its
    reply): at least `QUOTE_SHARE` of the sentence's content words, and at least
    `SENTENCE_QUOTE_WORDS` of them, are the source's. An agent often restates one line of a
    long memory (the first sentence of an answer that quoted three others): the reply then
    holds little of the whole source, and that line is still not its own (issue 45)."""
    known = [terms(source_user) | terms(source_reply)]
    return any(_is_quote(s, known, SENTENCE_QUOTE_WORDS) for s in sentences(reply))


def own_part(reply: str, sources: Iterable[tuple[str, str]]) -> str | None:
    """The reply with its sentences that quote one of `sources` removed, the others joined by
    a space; None when none is removed (the whole reply is its own: always so when `sources`
    is empty). When one is, a sentence that only leads in to the quotes or acknowledges goes
    too ("You told me:", `LEAD_IN`). An empty string when nothing else is left.

    Args:
        reply: the AI's reply.
        sources: the (user text, reply) of each memory the reply quotes.
    """
    known = [terms(user) | terms(answer) for user, answer in sources]
    if not known:
        return None
    parts = sentences(reply)
    kept = [s for s in parts if not _is_quote(s, known)]
    if len(kept) == len(parts):
        return None
    return " ".join(s for s in kept if not _leads_in(s))


def _leads_in(sentence: str) -> bool:
    """Whether a sentence of a reply that quotes only leads in to the quotes (`LEAD_IN`) or
    acknowledges ("Noted.")."""
    return is_acknowledgement(sentence) or terms(sentence) <= LEAD_IN


def within(own: str | None, reply: str) -> str | None:
    """`own` (an `own_part` of a reply before it was stored) made to hold only what the stored
    `reply` holds: cleaned as `recall.memory.clean_text` cleans (NUL removed, lone surrogates
    replaced), and its sentences that the stored reply lacks (cut off by the length limit) left
    out. None when it is None or keeps every sentence of the reply."""
    if own is None:
        return None
    cleaned = _SURROGATE.sub("\ufffd", own.replace("\x00", ""))
    kept = [s for s in sentences(cleaned) if s in reply]
    return None if len(kept) == len(sentences(reply)) else " ".join(kept)
