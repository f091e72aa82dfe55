"""What the learned second stage knows of one candidate memory, put together: a
`recall.rows.CandidateRow` from the two calls of migration 0014, `recall.search_terms` (a row
of `recall.rows.TERM_COLUMNS`: the keyword side, no vector) and `recall.search_details` (a row of
`recall.rows.DETAIL_COLUMNS`: the vector side and the neighbours) (`assemble`); for a large user
both come from one call, `recall.search_scoped` (migration 0021; `split_scoped`). The rows stay
tuples until the candidates are picked: only those become records."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

import numpy as np

from recall.rows import TERM_COLUMNS, CandidateRow

__all__ = [
    "NO_HIT",
    "Hit",
    "KeywordSide",
    "assemble",
    "candidate",
    "pick",
    "split_scoped",
    "stored_vector",
]

Row = tuple[Any, ...]
"""A row as read from the database, in its block's columns (`recall.db.sql.fetch_tuples`)."""

Hit = tuple[int, float, list[int]]
"""A memory on the keyword side: its place (1-based), its BM25 and the terms it holds."""

NO_HIT: Hit = (0, 0.0, [])
"""What a memory holding no query term has of the keyword side."""


# a scoped row (`SCOPED_COLUMNS`): part and near, a TERM_COLUMNS row, then a DETAIL_COLUMNS row
# less its id (the term row's)
_TERMS = slice(2, 2 + len(TERM_COLUMNS))
_DETAILS_AFTER_ID = slice(2 + len(TERM_COLUMNS), None)


def split_scoped(rows: Sequence[Row]) -> tuple[list[Row], list[Row], list[UUID]]:
    """`recall.search_scoped`'s rows (tuples of `recall.rows.SCOPED_COLUMNS`) as the calls they
    stand for: the keyword side's rows (`TERM_COLUMNS`), the details' rows (`DETAIL_COLUMNS`,
    in the order they came) and the nearest memories among them, nearest first."""
    terms: list[Row] = []
    details: list[Row] = []
    near: list[tuple[int, UUID]] = []
    for row in rows:
        if row[0] != 2:
            terms.append(row[_TERMS])
            continue
        details.append(row[2:3] + row[_DETAILS_AFTER_ID])
        if row[1] is not None:
            near.append((row[1], row[2]))
    return terms, details, [i for _n, i in sorted(near)]


def stored_vector(value: Any, dtype: Any = np.float64) -> np.ndarray[Any, Any]:
    """A stored vector as a numpy array of `dtype` (pgvector hands a `Vector` from a composite
    row or a column of no fixed dimension, a numpy array elsewhere)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=dtype)


class KeywordSide:
    """The keyword side's rows looked up by memory: each hit's (place, BM25, terms), place
    being its position in `recall.search_terms`' order (best BM25 first, ties as the SQL
    made them stable), and the query terms' statistics."""

    __slots__ = ("hits", "memories", "term_idf", "unheld_idf")

    def __init__(self, terms: Sequence[Row]) -> None:
        """`terms`: the rows of `recall.search_terms` (`recall.rows.TERM_COLUMNS`), in its
        order."""
        hits: dict[UUID, Hit] = {}
        self.term_idf: list[float] = []
        self.unheld_idf = 0.0
        self.memories = 0.0
        for n, (ident, bm25, matched, term_idf, unheld_idf, memories) in enumerate(terms):
            if ident is None:
                self.term_idf = list(term_idf or [])
                self.unheld_idf = float(unheld_idf or 0.0)
                self.memories = float(memories or 0.0)
            else:
                hits[ident] = (n, float(bm25 or 0.0), matched or [])
        self.hits: Mapping[UUID, Hit] = hits

    @classmethod
    def of(
        cls,
        hits: Mapping[UUID, Hit],
        term_idf: list[float],
        unheld_idf: float,
        memories: float,
    ) -> KeywordSide:
        """The keyword side computed in the process (`recall.store.held`): `hits` in the
        order `recall.search_terms` gives its rows, and the statistics of its row without an
        id."""
        side = cls(())
        side.hits, side.term_idf = hits, term_idf
        side.unheld_idf, side.memories = unheld_idf, memories
        return side

    def best(self, k: int) -> list[UUID]:
        """The ids of the best `k` memories by BM25: the first `k` in `recall.search_terms`'
        order, which puts the best first and breaks ties by the newer memory, then by content
        hash (migration 0023): the same in any database that holds the same memories, where the
        ids are random."""
        return list(itertools.islice(self.hits, k))


def pick(
    nothing: Sequence[bool], hit: Callable[[int], Hit | None], near: Iterable[int], k: int
) -> list[int]:
    """The second stage's candidates among those of `nothing` (whether each holds nothing), by
    index, in their order: the vector side's (`near`) and the best `k` by BM25 (their `hit`'s
    place), leaving out those that hold nothing. The one rule of both kinds of candidate rows
    (`recall.store.candidates`, `recall.store.held_search`)."""
    kept = [i for i, empty in enumerate(nothing) if not empty]
    ranked = sorted((h[0], i) for i in kept if (h := hit(i)) is not None and h[1] > 0)
    wanted = set(near) | {i for _place, i in ranked[:k]}
    return [i for i in kept if i in wanted]


def candidate(
    stored: Sequence[Any],
    distance: float,
    doc_len: int | None,
    own: Hit,
    prev_distance: float | None,
    before: Hit,
    next_distance: float | None,
    after: Hit,
    side: KeywordSide,
) -> CandidateRow:
    """A candidate from its stored columns (`recall.rows.StoredRow`'s, in order), its and its
    neighbours' distances and hits (`NO_HIT` where none), and the query's statistics."""
    ident, conversation_id, user_message, ai_response, created_at, metadata, kind = stored
    return CandidateRow(
        ident, conversation_id, user_message, ai_response, created_at, metadata, kind,
        distance, own[1], doc_len or 0, list(own[2]), prev_distance,
        list(before[2]), before[1], next_distance, list(after[2]), after[1], side.term_idf,
        side.unheld_idf, side.memories,
    )  # fmt: skip


def assemble(side: KeywordSide, details: Sequence[Row]) -> list[CandidateRow]:
    """The candidates: each detail row (`recall.rows.DETAIL_COLUMNS`) with its own and its
    neighbours' BM25 and terms from the keyword side (0 and none where they hold no query term),
    and the query's statistics."""
    hits = side.hits
    out: list[CandidateRow] = []
    for d in details:
        distance, _vector, doc_len, prev_id, prev_distance, next_id, next_distance = d[7:]
        before = hits.get(prev_id, NO_HIT) if prev_id is not None else NO_HIT
        after = hits.get(next_id, NO_HIT) if next_id is not None else NO_HIT
        out.append(
            candidate(d[:7], distance, doc_len, hits.get(d[0], NO_HIT),
                      prev_distance, before, next_distance, after, side)
        )  # fmt: skip
    return out
