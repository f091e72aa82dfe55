"""How wide a `RecallStore` search through an HNSW index looks (`hnsw.ef_search`), and
whether the index is used at all, from its calibration (`recall.db.calibration`,
`recall.basestore.questions`) and the vectors it holds now (`recall.basestore.planning`)."""

from __future__ import annotations

from recall.db.calibration import FLOOR, LADDER
from recall.db.storeindex import Breadth

__all__ = ["GROWTH", "breadth_of", "stale", "usable"]

GROWTH = 0.25  # an index is calibrated again once it holds this share more than when last done
# How wide a search looks through an index not (yet) calibrated, or grown since (then at least
# its calibrated breadth), by the vectors the index holds: at least
# MIN_BREADTH, one more per VECTORS_PER_EF vectors, at most MAX_BREADTH (pgvector's limit).
# Measured on benchmarks/basestore.py's clustered vectors (docs/benchmarks.md): ef_search 100
# left recall@10 at 0.989 for namespaces of 1,000-9,999 vectors, 0.958 at 20,000, 0.823 at
# 50,000 and 0.814 for 170,000 under one prefix; 200, 400, 1,000 and 1,000 give 1.00, 0.998,
# 0.998 and 1.00. An index larger than LARGEST_MEASURED is not used (the exact scan answers):
# no recall was measured there, and the breadth cannot grow past 1,000.
MIN_BREADTH = 200
VECTORS_PER_EF = 50
MAX_BREADTH = 1000
LARGEST_MEASURED = 170_000


def stale(calibrated: Breadth | None, vectors: int) -> bool:
    """Whether an index holding `vectors` is to be calibrated (again): never calibrated, or
    grown by `GROWTH` since."""
    return calibrated is None or vectors > calibrated.vectors * (1 + GROWTH)


def usable(calibrated: Breadth | None, vectors: int) -> bool:
    """Whether a search may go through an index holding `vectors`: calibrated and fresh, when
    it reached the floor or its breadth is under the widest; else (not calibrated, or grown
    since: its search then looks as wide as decision 0023's rule) within the sizes decision
    0023 measured."""
    if calibrated is not None and not stale(calibrated, vectors):
        # under the floor only at the widest breadth: a breadth its questions widened to
        # (recall measured there still short) is used, and checked on
        return calibrated.recall >= FLOOR or calibrated.ef_search < LADDER[-1]
    return vectors <= LARGEST_MEASURED


def breadth_of(calibrated: Breadth | None, vectors: int, ef_search: int) -> int:
    """How wide a search through an index holding `vectors` looks: its calibrated breadth; not
    calibrated, or grown by `GROWTH` since (until calibrated again): the rule of decision 0023
    (`ef_search`, at least MIN_BREADTH, one more per VECTORS_PER_EF vectors, at most
    MAX_BREADTH), at least the breadth calibrated before."""
    if calibrated is not None and not stale(calibrated, vectors):
        return calibrated.ef_search
    rule = min(MAX_BREADTH, max(ef_search, MIN_BREADTH, -(-vectors // VECTORS_PER_EF)))
    return max(rule, calibrated.ef_search if calibrated is not None else 0)
