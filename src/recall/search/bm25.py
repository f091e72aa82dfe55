"""BM25: a user's memories scored for a query's terms over their held rows (`scored`), and
as a 0-1 feature (`SATURATION`, `saturated`).

In the database BM25 is `recall.bm25_term` (a query term's share of a document's score) and
`recall.bm25_idf` (the term's idf), whose bodies are in `recall/db/schema.sql` (migrations 0026
and 0033): the keyword searches (`recall.search_keyword`, `recall.search_terms`) and
RecallStore's (`store_search_ranked` in `recall/db/items.sql`) sum `bm25_term` over a document's
terms. The default path's keyword side scores the rows the process holds of a user instead
(`recall.store.held`, decision 0060): `scored` is the same sum, operation for operation, rounded
to nine decimals as there, so the same memories come in the same order with the same scores.
`SATURATION` turns a BM25 score into 0-1 (`saturated`), for the fusion's feature
(`recall.search.fusion`) and the second stage's `bm25_sat`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

__all__ = ["SATURATION", "Scored", "idf", "saturated", "scored"]

Postings = tuple[np.ndarray, np.ndarray]
"""A term's postings: the indexes of the documents holding it (ascending) and its boost in
each (2 in a title, 1.5 in the entities or key phrases, else 1)."""


def idf(df: float, n: float) -> float:
    """A term's idf among `n` documents, `df` of which hold it (`recall.bm25_idf`)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class Scored:
    """A query's terms scored over a user's documents (`scored`).

    Attributes:
        idfs: each term's idf, in the terms' order (0 for a term no document holds).
        order: the documents holding a term, best first: by BM25, one of unknown length (whose
            score the SQL leaves NULL) first, ties in the documents' order.
        scores: each document's BM25, rounded to nine decimals (0: it holds no term; NaN: its
            length is unknown).
        masks: each document's terms, bit `no - 1` set for term `no` (1-based).
    """

    idfs: list[float]
    order: np.ndarray
    scores: np.ndarray
    masks: np.ndarray
    _terms: dict[int, list[int]] = field(default_factory=dict)  # a mask's terms, once

    def matched(self, document: int) -> list[int]:
        """The numbers (1-based) of the terms `document` holds, ascending (a list the caller
        must not change: documents holding the same terms share it)."""
        mask = int(self.masks[document])
        known = self._terms.get(mask)
        if known is None:
            known = [no for no in range(1, len(self.idfs) + 1) if mask >> (no - 1) & 1]
            self._terms[mask] = known
        return known


def scored(
    terms: Sequence[str],
    n: float,
    avgdl: float,
    postings: Callable[[str], Postings],
    lengths: np.ndarray[Any, Any],
) -> Scored:
    """The query's `terms` (distinct lexemes, numbered in order) scored over documents as
    `recall.search_terms` scores a user's memories: each document's sum over the terms it holds
    of boost * idf * (k1 + 1) / (1 + k1 * ((1 - b) + b * length / avgdl)), k1 = 1.2, b = 0.75,
    the operations in the SQL's order, rounded to nine decimals.

    Args:
        terms: at most 62 (a query has at most 60 words).
        n: the number of memories the idf counts over; `avgdl`: their mean length.
        postings: a term's postings among the documents (`Postings`).
        lengths: each document's length (NaN: unknown).
    """
    total = np.zeros(len(lengths))
    masks = np.zeros(len(lengths), dtype=np.int64)
    norm = 1 + 1.2 * (0.25 + 0.75 * lengths / avgdl)
    idfs: list[float] = []
    for no, term in enumerate(terms):
        documents, boosts = postings(term)
        weight = idf(len(documents), n) if len(documents) else 0.0
        idfs.append(weight)
        if len(documents):
            total[documents] += boosts * weight * 2.2 / norm[documents]
            masks[documents] |= 1 << no
    held = np.flatnonzero(masks)
    scores = np.zeros(len(lengths))
    scores[held] = np.rint(total[held] * 1e9) / 1e9
    key = np.where(np.isnan(scores[held]), -np.inf, -scores[held])
    return Scored(idfs, held[np.argsort(key, kind="stable")], scores, masks)


SATURATION = 5.0
"""The BM25 score that `saturated` maps to 0.5."""

_Score = TypeVar("_Score", float, np.ndarray)


def saturated(bm25: _Score) -> _Score:
    """A BM25 score (or an array of them) mapped into 0-1: `bm25 / (bm25 + SATURATION)`."""
    return bm25 / (bm25 + SATURATION)
