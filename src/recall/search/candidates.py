"""What the learned second stage knows of one candidate memory (`CandidateRow`), put together
from the two calls of migration 0014: `recall.search_terms` (`TermRow`: the keyword side, no
vector) and `recall.search_details` (`DetailRow`: the vector side and the neighbours); for a
large user both come from one call, `recall.search_scoped` (`ScopedRow`, migration 0021)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np

__all__ = [
    "CandidateRow",
    "DetailRow",
    "ScopedRow",
    "StoredNear",
    "TermRow",
    "assemble",
    "split_scoped",
    "vector_of",
]


@dataclass(frozen=True, slots=True)
class TermRow:
    """A row of `recall.search_terms`: a memory holding a query term (its BM25 and the terms'
    numbers, 1-based), or, with `id` None, the query terms' document frequencies and the number
    of memories they were counted over (the function's `avgdl` column is not selected: BM25
    reads it in SQL and nothing in Python does)."""

    id: UUID | None
    bm25: float | None
    matched: list[int] | None
    term_df: list[float] | None
    memories: float | None


@dataclass(frozen=True, slots=True)
class StoredNear:
    """A memory as stored, with its cosine distance to the query: what a detail row and a
    candidate begin with (in this order: the row factory builds a `DetailRow` positionally)."""

    id: UUID
    conversation_id: str | None
    user_message: str
    ai_response: str
    created_at: datetime
    metadata: dict[str, Any]
    kind: str
    distance: float


@dataclass(frozen=True, slots=True)
class DetailRow(StoredNear):
    """A row of `recall.search_details`: a memory with its distance to the query, its vector,
    its number of lexemes, and the turns before and after it in its conversation."""

    embedding: Any
    doc_len: int
    prev_id: UUID | None
    prev_distance: float | None
    next_id: UUID | None
    next_distance: float | None


@dataclass(frozen=True, slots=True)
class ScopedRow:
    """A row of `recall.search_scoped` (migration 0021): by `part`, the terms' statistics (0) or
    a memory holding a query term (1), as a `TermRow`, or a candidate's details (2), as a
    `DetailRow`, with `near` its place among the nearest (1-based; None when only BM25 brought
    it)."""

    part: int
    near: int | None
    id: UUID | None
    bm25: float | None
    matched: list[int] | None
    term_df: list[float] | None
    memories: float | None
    conversation_id: str | None
    user_message: str | None
    ai_response: str | None
    created_at: datetime | None
    metadata: dict[str, Any] | None
    kind: str | None
    distance: float | None
    embedding: Any
    doc_len: int | None
    prev_id: UUID | None
    prev_distance: float | None
    next_id: UUID | None
    next_distance: float | None


def split_scoped(
    rows: list[ScopedRow],
) -> tuple[list[TermRow], list[DetailRow], list[UUID]]:
    """`recall.search_scoped`'s rows as the calls they stand for: the keyword side's rows, the
    details' rows (in the order they came) and the nearest memories among them, nearest
    first."""
    terms = [TermRow(r.id, r.bm25, r.matched, r.term_df, r.memories) for r in rows if r.part != 2]
    details: list[DetailRow] = []
    near: list[tuple[int, UUID]] = []
    for r in rows:
        if r.part != 2:
            continue
        assert r.id is not None and r.created_at is not None and r.distance is not None
        details.append(
            DetailRow(
                r.id, r.conversation_id, r.user_message or "", r.ai_response or "",
                r.created_at, r.metadata or {}, r.kind or "", r.distance, r.embedding,
                r.doc_len or 0, r.prev_id, r.prev_distance, r.next_id, r.next_distance,
            )
        )  # fmt: skip
        if r.near is not None:
            near.append((r.near, r.id))
    return terms, details, [i for _n, i in sorted(near)]


@dataclass(frozen=True, slots=True)
class CandidateRow(StoredNear):
    """One candidate of a search, as the second stage sees it (`assemble`).

    Attributes:
        id, conversation_id, user_message, ai_response, created_at, metadata, kind: as stored.
        distance: cosine distance to the query vector.
        bm25: its BM25 for the query (0 when it holds no query term).
        embedding: its stored vector.
        doc_len: its number of lexemes.
        matched: the query terms it holds, as numbers (1-based) into `term_df`.
        prev_*, next_*: the distance, terms and BM25 of the turn before and after it in its
            conversation (None, empty and 0 where there is none).
        term_df: each query term's number of memories of the user holding it.
        memories: the user's number of memories.
    """

    bm25: float
    embedding: Any  # pgvector's Vector or a numpy array: read it with `vector_of`
    doc_len: int
    matched: list[int]
    prev_distance: float | None
    prev_matched: list[int]
    prev_bm25: float
    next_distance: float | None
    next_matched: list[int]
    next_bm25: float
    term_df: list[float]
    memories: float


def vector_of(row: CandidateRow) -> np.ndarray[Any, Any]:
    """A candidate's stored vector as a float64 array (pgvector hands a `Vector` from a
    composite row, a numpy array elsewhere)."""
    value = row.embedding
    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype=np.float64)


def assemble(terms: list[TermRow], details: list[DetailRow]) -> list[CandidateRow]:
    """The candidates: each detail row with its own and its neighbours' BM25 and terms from the
    keyword side (0 and none where they hold no query term), and the query's statistics."""
    stats = next((t for t in terms if t.id is None), None)
    hits = {t.id: t for t in terms if t.id is not None}
    term_df = list(stats.term_df or []) if stats else []
    memories = float(stats.memories or 0.0) if stats else 0.0

    def bm25(key: UUID | None) -> float:
        hit = hits.get(key) if key is not None else None
        return float(hit.bm25 or 0.0) if hit else 0.0

    def matched(key: UUID | None) -> list[int]:
        hit = hits.get(key) if key is not None else None
        return list(hit.matched or []) if hit else []

    return [
        CandidateRow(
            id=d.id,
            conversation_id=d.conversation_id,
            user_message=d.user_message,
            ai_response=d.ai_response,
            created_at=d.created_at,
            metadata=d.metadata,
            kind=d.kind,
            distance=d.distance,
            bm25=bm25(d.id),
            embedding=d.embedding,
            doc_len=d.doc_len,
            matched=matched(d.id),
            prev_distance=d.prev_distance,
            prev_matched=matched(d.prev_id),
            prev_bm25=bm25(d.prev_id),
            next_distance=d.next_distance,
            next_matched=matched(d.next_id),
            next_bm25=bm25(d.next_id),
            term_df=term_df,
            memories=memories,
        )
        for d in details
    ]
