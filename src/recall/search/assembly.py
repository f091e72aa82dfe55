"""What the learned second stage knows of one candidate memory, put together: a
`recall.rows.CandidateRow` from the two calls of migration 0014, `recall.search_terms`
(`TermRow`: the keyword side, no vector) and `recall.search_details` (`DetailRow`: the vector
side and the neighbours) (`assemble`); for a large user both come from one call,
`recall.search_scoped` (`ScopedRow`, migration 0021; `split_scoped`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np

from recall.rows import CandidateRow, DetailRow, ScopedRow, TermRow

__all__ = ["assemble", "split_scoped", "vector_of"]


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
