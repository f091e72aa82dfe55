"""How deep the second stage's candidate lists must reach (issue 56): would fewer candidates
per side (cosine and BM25) keep what the shipped ranker hands over?

    python benchmarks/candidate_depth.py [--cache .recall/second-stage-cases]

Reads the cases `benchmarks/fit_second_stage.py` cached (each question asked of its user through
the store, 25 candidates per side, their features), takes the questions asked about what the
user said (kind "own"), orders each one's candidates by the shipped ranker and reports, per
family, the share of questions whose top 3 all sit within the first k of the cosine list or of
the BM25 list (a candidate's place in each is its `rank_cos` / `rank_bm25` feature), and the
share whose answer memories in the top 3 all do, for k = 10 and 15. In-sample for the shipped
ranker (it was fitted on these cases): an upper bound on what a shallower list keeps before any
refit. Writes docs/benchmarks.md (section "candidate-depth").
"""

from __future__ import annotations

import pickle
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from harness.report import git_revision, machine, publish, table
from harness.run import parser, run

from recall.embeddings.bge import BGE_MODEL_NAME
from recall.search.features import COLUMN
from recall.search.second_stage import second_stage_for

DEPTHS = (10, 15)
FAMILIES = ("locomo", "lme", "realmem", "factusers")


class _Case:
    """A cached case as read here (`fit_second_stage.Case` holds more): what it asks about,
    its candidates' features and which of them answer it."""

    kind: str
    x: np.ndarray
    labels: np.ndarray


class _Cases(pickle.Unpickler):
    """The fit's pickles name their class as the script that made them (`__main__.Case`)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("__main__", "Case"):
            return _Case
        return super().find_class(module, name)


def places(x: np.ndarray, column: str) -> np.ndarray:
    """Each candidate's 0-based place in a list from its 1 / (1 + place) feature (inf: past
    the list)."""
    value = x[:, COLUMN[column]]
    return np.where(value > 0, 1.0 / np.maximum(value, 1e-12) - 1.0, np.inf)


def main() -> None:
    """Load the cached cases, order them, print and write the table."""
    options = parser(__doc__)
    options.add_argument("--cache", type=Path, default=Path(".recall/second-stage-cases"))
    args = options.parse_args()
    stage = second_stage_for(BGE_MODEL_NAME)
    assert stage is not None
    rows = []
    for family in FAMILIES:
        with (args.cache / f"{family}.pkl").open("rb") as cached:
            cases: list[_Case] = _Cases(cached).load()[0]  # our own file
        own = [c for c in cases if c.kind == "own" and len(c.x)]
        top_kept = dict.fromkeys(DEPTHS, 0)
        hits_kept = dict.fromkeys(DEPTHS, 0)
        for case in own:
            top = np.argsort(-stage.ranker.logits(case.x), kind="stable")[:3]
            best = np.minimum(places(case.x, "rank_cos"), places(case.x, "rank_bm25"))[top]
            hits = best[case.labels[top] == 1]
            for k in DEPTHS:
                top_kept[k] += bool((best < k - 0.5).all())
                hits_kept[k] += bool((hits < k - 0.5).all())
        for k in DEPTHS:
            rows.append([family, len(own), k, f"{100 * top_kept[k] / len(own):.1f}",
                         f"{100 * hits_kept[k] / len(own):.1f}"])  # fmt: skip
    headers = ["family", "questions", "k", "top 3 all within k %", "its answers all within k %"]
    body = f"""## How deep the candidate lists must reach (issue 56)

`python benchmarks/candidate_depth.py` on {machine()}, commit {git_revision()},
{datetime.now():%Y-%m-%d}. The fit's cached cases (25 candidates per side, through the store),
the questions about what the user said, ordered by the shipped ranker (in-sample: an upper bound
before any refit). A candidate is "within k" when it is among the first k of the cosine list or
of the BM25 list:

{table(headers, rows)}

Fewer candidates would cut every step after the embedding (the details call, assembly, features,
trees) in proportion, but at k = 10 a LongMemEval question's top 3 leaves the lists' first ten in
41% of questions and an answer it hands over does in 39% (RealMem: 39% and 16%; k = 15: 12-13%
and 8%): the 25 per side stay, and a cheaper default path has to come from elsewhere.
"""
    publish("candidate-depth", body, write=not args.no_write)


if __name__ == "__main__":
    run(main)
