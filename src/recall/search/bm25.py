"""BM25's constants and its idf, as the SQL that scores keywords uses them.

BM25 is written once in SQL, `recall.bm25_term` (migration 0026; its current body in
`recall/db/schema.sql`), which the memories' keyword searches (`recall.search_keyword`,
`recall.search_terms`) and RecallStore's (`store_search_ranked` in `recall/db/items.sql`) call:
a term held by a document scores

    boost * idf(df, n) * (K1 + 1) / (1 + K1 * ((1 - B) + B * doc_len / avgdl))

(counted once per document), with `idf` below; the document's score is the sum over its terms.
The function writes the numbers (the memory searches run inside the database, where no caller
passes them), and `tests/integration/test_bm25_sql.py` holds its values to these. The second
stage reads `idf` (`recall.search.features`). `SATURATION` turns a BM25 score into 0-1
(`saturated`), for the fusion's feature (`recall.search.fusion`, and the items' hybrid in SQL,
which is passed it) and the second stage's `bm25_sat`.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

__all__ = ["IDF_SMOOTHING", "K1", "SATURATION", "B", "idf", "saturated"]

K1 = 1.2
"""Term-frequency saturation: how little a term's second occurrence adds (BM25's k1)."""

B = 0.75
"""Length normalisation: how much a long memory's score is lowered (BM25's b)."""

IDF_SMOOTHING = 0.5
"""The 0.5 of BM25's idf, `ln(1 + (n - df + 0.5) / (df + 0.5))`: never negative."""

SATURATION = 5.0
"""The BM25 score that `saturated` maps to 0.5."""

_Score = TypeVar("_Score", float, np.ndarray)


def idf(df: float, n: float) -> float:
    """A term's idf among `n` memories of which `df` hold it, as the SQL computes it."""
    return math.log(1 + (n - df + IDF_SMOOTHING) / (df + IDF_SMOOTHING))


def saturated(bm25: _Score) -> _Score:
    """A BM25 score (or an array of them) mapped into 0-1: `bm25 / (bm25 + SATURATION)`."""
    return bm25 / (bm25 + SATURATION)
