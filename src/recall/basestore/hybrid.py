"""RecallStore's hybrid search ranked by the fusion, as the memories' hybrid is ranked.

`store_search_ranked` (items.sql) hands over the candidates: the items nearest the query by
their best vector's cosine and the best by BM25, with their places in each list. The shipped
fusion (`recall.search.fusion.default_fusion`) scores their union and the page is cut from it,
best first, ties in the lists' order (the vector list's, then the keyword list's). The fusion
is written once, in Python, for both stores (issue 56).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

from recall.rows import StoreItemRow, StoreRankedRow
from recall.search.fusion import default_fusion, merge
from recall.search.ranking import cosine

__all__ = ["fused_page"]


def fused_page(rows: Sequence[StoreRankedRow], offset: int, limit: int) -> list[StoreItemRow]:
    """The page `offset`, `limit` of `rows` ranked by the fusion, each item's `score` its
    relevance (0-1)."""
    by_key: dict[Hashable, StoreRankedRow] = {(r.ns, r.key): r for r in rows}
    nearest = sorted((r for r in rows if r.vector_rank is not None), key=_vector_rank)
    best = sorted((r for r in rows if r.keyword_rank is not None), key=_keyword_rank)
    candidates = merge(
        # the cosine as the memories' fusion takes it: clamped to 0-1, 0 without a vector
        (((r.ns, r.key), cosine(r.distance) or 0.0) for r in nearest),
        (((r.ns, r.key), cosine(r.distance) or 0.0, float(r.score or 0.0)) for r in best),
    )
    ranking = default_fusion().ranked(candidates)
    page = ranking.order[offset : offset + limit]
    return [dataclasses.replace(by_key[candidates[i].key], score=ranking.scores[i]) for i in page]


def _vector_rank(row: StoreRankedRow) -> int:
    return row.vector_rank or 0


def _keyword_rank(row: StoreRankedRow) -> int:
    return row.keyword_rank or 0
