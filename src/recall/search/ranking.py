"""Ranking rows into memories: cosine from distance, and the fusion of the vector and keyword
candidate lists into one calibrated order (the hybrid mode)."""

from __future__ import annotations

from typing import Any

from recall.memory import Memory
from recall.search.fusion import Candidate, FusionModel

__all__ = [
    "cosine",
    "fuse",
    "merge_candidates",
    "row_memory",
]

Row = tuple[Any, ...]


def cosine(distance: float | None) -> float | None:
    """Cosine similarity (clamped to 0-1) from pgvector's cosine distance."""
    return None if distance is None else max(0.0, min(1.0, 1.0 - float(distance)))


def row_memory(row: Row, score: float | None = None) -> Memory:
    """A result row (queries.sql's common column list) as a `Memory`."""
    mid, conversation_id, user_message, ai_response, created_at, metadata, kind, distance, _ = row
    return Memory(
        id=str(mid),
        user_message=user_message,
        ai_response=ai_response,
        similarity=cosine(distance),
        conversation_id=conversation_id,
        created_at=created_at,
        metadata=metadata or {},
        kind=kind,
        score=score,
    )


def merge_candidates(
    vector_hits: list[Row], keyword_hits: list[Row]
) -> tuple[dict[str, Row], list[Candidate]]:
    """The union of both lists as fusion sees it (a keyword-only hit can enter), with each
    candidate's row by id."""
    rows: dict[str, Row] = {}
    candidates: dict[str, Candidate] = {}
    for rank, row in enumerate(vector_hits):
        key = str(row[0])
        rows[key] = row
        candidates[key] = Candidate(key, cosine(row[7]) or 0.0, vector_rank=rank)
    for rank, row in enumerate(keyword_hits):
        key = str(row[0])
        rows.setdefault(key, row)
        cand = candidates.setdefault(key, Candidate(key, cosine(row[7]) or 0.0))
        cand.bm25 = float(row[8] or 0.0)
        cand.keyword_rank = rank
    return rows, list(candidates.values())


def fuse(
    vector_hits: list[Row], keyword_hits: list[Row], model: FusionModel
) -> list[tuple[Memory, float]]:
    """Merge both lists and rank by calibrated relevance."""
    rows, ordered = merge_candidates(vector_hits, keyword_hits)
    scored = sorted(
        zip(ordered, model.relevance(ordered), strict=True),
        key=lambda cs: (-cs[1], cs[0].key),
    )
    return [(row_memory(rows[c.key], score), score) for c, score in scored]
