"""What the learned second stage knows of one candidate memory, put together: a
`recall.rows.CandidateRow` from the two calls of migration 0014, `recall.search_terms`
(`TermRow`: the keyword side, no vector) and `recall.search_details` (`DetailRow`: the vector
side and the neighbours) (`assemble`); for a large user both come from one call,
`recall.search_scoped` (migration 0021; `split_scoped`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np

from recall.rows import CandidateRow, DetailRow, TermRow

__all__ = ["KeywordSide", "assemble", "split_scoped", "vector_of"]


def split_scoped(
    rows: Sequence[tuple[Any, ...]],
) -> tuple[list[TermRow], list[DetailRow], list[UUID]]:
    """`recall.search_scoped`'s rows (tuples of `recall.rows.SCOPED_COLUMNS`) as the calls they
    stand for: the keyword side's rows, the details' rows (in the order they came) and the
    nearest memories among them, nearest first."""
    terms: list[TermRow] = []
    details: list[DetailRow] = []
    near: list[tuple[int, UUID]] = []
    for (part, place, ident, bm25, matched, term_df, memories, conversation_id, user_message,
         ai_response, created_at, metadata, kind, distance, embedding, doc_len, prev_id,
         prev_distance, next_id, next_distance) in rows:  # fmt: skip
        if part != 2:
            terms.append(TermRow(ident, bm25, matched, term_df, memories))
            continue
        assert ident is not None and created_at is not None and distance is not None
        details.append(
            DetailRow(
                ident, conversation_id, user_message or "", ai_response or "", created_at,
                metadata or {}, kind or "", distance, embedding, doc_len or 0, prev_id,
                prev_distance, next_id, next_distance,
            )
        )  # fmt: skip
        if place is not None:
            near.append((place, ident))
    return terms, details, [i for _n, i in sorted(near)]


def vector_of(row: CandidateRow) -> np.ndarray[Any, Any]:
    """A candidate's stored vector as a float64 array (pgvector hands a `Vector` from a
    composite row, a numpy array elsewhere)."""
    value = row.embedding
    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype=np.float64)


class KeywordSide:
    """The keyword side's rows looked up by memory: each hit's (place, BM25, terms), place
    being its position in `recall.search_terms`' order (best BM25 first, ties as the SQL
    made them stable), and the query terms' statistics."""

    __slots__ = ("hits", "memories", "term_df")

    def __init__(self, terms: list[TermRow]) -> None:
        self.hits: dict[UUID, tuple[int, float, list[int]]] = {}
        self.term_df: list[float] = []
        self.memories = 0.0
        for n, t in enumerate(terms):
            if t.id is None:
                self.term_df = list(t.term_df or [])
                self.memories = float(t.memories or 0.0)
            else:
                self.hits[t.id] = (n, float(t.bm25 or 0.0), t.matched or [])

    def best(self, k: int) -> list[UUID]:
        """The ids of the best `k` memories by BM25: the first `k` in `recall.search_terms`'
        order, which puts the best first and breaks ties by the newer memory, then by content
        hash (migration 0023): the same in any database that holds the same memories, where the
        ids are random."""
        return list(itertools.islice(self.hits, k))


_NO_HIT: tuple[int, float, list[int]] = (0, 0.0, [])


def assemble(side: KeywordSide, details: list[DetailRow]) -> list[CandidateRow]:
    """The candidates: each detail row with its own and its neighbours' BM25 and terms from the
    keyword side (0 and none where they hold no query term), and the query's statistics."""
    hits, term_df, memories = side.hits, side.term_df, side.memories
    out: list[CandidateRow] = []
    for d in details:
        own = hits.get(d.id, _NO_HIT)
        before = hits.get(d.prev_id, _NO_HIT) if d.prev_id is not None else _NO_HIT
        after = hits.get(d.next_id, _NO_HIT) if d.next_id is not None else _NO_HIT
        out.append(
            CandidateRow(
                id=d.id, conversation_id=d.conversation_id, user_message=d.user_message,
                ai_response=d.ai_response, created_at=d.created_at, metadata=d.metadata,
                kind=d.kind, distance=d.distance, bm25=own[1], embedding=d.embedding,
                doc_len=d.doc_len, matched=list(own[2]), prev_distance=d.prev_distance,
                prev_matched=list(before[2]), prev_bm25=before[1],
                next_distance=d.next_distance, next_matched=list(after[2]), next_bm25=after[1],
                term_df=term_df, memories=memories,
            )
        )  # fmt: skip
    return out
