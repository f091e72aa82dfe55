"""Issue 57's corpus: the texts a student embedder may be distilled on or measured with, by data
family, as the store embeds them: a stored turn's text (`recall.memory.make_turn`, user message
and reply) and a message as asked. No labels: the teachers' scores are the targets.

Families (what each reads):
- `probes`: issue 37's restatement probes (a fact said, then changed; the control user's turns
  `restatement_probe.py` stores) and issue 29's paraphrase probe;
- `facts`: issue 45's fact users, every split (`FactUser.split` says which may be fitted on);
- `intent`: the asking model's and the gate's training lines, and the held-out small talk;
- `locomo`: LoCoMo dev's turn pairs and questions;
- `realmem`: the eight RealMem users' pairs and messages;
- `longmemeval`: the distinct turns of LongMemEval dev's haystacks and their questions.

Which texts a fit may read and which a report may is the trainer's to keep apart (leave one
family out); this module only lists them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from recall.memory import make_turn

from . import corpus, realmem
from . import longmemeval as lme
from .factusers import fact_users
from .heldout import DATA, paraphrase_probe, small_talk

CONTROL_REPLY = "Thanks, I'll remember that."  # restatement_probe.py's control user's reply


@dataclass(frozen=True, slots=True)
class Texts:
    """One family's texts: `docs` as the store embeds a stored turn, `queries` as it embeds a
    message (the BGE instruction before it), each distinct, in a stable order."""

    docs: tuple[str, ...]
    queries: tuple[str, ...]


def stored(user_message: str, ai_response: str) -> str:
    """The text the store embeds for a turn."""
    return make_turn("u", user_message, ai_response, max_length=lme.MAX_LENGTH).text


def _texts(docs: Iterable[str], queries: Iterable[str]) -> Texts:
    return Texts(tuple(dict.fromkeys(docs)), tuple(dict.fromkeys(queries)))


def _json(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def probes() -> Texts:
    """The restatement probes (both) and the paraphrase probe."""
    docs: list[str] = []
    queries: list[str] = []
    for name in ("restatement_probe.json", "restatement_probe_fresh.json"):
        data = _json(name)
        for fact in data["facts"]:
            docs += [stored(fact[k], CONTROL_REPLY) for k in ("said", "changed") if k in fact]
            queries += fact["asked"]
        queries += data["requests"]
    probe = paraphrase_probe()
    docs += [stored(t.user, t.assistant) for t in probe.thread]
    queries += [q for q, _fact in probe.questions]
    return _texts(docs, queries)


def facts() -> Texts:
    """The fact users' threads and everything they ask."""
    users = fact_users()
    docs = [stored(t.user, t.assistant) for u in users for t in u.thread]
    queries = [q for u in users for q in (*(x.text for x in u.questions), *u.never_said,
                                          *u.small_talk)]  # fmt: skip
    return _texts(docs, queries)


def intent() -> Texts:
    """The asking model's training lines, the gate's training data and the held-out small
    talk."""
    lines = _json("intent_training.json")
    gate = _json("gate_training.json")
    queries = [*lines["small_talk"], *lines["personal"], *small_talk()]
    queries += [*gate["small_talk"], *gate["personal_questions"]]
    docs = [stored(t["user_message"], t["ai_response"]) for t in gate["filler"]]
    for user in gate["new_users"]:
        docs += [stored(t["user_message"], t["ai_response"]) for t in user]
        queries += [t["question"] for t in user]
    return _texts(docs, queries)


def locomo() -> Texts:
    """LoCoMo dev's turn pairs, its questions of categories 1-4 and each pair's first message
    (asked as a user turn is)."""
    data = corpus.load()
    docs = [stored(t["user_message"], t["ai_response"]) for t in data.turns]
    asked = [q for _user, q, _category, _evidence in data.questions]
    return _texts(docs, asked + [t["user_message"] for t in data.turns])


def realmem_texts() -> Texts:
    """The RealMem users' turn pairs and every user message of theirs."""
    users = realmem.load()
    docs = [lme.stored_text(p) for u in users for s in u.sessions for p in s.pairs]
    queries = [m.text for u in users for s in u.sessions for m in (*s.queries, *s.others)]
    return _texts(docs, queries)


def longmemeval() -> Texts:
    """The distinct turns of LongMemEval dev's haystacks and their questions."""
    records = lme.load()
    docs = [lme.stored_text(t) for r in records for t in r.turns]
    return _texts(docs, [r.question for r in records])


FAMILIES: dict[str, Callable[[], Texts]] = {
    "probes": probes,
    "facts": facts,
    "intent": intent,
    "locomo": locomo,
    "realmem": realmem_texts,
    "longmemeval": longmemeval,
}
"""Each family's texts, smallest first."""
