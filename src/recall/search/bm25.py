"""BM25 as a 0-1 feature: `SATURATION` and `saturated`.

BM25 itself is written once, in SQL: `recall.bm25_term` (a query term's share of a document's
score) and `recall.bm25_idf` (the term's idf), whose current bodies are in
`recall/db/schema.sql` (migrations 0026 and 0033). The memories' keyword searches
(`recall.search_keyword`, `recall.search_terms`) and RecallStore's (`store_search_ranked` in
`recall/db/items.sql`) sum `bm25_term` over a document's terms, and the keyword side's statement
hands the second stage each query term's idf (`recall.bm25_idfs`), so Python computes none of
it. `SATURATION` turns a BM25 score into 0-1 (`saturated`), for the fusion's feature
(`recall.search.fusion`) and the second stage's `bm25_sat`.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

__all__ = ["SATURATION", "saturated"]

SATURATION = 5.0
"""The BM25 score that `saturated` maps to 0.5."""

_Score = TypeVar("_Score", float, np.ndarray)


def saturated(bm25: _Score) -> _Score:
    """A BM25 score (or an array of them) mapped into 0-1: `bm25 / (bm25 + SATURATION)`."""
    return bm25 / (bm25 + SATURATION)
