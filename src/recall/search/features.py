"""The learned second stage's features (docs/retrieval.md, decision 0024).

The ranker's, computed from the candidates (`recall.rows.CandidateRow`) and the query alone:

- per candidate (`RANK_FEATURES`), what the ranker orders by: its cosine; its BM25 normalised by
  the query (over the idf of the query's terms, so it means the same for any user) and the share
  of the query's idf it matches; the same for its conversation neighbours (the turn before and
  after it), since the answer often sits next to the turn that matches; how many candidates its
  conversation holds; whether the query asks "when" and the memory holds a date; its length and
  recency; and, list-relative, its rank in each list and its gap to the best.
The per-query features the gate decides by are `recall.search.gate_features`'s.

Nothing here reads a name or a speaker: silence may not rest on names (decision 0024).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from recall.rows import CandidateRow
from recall.search.bm25 import saturated
from recall.search.echo import CACHED_TEXTS, is_question

__all__ = ["COLUMN", "RANK_FEATURES", "QueryFacts", "query_facts", "rank_features"]

RANK_FEATURES = (
    "cos",
    "bm25_qnorm",
    "idf_frac",
    "term_frac",
    "bm25_sat",
    "q_when",
    "cand_temporal",
    "when_x_temporal",
    "log_len",
    "nb_cos",
    "nb_idf_frac",
    "nb_bm",
    "sess_cos",
    "sess_n",
    "sess_idf",
    "recency",
    "is_question",
    "rank_cos",
    "rank_bm25",
    "cos_gap",
    "bm25_rel",
    # products of the above, which a linear model cannot form itself
    "cos_x_idf_frac",
    "cos_x_nb_cos",
    "rank_product",
    "cos_squared",
    "cos_x_sess_idf",
    # the user's size (log of their memories): where keyword evidence is worth following
    "log_memories",
)
COLUMN = {name: i for i, name in enumerate(RANK_FEATURES)}
"""Each of `RANK_FEATURES`' column in `rank_features`' rows."""
_MONTHS = "january february march april may june july august september october november december"
# a word of time or a number: what a memory that answers "when" usually holds. A text's words
# (maximal runs of word characters) are checked against a set, not a regular expression of
# alternatives searched at every position: the same answer (a listed word, case aside, or a
# word of decimal digits only), several times faster on the candidates of a search.
_TEMPORAL_WORDS = frozenset(
    (
        _MONTHS + " yesterday today tomorrow ago last next week weekend month year weeks "
        "months years recently since soon tonight morning evening"
    ).split()
)
_WORDS = re.compile(r"\w+")
_NUMBER = re.compile(r"\b\d+\b")


@dataclass(frozen=True, slots=True)
class QueryFacts:
    """What the features need of the query and the user's memories as a whole.

    Attributes:
        idf: each query term's idf among the user's memories (0 for a term they never used).
        idf_sum: the idf of the terms they used.
        coverage: `idf_sum` over the query's whole idf, an unused term weighing the most a term
            can (0 when the query has no term).
        memories: the user's number of memories.
        asks_when: the query asks for a time ("when ...", "what year", "how long").
    """

    idf: tuple[float, ...]
    idf_sum: float
    coverage: float
    memories: float
    asks_when: bool

    @property
    def log_memories(self) -> float:
        """The log of the user's number of memories (0 for none): the ranker's
        `log_memories` and the gate's `log_n`."""
        return math.log(max(self.memories, 1.0))


def query_facts(query_text: str, rows: Sequence[CandidateRow]) -> QueryFacts:
    """The query's terms' idf (BM25's, as the keyword side's statement reads it from
    `recall.bm25_idf`) and coverage."""
    if not rows:
        return QueryFacts((), 0.0, 0.0, 0.0, False)
    n = max(rows[0].memories, 1.0)
    idf = tuple(rows[0].term_idf)
    most = rows[0].unheld_idf  # a term the user never used weighs the most a term can
    idf_sum = sum(idf)
    whole = sum(v if v > 0 else most for v in idf)
    low = query_text.lower()
    asks_when = low.lstrip().startswith("when") or "what year" in low or "how long" in low
    return QueryFacts(idf, idf_sum, idf_sum / whole if whole > 0 else 0.0, n, asks_when)


class _Shares:
    """The share of the query's idf that a set of matched terms (1-based numbers) holds, for
    one query, each set computed once: most candidates and their neighbours hold the same few
    terms."""

    __slots__ = ("facts", "known")

    def __init__(self, facts: QueryFacts) -> None:
        self.facts = facts
        self.known: dict[tuple[int, ...], float] = {}

    def __call__(self, matched: Sequence[int]) -> float:
        key = tuple(matched)
        value = self.known.get(key)
        if value is None:
            facts = self.facts
            if facts.idf_sum <= 0 or not key:
                value = 0.0
            else:
                held = (facts.idf[t - 1] for t in key if 0 < t <= len(facts.idf))
                value = sum(held) / facts.idf_sum
            self.known[key] = value
        return value


@lru_cache(maxsize=CACHED_TEXTS)  # a memory's text, judged once per process (issue 36)
def _has_time(text: str) -> bool:
    """Whether `text` holds a word of time (`_TEMPORAL_WORDS`) or a number. The number first,
    then the words until one is of time: a long reply is rarely read to its end. An ASCII text
    is lower-cased whole (the same words, each lower-cased), any other word by word."""
    if _NUMBER.search(text) is not None:
        return True
    if text.isascii():
        return not _TEMPORAL_WORDS.isdisjoint(_WORDS.findall(text.lower()))
    return not _TEMPORAL_WORDS.isdisjoint(w.lower() for w in _WORDS.findall(text))


def _temporal(row: CandidateRow) -> bool:
    return _has_time(row.user_message) or _has_time(row.ai_response)


def _session(row: CandidateRow) -> object:
    """A memory's conversation (a memory without one is a conversation of its own)."""
    return row.conversation_id if row.conversation_id is not None else row.id


def _cos(distance: float | None) -> float:
    return 0.0 if distance is None else 1.0 - float(distance)


def _list_ranks(
    cos: np.ndarray, bm25: np.ndarray, vector_order: Sequence[int], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's place in the vector list and in the keyword list, as 1 / (1 + place)
    (0 past the first `k`)."""
    n = len(cos)
    rank_cos = np.zeros(n)
    first = np.asarray(vector_order[:k], dtype=np.intp)
    rank_cos[first] = 1.0 / (1 + np.arange(len(first)))
    # a keyword score's place counts the scores above it: tied memories (the same terms and
    # length) share a place, whatever order their random ids gave them
    held = bm25 > 0
    scores = bm25[held]
    above = len(scores) - np.searchsorted(np.sort(scores), scores, side="right")
    rank_bm25 = np.zeros(n)
    rank_bm25[held] = np.where(above < k, 1.0 / (1 + above), 0.0)
    return rank_cos, rank_bm25


@dataclass(frozen=True, slots=True)
class _Surroundings:
    """What each candidate's neighbours (the turns before and after it), the other candidates
    of its conversation and its time among the candidates add, one value per candidate."""

    nb_cos: list[float]
    nb_share: list[float]
    nb_bm: list[float]
    sess_cos: list[float]
    sess_n: list[float]
    sess_idf: list[float]
    recency: list[float]


def _surroundings(
    share: _Shares, rows: Sequence[CandidateRow], cos: np.ndarray, shares: np.ndarray
) -> _Surroundings:
    """The neighbour, conversation and recency values of each candidate (`share`: the query's
    idf shares)."""
    n = len(rows)
    keys = [_session(r) for r in rows]
    times = [r.created_at for r in rows]
    sessions: dict[object, list[int]] = {}
    for i, key in enumerate(keys):
        sessions.setdefault(key, []).append(i)
    # each conversation's values once: its second best cosine, its share, its best idf share
    cos_list, share_list = cos.tolist(), shares.tolist()
    per_session: dict[object, tuple[float, float, float]] = {}
    for key, same in sessions.items():
        second = sorted((cos_list[j] for j in same), reverse=True)[1] if len(same) > 1 else 0.0
        per_session[key] = (second, len(same) / n, max(share_list[j] for j in same))
    first = min(times)
    span = (max(times) - first).total_seconds()
    nb_cos, nb_share, nb_bm = [0.0] * n, [0.0] * n, [0.0] * n
    for i, r in enumerate(rows):
        # the best of the turns before and after it (a cosine may be negative)
        prev, following = r.prev_distance, r.next_distance
        if prev is not None and following is not None:
            nb_cos[i] = max(1.0 - float(prev), 1.0 - float(following))
            nb_share[i] = max(share(r.prev_matched), share(r.next_matched))
            nb_bm[i] = max(r.prev_bm25, r.next_bm25)
        elif prev is not None:
            nb_cos[i], nb_share[i] = 1.0 - float(prev), share(r.prev_matched)
            nb_bm[i] = r.prev_bm25
        elif following is not None:
            nb_cos[i], nb_share[i] = 1.0 - float(following), share(r.next_matched)
            nb_bm[i] = r.next_bm25
    each = [per_session[k] for k in keys]
    sess_cos, sess_n, sess_idf = [e[0] for e in each], [e[1] for e in each], [e[2] for e in each]
    recency = [(t - first).total_seconds() / span if span > 0 else 1.0 for t in times]
    return _Surroundings(nb_cos, nb_share, nb_bm, sess_cos, sess_n, sess_idf, recency)


def rank_features(
    facts: QueryFacts, rows: Sequence[CandidateRow], vector_order: Sequence[int], k: int
) -> np.ndarray:
    """The `RANK_FEATURES` of each candidate (one row each, in `rows`' order).

    Per-candidate values are gathered in one pass, then set a column at a time: each is the
    same floating-point operation as on one value, so the features are bit for bit those of
    a candidate-by-candidate computation, at a fraction of its cost.

    Args:
        facts: `query_facts` of the query.
        rows: the candidates.
        vector_order: the candidates of the vector side, as indexes into `rows`, best first.
        k: how many of each list count as ranked (the candidates per side).
    """
    x = np.zeros((len(rows), len(RANK_FEATURES)))
    if not rows:
        return x
    cos = np.array([_cos(r.distance) for r in rows])
    bm25 = np.array([r.bm25 for r in rows], dtype=np.float64)
    idf_sum = facts.idf_sum
    n_terms = max(len(facts.idf), 1)
    rank_cos, rank_bm25 = _list_ranks(cos, bm25, vector_order, k)
    best_cos = float(cos[vector_order[0]]) if vector_order else float(cos.max())
    best_bm25 = float(bm25.max())
    share = _Shares(facts)
    shares = np.array([share(r.matched) for r in rows])
    around = _surroundings(share, rows, cos, shares)
    temporal = np.array([float(_temporal(r)) for r in rows])
    asks_when = float(facts.asks_when)
    col = COLUMN
    x[:, col["cos"]] = cos
    x[:, col["bm25_qnorm"]] = bm25 / idf_sum if idf_sum > 0 else 0.0
    x[:, col["idf_frac"]] = shares
    x[:, col["term_frac"]] = [len(r.matched) / n_terms for r in rows]
    x[:, col["bm25_sat"]] = saturated(bm25)
    x[:, col["q_when"]] = asks_when
    x[:, col["cand_temporal"]] = temporal
    x[:, col["when_x_temporal"]] = temporal * asks_when
    x[:, col["log_len"]] = [math.log1p(r.doc_len) for r in rows]
    x[:, col["nb_cos"]] = around.nb_cos
    x[:, col["nb_idf_frac"]] = around.nb_share
    x[:, col["nb_bm"]] = np.array(around.nb_bm) / idf_sum if idf_sum > 0 else 0.0
    x[:, col["sess_cos"]] = around.sess_cos
    x[:, col["sess_n"]] = around.sess_n
    x[:, col["sess_idf"]] = around.sess_idf
    x[:, col["recency"]] = around.recency
    x[:, col["is_question"]] = [float(is_question(r.user_message)) for r in rows]
    x[:, col["rank_cos"]] = rank_cos
    x[:, col["rank_bm25"]] = rank_bm25
    x[:, col["cos_gap"]] = best_cos - cos
    x[:, col["bm25_rel"]] = bm25 / best_bm25 if best_bm25 > 0 else 0.0
    x[:, col["cos_x_idf_frac"]] = cos * shares
    x[:, col["cos_x_nb_cos"]] = cos * x[:, col["nb_cos"]]
    x[:, col["rank_product"]] = rank_cos * rank_bm25
    x[:, col["cos_squared"]] = [c**2 for c in cos.tolist()]  # pow(), as for one value
    x[:, col["cos_x_sess_idf"]] = cos * x[:, col["sess_idf"]]
    x[:, col["log_memories"]] = facts.log_memories
    return x
