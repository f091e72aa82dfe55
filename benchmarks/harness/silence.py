"""Messages that none of a user's memories answers, asked to measure silence (issue 29): what
`store.search` returns at its defaults should be nothing.

- silence-other: each conversation as one user (the full regime's users), asked every
  question of the other conversations with their two speakers renamed as this conversation's
  two (speaker_a as speaker_a, speaker_b as speaker_b), so that no name gives them away;
- small-talk: each line of benchmarks/data/small_talk.json asked of every full-regime user;
- silence-small: the same renamed questions asked of small-regime users (short histories),
  a sample of (user, question) pairs drawn with a fixed seed.

And the threshold sweep: what a search returns at each threshold, cut from one search at
threshold 0 (`passing`), checked against the real call at the default (`sweep_mismatches`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from recall.memory import Memory

from .corpus import Corpus
from .regimes import SEED, Regime

SILENCES = {"silence-other": "full", "small-talk": "full", "silence-small": "small"}
"""each silence regime and the regime whose users (and memories) it asks"""
SMALL_SAMPLE = 400  # (small user, other conversation's question) pairs of silence-small
# Thresholds of the sweep. One search at threshold 0 (the defaults otherwise) gives each result's
# `Memory.score`; a result passes threshold t when its score >= t. That is the store's own
# filter: in hybrid mode (the default) recall/store/search.py keeps the fused memories whose score
# (`Memory.score`, the calibrated relevance) is >= the threshold, best first, then cuts to the
# limit, so cutting the threshold-0 top 3 gives the same list; in semantic mode the threshold is
# a cosine floor and `Memory.score` the cosine, the same again; keyword mode has no threshold.
# `sweep_mismatches` checks it at the default threshold on every run, against the real call.
SWEEP = tuple(round(0.1 * i, 1) for i in range(1, 10))


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A message asked of `user` that none of its memories answers; `source` says where it
    comes from (the question's conversation, or "small talk")."""

    user: str
    text: str
    source: str


@dataclass(frozen=True)
class Silence:
    """A silence regime: the regime whose users it asks (`holder`), and its messages."""

    name: str
    holder: str
    asks: list[Unanswered]


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` and `b` differ by exactly one letter inserted, deleted or replaced."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def name_forms(speakers: Sequence[str], questions: Sequence[str]) -> dict[str, int]:
    """The forms in which `questions` name their conversation's speakers: each speaker's name,
    and each capitalised word of the questions that is a start of it (2 letters or more:
    "Mel" for Melanie) or one letter from it (3 letters or more: "John" for Jon, "Johns's"),
    mapped to the speaker's position in `speakers`. A form that fits both is left out."""
    forms = {name: i for i, name in enumerate(speakers)}
    words = {w for q in questions for w in re.findall(r"\b[A-Z][a-z]+\b", q)} - set(forms)
    for word in sorted(words):
        fits = {
            i
            for i, name in enumerate(speakers)
            if (len(word) >= 2 and name.startswith(word))
            or (len(word) >= 3 and _one_edit(word, name))
        }
        if len(fits) == 1:
            forms[word] = fits.pop()
    return forms


def rename(text: str, names: Mapping[str, str]) -> str:
    """`text` with each whole word that is a key of `names` replaced by its value, in one
    pass (so swapped names do not chain); a possessive's "'s" stays."""
    if not names:
        return text
    pattern = re.compile(
        r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b"
    )
    return pattern.sub(lambda m: names[m.group(1)], text)


def renamings(corpus: Corpus) -> dict[tuple[str, str], dict[str, str]]:
    """For each (source conversation, target conversation) of different conversations, the
    renaming that names the source's speakers (in every form its questions use) as the
    target's: speaker_a as speaker_a, speaker_b as speaker_b."""
    questions: dict[str, list[str]] = {}
    for conv, text, *_rest in corpus.questions:
        questions.setdefault(conv, []).append(text)
    forms = {c: name_forms(corpus.speakers[c], questions.get(c, [])) for c in corpus.speakers}
    return {
        (source, target): {form: corpus.speakers[target][i] for form, i in forms[source].items()}
        for source in corpus.speakers
        for target in corpus.speakers
        if source != target
    }


def conversation_of(corpus: Corpus, regime: Regime) -> dict[str, str]:
    """Each user of `regime` and the conversation its memories come from."""
    return {
        item.user: corpus.turns[item.pair]["user_id"]
        for item in regime.items
        if item.pair is not None
    }


def other_conversations(corpus: Corpus, users: Mapping[str, str]) -> list[Unanswered]:
    """Every question of the other conversations asked of each user (user -> its
    conversation), renamed as the user's conversation."""
    names = renamings(corpus)
    return [
        Unanswered(user, rename(text, names[(source, conv)]), source)
        for user, conv in sorted(users.items())
        for source, text, *_rest in corpus.questions
        if source != conv
    ]


def sampled_others(
    corpus: Corpus, users: Mapping[str, str], count: int = SMALL_SAMPLE, seed: int = SEED
) -> list[Unanswered]:
    """`count` (user, question of another conversation) pairs drawn by an RNG seeded with
    `seed`, each question renamed as the user's conversation."""
    names = renamings(corpus)
    rng = random.Random(f"{seed}:silence-small")
    order = sorted(users)
    out = []
    for _ in range(count):
        user = rng.choice(order)
        others = [q for q in corpus.questions if q[0] != users[user]]
        if not others:
            break
        source, text, *_rest = rng.choice(others)
        out.append(Unanswered(user, rename(text, names[(source, users[user])]), source))
    return out


def small_talk_asks(users: Sequence[str], lines: Sequence[str]) -> list[Unanswered]:
    """Each line asked of each user."""
    return [Unanswered(user, line, "small talk") for user in sorted(users) for line in lines]


def silence(name: str, corpus: Corpus, holder: Regime, lines: Sequence[str]) -> Silence:
    """Silence regime `name` (a key of `SILENCES`) asking the users of `holder` (the regime
    `SILENCES` names for it, built from `corpus`)."""
    users = conversation_of(corpus, holder)
    if name == "silence-other":
        asks = other_conversations(corpus, users)
    elif name == "small-talk":
        asks = small_talk_asks(list(users), lines)
    elif name == "silence-small":
        asks = sampled_others(corpus, users)
    else:
        raise ValueError(f"no silence regime {name!r}: one of {', '.join(SILENCES)}")
    return Silence(name, holder.name, asks)


def passing(found: list[Memory], threshold: float) -> list[Memory]:
    """The results a search at `threshold` returns, from the same search at threshold 0."""
    return [m for m in found if m.score is not None and m.score >= threshold]


def sweep_mismatches(
    default: list[list[Memory]], sweep: list[list[Memory]], threshold: float
) -> int:
    """How many searches at the defaults differ from their threshold-0 search cut at the
    default threshold (0 when the sweep measures what the threshold does)."""
    return sum(
        [m.id for m in d] != [m.id for m in passing(s, threshold)]
        for d, s in zip(default, sweep, strict=True)
    )
