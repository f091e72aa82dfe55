"""The learned second stage's gate features (docs/retrieval.md, decision 0024), beside the
ranker's (`recall.search.features`).

Per query (`GATE_FEATURES`), what the gate decides by: absolute evidence that anything here
answers the message. How much of the query's idf the user's memories hold at all
(`coverage`: a question about what the user never spoke of names terms they never used), the
best cosines, the ranker's best three logits, and `intent`, a linear model over the query's own
vector that tells small talk and generic requests (greetings, thanks, arithmetic, translation)
from questions about the user's life, whatever the memories hold. Beside those, what the
ranker's top candidate holds on its own (its share of the query's idf, its cosine, its place
in each list and whether both lists put it first), the idf its top three hold together, the
best cosine standardised by the spread of this user's vector side (`cos_z`): an answer's
evidence sits in one memory, not in maxima taken over several (issue 35). Whether the
message is worded as a question is not a feature: every answerable message of the training
data is one, so the gate learned to shut on statements ("my dog Max") that memories do
answer (decision 0027).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recall.search.features import COLUMN, QueryFacts

__all__ = ["GATE_FEATURES", "gate_features"]

GATE_FEATURES = (
    "coverage",
    "n_terms",
    "best_cos",
    "cos2",
    "cos_mean",
    "best_idf",
    "best_bmq",
    "log_n",
    "intent",
    "z1",
    "z2",
    "z3",
    "best_nb_idf",
    "best_term_frac",
    "coverage_x_log_n",
    "best_cos_x_log_n",
    "z1_x_log_n",
    "cos_standout",
    "unseen_terms",
    "unseen_frac",
    "min_idf",
    # the ranker's top candidate on its own, and the lists' agreement on it (issue 35)
    "top_idf",
    "top_cos",
    "top_rank_cos",
    "top_rank_bm25",
    "top_agree",
    "top3_idf",
    "cos_z",
    # the message names a time and a candidate is from then (recall.search.when)
    "time_hit",
)
_NO_LOGIT = -10.0  # the ranker logit of a missing second or third candidate


def _candidate_values(x: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    """The gate's features read from the candidates: the ranker's best three logits, the best
    of some features over all of them and the values of its top candidate."""
    order = np.argsort(-logits, kind="stable") if len(x) else np.zeros(0, dtype=np.intp)
    top = logits[order[:3]].tolist()  # the ranker's best three, best first
    z = top + [_NO_LOGIT] * (3 - len(top))

    def best_of(name: str) -> float:
        return float(x[:, COLUMN[name]].max()) if len(x) else 0.0

    def first(name: str) -> float:  # of the ranker's top candidate
        return float(x[order[0], COLUMN[name]]) if len(x) else 0.0

    return {
        "z1": z[0],
        "z2": z[1],
        "z3": z[2],
        "best_idf": best_of("idf_frac"),
        "best_bmq": best_of("bm25_qnorm"),
        "best_nb_idf": best_of("nb_idf_frac"),
        "best_term_frac": best_of("term_frac"),
        "top_idf": first("idf_frac"),
        "top_cos": first("cos"),
        "top_rank_cos": first("rank_cos"),
        "top_rank_bm25": first("rank_bm25"),
        "top_agree": float(first("rank_cos") == 1.0 and first("rank_bm25") == 1.0),
        "top3_idf": float(x[order[:3], COLUMN["idf_frac"]].sum()) if len(x) else 0.0,
    }


def gate_features(
    facts: QueryFacts,
    x: np.ndarray,
    logits: np.ndarray,
    vector_cosines: Sequence[float],
    intent: float,
    time_hit: bool = False,
) -> np.ndarray:
    """The `GATE_FEATURES` of a query.

    Args:
        facts: `query_facts` of the query.
        x: its candidates' `rank_features`.
        logits: the ranker's logit of each candidate.
        vector_cosines: the vector side's cosines, best first.
        intent: the intent model's logit for the query's vector.
        time_hit: the query names a time and a candidate is from then.
    """
    values = _candidate_values(x, logits)
    cosines = list(vector_cosines) or [0.0]
    best = cosines[0]
    mean = float(np.mean(cosines[:10]))
    log_n = facts.log_memories
    unseen = sum(1 for v in facts.idf if v == 0)  # terms the user never used
    spread = float(np.std(cosines))
    values.update(
        {
            "coverage": facts.coverage,
            "n_terms": float(len(facts.idf)),
            "best_cos": best,
            "cos2": cosines[1] if len(cosines) > 1 else 0.0,
            "cos_mean": mean,
            "log_n": log_n,
            "intent": intent,
            "coverage_x_log_n": facts.coverage * log_n,
            "best_cos_x_log_n": best * log_n,
            "z1_x_log_n": values["z1"] * log_n,
            "cos_standout": best - mean,
            "unseen_terms": float(unseen),
            "unseen_frac": unseen / len(facts.idf) if facts.idf else 0.0,
            "min_idf": min(facts.idf) if facts.idf else 0.0,
            "cos_z": (best - float(np.mean(cosines))) / spread if spread > 0 else 0.0,
            "time_hit": float(time_hit),
        }
    )
    return np.array([values[name] for name in GATE_FEATURES])
