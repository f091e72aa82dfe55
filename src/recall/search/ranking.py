"""Ranked rows into memories: cosine from pgvector's distance, and a row (a search's or a
ranker's candidate) as the `Memory` a caller gets."""

from __future__ import annotations

import copy
from typing import Any

from recall.memory import Memory
from recall.rows import CandidateRow, MemoryRow

__all__ = ["cosine", "row_memory"]


def cosine(distance: float | None) -> float | None:
    """Cosine similarity (clamped to 0-1) from pgvector's cosine distance."""
    return None if distance is None else max(0.0, min(1.0, 1.0 - float(distance)))


def row_memory(
    row: MemoryRow | CandidateRow,
    score: float | None = None,
    explanation: dict[str, Any] | None = None,
) -> Memory:
    """A result row (a search's or a second-stage candidate) as a `Memory` (similarity from its
    distance, `score` and `explanation` as given). A candidate's metadata is copied: the held
    rows share it between searches (`recall.store.held_search`), the caller may change it."""
    metadata = row.metadata or {}
    if isinstance(row, CandidateRow):
        metadata = copy.deepcopy(metadata)
    return Memory(
        id=str(row.id),
        user_message=row.user_message,
        ai_response=row.ai_response,
        similarity=cosine(row.distance),
        conversation_id=row.conversation_id,
        created_at=row.created_at,
        metadata=metadata,
        kind=row.kind,
        score=score,
        explanation=explanation,
    )
