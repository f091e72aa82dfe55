"""Issue 57's teacher, chosen on the fit side: bge-small, all-mpnet-base-v2 and blends of the two
ranking each question's candidates by cosine alone, from the vectors `teacher_vectors.py` kept.

    python benchmarks/teacher_probe.py

A blend scores a candidate by `w * z_bge + (1 - w) * z_mpnet`, each model's cosines z-scored over
the question's candidates (so neither model's scale weighs more); `rank` averages the two models'
ranks instead. Families, fit side only (the fresh fact users and the fresh restatement probe are
kept for the student's report and never read here):
- facts: the fit and measure fact users (8 users, 240 questions), each question ranking its
  user's thread; a hit is the turn that told the fact (top-1, top-3);
- restatement: issue 37's first restatement probe, its control user (30 facts said, each with
  the control's reply), each fact's two questions; a hit is the fact's turn;
- locomo: LoCoMo dev's questions, each ranking its conversation's turn pairs; a hit is an
  evidence pair in the top 5 (any@5).

The rule, fixed before any figure was seen: the teacher is the blend whose worst difference from
bge-small over the three families' headline figures (facts top-1, restatement top-1, LoCoMo
any@5) is largest (ties: the larger mean difference). Intervals: bootstrap over users (facts),
facts (restatement) and conversations (LoCoMo), 95%.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from harness import corpus
from harness.bootstrap import shown
from harness.distil_corpus import CONTROL_REPLY, stored
from harness.factusers import fact_users
from harness.heldout import DATA
from harness.report import git_revision, machine, publish
from harness.run import parser, run
from harness.teachers import TEACHERS
from harness.vectorcache import key, saved

BLENDS = (0.0, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0)  # w, bge-small's weight: 1.0 is bge alone


@dataclass(frozen=True, slots=True)
class Case:
    """One question: its group (user, fact or conversation), text, candidates and the places
    of its hits among them."""

    group: str
    question: str
    docs: tuple[str, ...]
    hits: frozenset[int]


def fact_cases() -> list[Case]:
    """The fit and measure fact users' questions over their threads."""
    out = []
    for user in (u for u in fact_users() if u.split != "fresh"):
        docs = tuple(stored(t.user, t.assistant) for t in user.thread)
        for q in user.questions:
            place = next(i for i, t in enumerate(user.thread) if t.fact == q.fact)
            out.append(Case(user.name, q.text, docs, frozenset({place})))
    return out


def restatement_cases() -> list[Case]:
    """The first restatement probe's control user: each fact's two questions."""
    facts = json.loads((DATA / "restatement_probe.json").read_text())["facts"]
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


class Scores:
    """Each teacher's cosines for a case, from its kept vectors."""

    def __init__(self) -> None:
        self.bge = saved(TEACHERS / "bge-vectors.npz")
        self.mpnet = saved(TEACHERS / "mpnet-vectors.npz")

    def cosines(self, case: Case) -> tuple[np.ndarray, np.ndarray]:
        """(bge-small's, mpnet's) cosines of the case's candidates to its question."""
        b = (
            np.stack([self.bge[key("doc", d)] for d in case.docs])
            @ self.bge[key("query", case.question)]
        )
        m = (
            np.stack([self.mpnet[key("doc", d)] for d in case.docs])
            @ self.mpnet[key("doc", case.question)]
        )
        return b, m


def _z(x: np.ndarray) -> np.ndarray:
    spread = float(x.std()) or 1.0
    out: np.ndarray = (x - x.mean()) / spread
    return out


def blended(w: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A blend's scores from the two models' cosines."""
    return lambda b, m: w * _z(b) + (1 - w) * _z(m)


def by_rank(b: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The two models' ranks averaged (higher is better)."""
    return -(np.argsort(np.argsort(-b)) + np.argsort(np.argsort(-m))).astype(float)


def hit_at(scores: np.ndarray, hits: frozenset[int], k: int) -> float:
    """Whether a hit is among the `k` best (ties to the earlier candidate)."""
    best = np.argsort(-scores, kind="stable")[:k]
    return float(any(int(i) in hits for i in best))


def main() -> None:
    """Rank every family's cases with each teacher and publish the table and the choice."""
    args = parser(__doc__).parse_args()
    revision = git_revision()
    scores = Scores()
    families: dict[str, tuple[list[Case], int]] = {
        "facts": (fact_cases(), 1), "restatement": (restatement_cases(), 1),
        "locomo": (locomo_cases(), 5),
    }  # fmt: skip
    cosines = {f: [scores.cosines(c) for c in cases] for f, (cases, _k) in families.items()}
    teachers: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        ("bge-small" if w == 1 else "mpnet" if w == 0 else f"blend w={w:g}"): blended(w)
        for w in BLENDS
    }
    teachers["rank mean"] = by_rank
    rows, headline = [], {}
    for name, teacher in teachers.items():
        cells, figures = [], []
        for family, (cases, k) in families.items():
            groups = [c.group for c in cases]
            for at in sorted({1, 3, k}):
                got = [
                    hit_at(teacher(b, m), c.hits, at)
                    for c, (b, m) in zip(cases, cosines[family], strict=True)
                ]
                cells.append(shown(got, groups))
                if at == k:
                    figures.append(got)
        headline[name] = figures
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    base = headline["bge-small"]
    diffs = {
        name: [float(np.mean(f) - np.mean(b)) for f, b in zip(figs, base, strict=True)]
        for name, figs in headline.items()
    }
    chosen = max(diffs, key=lambda n: (min(diffs[n]), float(np.mean(diffs[n]))))
    body = "\n".join([
        "## Issue 57's teacher on the fit side",
        f"`python benchmarks/teacher_probe.py` on {machine()}, commit {revision}. Cosine alone "
        "over each question's candidates; the vectors `teacher_vectors.py` kept (bge-small: the "
        "shipped int8 ONNX; mpnet: fp32 torch). Fit side only: the fit and measure fact users "
        f"({len(families['facts'][0])} questions), the first restatement probe's control user "
        f"({len(families['restatement'][0])}), LoCoMo dev ({len(families['locomo'][0])}). "
        "Percent, bootstrap 95% over users, facts and conversations.",
        "",
        "| teacher | facts top-1 | facts top-3 | restatement top-1 | restatement top-3 | "
        "LoCoMo any@1 | LoCoMo any@3 | LoCoMo any@5 |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Difference from bge-small (facts top-1, restatement top-1, LoCoMo any@5, points): "
        + "; ".join(f"{n} {', '.join(f'{100 * d:+.1f}' for d in ds)}" for n, ds in diffs.items())
        + f". The rule (the largest worst difference) chooses **{chosen}**.",
    ])  # fmt: skip
    publish("teacher-probe", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
