"""Issue 45's fact users (benchmarks/data/fact_users.json): sixteen new users, each a distinct
persona, who tell 30 facts about themselves in one thread (a user message and the agent's reply
a turn, some replies restating the fact as agents do), mixed with 15 turns of small talk and
generic requests. Later, in another thread, each asks about every fact in other words (a
question shares no content word with the turn that told the fact, message or reply), asks 10
questions about themselves on topics they never mentioned, and sends 10 small-talk messages; the
last two should get nothing.

The users are split, and the split is in the data (`FactUser.split`):

- users 1-4 (Tomasz, Aisha, Gloria, Mei) are `fit`: a gate, a threshold or a ranking may be
  fitted on them, and fits may be compared and chosen on them;
- users 5-8 (Darius, Fiona, Kwame, Lucia) are `measure`: written never to be fitted nor chosen
  on, they were used to choose the gate's rule (decision 0039), so they are now spent: as good
  as fit, no longer evidence;
- users 9-12 (Yusuf, Nnamdi, Mateo, Bronwyn) are `fresh`, written after users 5-8 were used to
  choose the gate's rule, and users 13-16 (Ximena, Eunji, Otieno, Rangi) are `fresh` too,
  written by another hand a session later, before the asking model's second fit: their facts
  and questions are never used to fit anything nor to choose between fits; only they are
  reported as evidence.

No measure fact shares two content words with a fit fact, no fresh fact shares two with a fit or
a measure fact, and no fact shares two with a statement of gate_training.json's new users,
restatement_probe.json or paraphrase_probe.json; the fresh users' small talk repeats no line of
the held-out small talk, gate_training.json's or the other users' (tests/unit/test_fact_users.py).
A probe that decided between fits is no longer evidence and may not be reported as such: if a
fresh user is ever used to pick a fit, write new ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .heldout import DATA, Turn

FACT_USERS = DATA / "fact_users.json"
# the moment the fact users are asked (fact_probe.py's default, gate_dump.py's): a fixed one, so
# that a rerun asks what the run before asked (issue 44)
NOW = "2026-06-15T12:00:00Z"

Split = Literal["fit", "measure", "fresh"]
SPLITS: tuple[Split, ...] = ("fit", "measure", "fresh")


@dataclass(frozen=True, slots=True)
class Question:
    """A question asked later, in other words, and the number of the fact it asks about."""

    text: str
    fact: int


@dataclass(frozen=True, slots=True)
class FactUser:
    """One fact user: the thread that tells the facts and what they ask afterwards.

    Attributes:
        name: the persona's first name, unique in the file.
        persona: a line on who they are.
        split: "fit" (may be fitted and chosen on), "measure" (spent: used to choose the gate's
            rule) or "fresh" (never fitted nor chosen on; the users reported as evidence).
        thread: the turns in order; a turn's `fact` numbers the fact it tells, None for small
            talk and generic requests.
        questions: one question per fact, sharing no content word with the fact's turn.
        never_said: questions about themselves on topics they never mentioned.
        small_talk: messages asked later that no memory answers.
    """

    name: str
    persona: str
    split: Split
    thread: tuple[Turn, ...]
    questions: tuple[Question, ...]
    never_said: tuple[str, ...]
    small_talk: tuple[str, ...]

    @property
    def facts(self) -> tuple[Turn, ...]:
        """The turns that tell a fact, in the facts' order (fact 0 first)."""
        return tuple(sorted((t for t in self.thread if t.fact is not None), key=_fact_number))

    def fact_turn(self, fact: int) -> Turn:
        """The turn that tells fact number `fact`.

        Raises:
            StopIteration: when no turn tells it.
        """
        return next(t for t in self.thread if t.fact == fact)


def _fact_number(turn: Turn) -> int:
    return -1 if turn.fact is None else turn.fact


def _split(value: object, name: str) -> Split:
    if value not in SPLITS:
        raise ValueError(f"fact user {name!r}: split {value!r} is not one of {SPLITS}")
    return value


def fact_users(path: Path = FACT_USERS, split: Split | None = None) -> list[FactUser]:
    """The fact users from their file, in the file's order.

    Args:
        path: the JSON file.
        split: only the users of this split ("fit", "measure" or "fresh"); all of them when
            None.

    Returns:
        The users, each with its thread, questions, never-said questions and small talk.

    Raises:
        ValueError: when a user's split is not one of `SPLITS`.
    """
    users = []
    for raw in json.loads(path.read_text())["users"]:
        user = FactUser(
            name=raw["name"],
            persona=raw["persona"],
            split=_split(raw["split"], raw["name"]),
            thread=tuple(Turn(t["user"], t["assistant"], t["fact"]) for t in raw["thread"]),
            questions=tuple(Question(q["text"], q["fact"]) for q in raw["questions"]),
            never_said=tuple(raw["never_said"]),
            small_talk=tuple(raw["small_talk"]),
        )
        if split is None or user.split == split:
            users.append(user)
    return users
