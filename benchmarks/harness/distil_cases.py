"""Issue 57's cases: a question, its candidates (the memories its user holds, as the store
embeds them) and which of them answer it, by family; each teacher's cosines over a case from the
vectors `teacher_vectors.py` kept; and a hit among the best k. What `teacher_probe.py` chooses
the teacher on and `distil_student.py` trains and measures on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from . import corpus, realmem
from . import longmemeval as lme
from .distil_corpus import CONTROL_REPLY, stored
from .factusers import Split, fact_users
from .heldout import DATA
from .teachers import TEACHERS
from .vectorcache import Kind, key, saved

TEACHER_W = 0.6  # bge-small's weight in the teacher (decision 0061)


@dataclass(frozen=True, slots=True)
class Case:
    """One question: its group (user, fact or conversation), text, candidates and the places
    of its hits among them."""

    group: str
    question: str
    docs: tuple[str, ...]
    hits: frozenset[int]


def fact_cases(splits: tuple[Split, ...] = ("fit", "measure")) -> list[Case]:
    """The fact users' questions over their threads: the fit and measure users' by default
    (the fresh ones are the student's report)."""
    out = []
    for user in (u for u in fact_users() if u.split in splits):
        docs = tuple(stored(t.user, t.assistant) for t in user.thread)
        for q in user.questions:
            place = next(i for i, t in enumerate(user.thread) if t.fact == q.fact)
            out.append(Case(user.name, q.text, docs, frozenset({place})))
    return out


def restatement_cases(name: str = "restatement_probe.json") -> list[Case]:
    """A restatement probe's control user (the first probe's by default; the fresh one is the
    student's report): each fact's two questions."""
    facts = json.loads((DATA / name).read_text())["facts"]
    docs = tuple(stored(f["said"], CONTROL_REPLY) for f in facts)
    return [
        Case(f["key"], q, docs, frozenset({i})) for i, f in enumerate(facts) for q in f["asked"]
    ]


def locomo_cases() -> list[Case]:
    """LoCoMo dev's questions over their conversation's pairs."""
    data = corpus.load()
    by_user: dict[str, list[int]] = {}
    for i, t in enumerate(data.turns):
        by_user.setdefault(t["user_id"], []).append(i)
    out = []
    for user, question, _category, evidence in data.questions:
        own = by_user[user]
        docs = tuple(
            stored(data.turns[i]["user_message"], data.turns[i]["ai_response"]) for i in own
        )
        out.append(
            Case(user, question, docs, frozenset(n for n, i in enumerate(own) if i in evidence))
        )
    return out


def _realmem_sessions() -> Iterator[tuple[str, realmem.Session, tuple[str, ...], tuple[str, ...]]]:
    """Each RealMem user's sessions in order: the user's name, the session, the stored texts of
    the pairs of the sessions before it (what the store held when it began) and the session
    each of those came from."""
    for user in realmem.load():
        docs: list[str] = []
        sessions: list[str] = []
        for session in user.sessions:
            yield user.name, session, tuple(docs), tuple(sessions)
            docs += [lme.stored_text(p) for p in session.pairs]
            sessions += [session.uuid] * len(session.pairs)


def realmem_cases() -> list[Case]:
    """The RealMem users' queries whose answer used a memory, each over the pairs of the
    sessions before its own (what the store held when it was asked); a hit is a pair of a
    session the answer used (the simulator's noisy label)."""
    out = []
    for name, session, docs, sessions in _realmem_sessions():
        for q in session.queries:
            hits = frozenset(n for n, s in enumerate(sessions) if s in q.used)
            if hits:
                out.append(Case(name, q.text, docs, hits))
    return out


def longmemeval_cases(every: int = 1) -> list[Case]:
    """LongMemEval dev's questions (every `every`-th record, in the file's order) over their
    haystacks; a hit is a turn whose user message the file marks `has_answer` (records with
    none, the abstentions, are left out)."""
    out = []
    for record in lme.load()[::every]:
        docs = tuple(lme.stored_text(t) for t in record.turns)
        hits = frozenset(
            n for n, t in enumerate(record.turns) if t["user_message"] in record.evidence
        )
        if hits:
            out.append(Case(record.qid, record.question, docs, hits))
    return out


def locomo_turn_cases() -> list[Case]:
    """Unlabelled: each LoCoMo dev pair's first message asked over its conversation's pairs
    before it (from the sixth pair on)."""
    data = corpus.load()
    held: dict[str, list[str]] = {}
    out = []
    for t in data.turns:
        docs = held.setdefault(t["user_id"], [])
        if len(docs) >= 5:
            out.append(Case(t["user_id"], t["user_message"], tuple(docs), frozenset()))
        docs.append(stored(t["user_message"], t["ai_response"]))
    return out


def realmem_turn_cases() -> list[Case]:
    """Unlabelled: every RealMem user message after a user's first session asked over the
    pairs of the sessions before its own."""
    return [
        Case(name, m.text, docs, frozenset())
        for name, session, docs, _sessions in _realmem_sessions()
        if docs
        for m in (*session.queries, *session.others)
    ]


def gate_user_cases() -> list[Case]:
    """The gate's new users (three of ten turns each): each turn's question over the user's
    turns."""
    gate = json.loads((DATA / "gate_training.json").read_text())
    out = []
    for n, user in enumerate(gate["new_users"]):
        docs = tuple(stored(t["user_message"], t["ai_response"]) for t in user)
        out += [Case(f"gate-{n}", t["question"], docs, frozenset({i}))
                for i, t in enumerate(user)]  # fmt: skip
    return out


def intent_cases() -> list[Case]:
    """Unlabelled: the asking model's personal lines and the gate's personal questions, each
    asked over the gate's new users' turns and its filler (33 memories of three people)."""
    gate = json.loads((DATA / "gate_training.json").read_text())
    lines = json.loads((DATA / "intent_training.json").read_text())["personal"]
    turns = [*gate["filler"], *(t for u in gate["new_users"] for t in u)]
    docs = tuple(stored(t["user_message"], t["ai_response"]) for t in turns)
    asked = dict.fromkeys([*lines, *gate["personal_questions"]])
    return [Case("intent", q, docs, frozenset()) for q in asked]


def table_cosines(table: dict[str, np.ndarray], case: Case, asked: Kind = "query") -> np.ndarray:
    """The cosines of a case's candidates to its question, from a table of kept vectors
    (`harness.vectorcache`: the candidates as documents, the question as `asked`)."""
    out: np.ndarray = (
        np.stack([table[key("doc", d)] for d in case.docs]) @ table[key(asked, case.question)]
    )
    return out


class Scores:
    """Each teacher's cosines for a case, from its kept vectors."""

    def __init__(self) -> None:
        self.bge = saved(TEACHERS / "bge-vectors.npz")
        self.mpnet = saved(TEACHERS / "mpnet-vectors.npz")

    def cosines(self, case: Case) -> tuple[np.ndarray, np.ndarray]:
        """(bge-small's, mpnet's) cosines of the case's candidates to its question (mpnet reads
        a question as a document: it has no instruction)."""
        return table_cosines(self.bge, case), table_cosines(self.mpnet, case, asked="doc")


def _z(x: np.ndarray) -> np.ndarray:
    spread = float(x.std()) or 1.0
    out: np.ndarray = (x - x.mean()) / spread
    return out


def blended(w: float = TEACHER_W) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A blend's scores from the two models' cosines."""
    return lambda b, m: w * _z(b) + (1 - w) * _z(m)


def by_rank(b: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The two models' ranks averaged (higher is better)."""
    return -(np.argsort(np.argsort(-b)) + np.argsort(np.argsort(-m))).astype(float)


def hit_at(scores: np.ndarray, hits: frozenset[int], k: int) -> float:
    """Whether a hit is among the `k` best (ties to the earlier candidate)."""
    best = np.argsort(-scores, kind="stable")[:k]
    return float(any(int(i) in hits for i in best))
