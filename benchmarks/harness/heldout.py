"""The held-out data under benchmarks/data (issue 29), which no one tunes to: small talk and
generic requests that no memory answers, and a new user's paraphrase probe (12 facts told in
one thread, asked about in another with no content word in common). Also the check that a
question shares no content word with its fact: a stop-word list and crude suffix stripping."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .report import ROOT

DATA = ROOT / "benchmarks" / "data"
SMALL_TALK = DATA / "small_talk.json"
PARAPHRASE_PROBE = DATA / "paraphrase_probe.json"

# Function words, pronouns, auxiliaries and a few adverbs that carry no topic: what remains of a
# text after them (nouns, verbs, adjectives) is what a keyword search could match on.
_STOP = """a about above after again against all am an and any are as at be because been before
    being below between both but by can cannot could d did do does doing don done down during
    each else few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just ll lol m me more most my myself no nor not now of off
    ok on once only or other our ours ourselves out over own re s same she should so some such
    t than that the their theirs them themselves then there these they this those through to
    too under until up ve very was we were what when where which while who whom why will with
    would you your yours yourself yourselves"""
STOP_WORDS = frozenset(_STOP.split())
SUFFIXES = ("ing", "ed", "es", "s", "ly", "er", "est")  # longest first where one ends another


def stem(word: str) -> str:
    """A crude stem: one suffix of `SUFFIXES` off (when 3 letters stay), a doubled last
    consonant undone ("runn" -> "run"), a final "e" dropped and "y" made "i", so that "live",
    "lived" and "living" meet, as do "city" and "cities"."""
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word.endswith("y"):
        word = word[:-1] + "i"
    return word


def same_line(text: str) -> str:
    """A line as compared for copies between data files: lower-cased, its words and numbers
    only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.casefold()))


def content_words(text: str) -> set[str]:
    """The stems of `text`'s words that are not stop words (lower-cased, letters only, split at
    apostrophes: "can't" is "can" and "t")."""
    return {stem(w) for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP_WORDS}


def shared_content_words(a: str, b: str) -> set[str]:
    """The content words two texts share: equal stems, or one stem the start of the other when
    the shorter has 4 letters or more ("child" and "childhood")."""
    wa, wb = content_words(a), content_words(b)
    return {
        x if len(x) <= len(y) else y
        for x in wa
        for y in wb
        if x == y or (min(len(x), len(y)) >= 4 and (x.startswith(y) or y.startswith(x)))
    }


@dataclass(frozen=True, slots=True)
class Turn:
    """A turn of the probe's thread: the user's message, the reply, and the fact it tells (an
    index into the facts; None for a greeting or other filler)."""

    user: str
    assistant: str
    fact: int | None


@dataclass(frozen=True, slots=True)
class Probe:
    """The paraphrase probe: the thread that tells the facts, and (question, fact) pairs."""

    thread: list[Turn]
    questions: list[tuple[str, int]]

    def fact_turn(self, fact: int) -> Turn:
        """The turn that tells fact number `fact`."""
        return next(t for t in self.thread if t.fact == fact)


def small_talk(path: Path = SMALL_TALK) -> list[str]:
    """The small-talk lines, in the file's order."""
    return [line["text"] for line in json.loads(path.read_text())["lines"]]


def paraphrase_probe(path: Path = PARAPHRASE_PROBE) -> Probe:
    """The paraphrase probe from its file."""
    raw = json.loads(path.read_text())
    thread = [Turn(t["user"], t["assistant"], t["fact"]) for t in raw["thread"]]
    return Probe(thread, [(q["text"], q["fact"]) for q in raw["questions"]])
