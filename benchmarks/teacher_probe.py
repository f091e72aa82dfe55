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

from collections.abc import Callable

import numpy as np
from harness.bootstrap import shown
from harness.distil_cases import (
    Case,
    Scores,
    blended,
    by_rank,
    fact_cases,
    hit_at,
    locomo_cases,
    restatement_cases,
)
from harness.report import git_revision, machine, publish
from harness.run import parser, run

BLENDS = (0.0, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0)  # w, bge-small's weight: 1.0 is bge alone


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
