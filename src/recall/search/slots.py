"""Slots: what a first-person statement says something about ("i drive a", "i live in",
"my favourite band is"), so that a later statement on the same slot can be told apart from
an older one it replaces (issue 37, decision 0029).

No model and no list of subjects: a slot is the words of a clause from "I" or "my" up to the
first word of what is said, read by a few rules of English word order. "I sold the Prius, I
drive a Tesla now" has the slots "i sold the" and "i drive a"; "I drive a Prius" has "i drive
a", so the two share a slot. Verbs that say little on their own ("have", "think", "went")
make no slot: "I have a dog" and "I have a meeting" are not one fact changing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from recall.search.echo import WORD

__all__ = ["CHANGE", "slots"]

_CLAUSE = re.compile(r"[.;:!?,\n]+|\s(?:and|but|so|because|though)\s")
_CONTRACTIONS = {
    "i'm": ("i", "am"),
    "i've": ("i", "have"),
    "i'd": ("i", "would"),
    "i'll": ("i", "will"),
}


CHANGE = re.compile(
    r"\b(now|nowadays|these days|any ?more|no longer|not any longer|instead|switched|stopped|"
    r"quit|gave up|given up|sold|moved|dropped|finished|changed|gone off|went off|used to|"
    r"cancell?ed|traded|swapped|replaced|handed in|got rid of|no more|not any ?more)\b",
    re.IGNORECASE,
)
"""Words by which a statement says that something changed: a newer statement on a slot that
holds one goes first within `recall.search.restatements.NEAR_MARGIN` whatever the query names
("What race am I preparing for?" after "I'm training for the Berlin marathon." and "I dropped
the marathon plan, I'm training for a triathlon in Nice instead.": the older is nearer the
question by 0.05)."""


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# words between "I" and its verb that do not change which slot is meant
_SKIP = _set(
    "am now still also currently actually really just recently finally usually mostly "
    "already even no longer not don't do does never always ve been"
)
# verbs too general to name a slot, and auxiliaries that would stand for one
_GENERAL = _set(
    "have had has think thought want wanted need needed know knew feel felt guess mean meant "
    "hope got get getting said say see saw was were will would can could should might may must "
    "did told tell asked ask tried try went go going gonna wanna came come like love "
    "a an the my some this that"
)
# words that continue a slot after its verb (a preposition or an article)
_JOINS = _set("a an the in at for to on with from as of into by my")
_COPULA = frozenset(["is", "are", "was"])
_MY_SPAN = 4  # "my <up to 4 words> is"


def _words(clause: str) -> list[str]:
    out: list[str] = []
    for w in WORD.findall(clause.lower().replace("\u2019", "'")):
        if w in _CONTRACTIONS:
            out.extend(_CONTRACTIONS[w])
        else:
            out.append(w)
    return out


def _clause_slots(words: list[str]) -> list[str]:
    found: list[str] = []
    for at, word in enumerate(words):
        if word == "i":
            rest = [w for w in words[at + 1 : at + 6] if w not in _SKIP]
            if not rest or rest[0] in _GENERAL or rest[0] in _JOINS:
                continue
            verb = rest[0]
            join = rest[1] if len(rest) > 1 and rest[1] in _JOINS else None
            found.append(f"i {verb} {join}" if join else f"i {verb}")
        elif word == "my":
            span = [w for w in words[at + 1 : at + 3 + _MY_SPAN] if w not in _SKIP]
            for k, w in enumerate(span):
                if w in _COPULA:
                    if k > 0:
                        found.append(" ".join(["my", *span[:k], "is"]))
                    break
    return found


@lru_cache(maxsize=4096)
def slots(text: str) -> frozenset[str]:
    """The slots of the first-person statements in `text` (empty when it makes none)."""
    out: set[str] = set()
    for clause in _CLAUSE.split(text):
        out.update(_clause_slots(_words(clause)))
    return frozenset(out)
