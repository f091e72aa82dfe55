"""What the learned second stage knows of one candidate memory: a row of
`recall.search_candidates` (migration 0014)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np

__all__ = ["CandidateRow", "vector_of"]


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """One candidate of a search, as `recall.search_candidates` returns it.

    Attributes:
        id, conversation_id, user_message, ai_response, created_at, metadata, kind: as stored.
        distance: cosine distance to the query vector.
        bm25: its BM25 for the query (0 when it holds no query term).
        embedding: its stored vector.
        doc_len: its number of lexemes.
        matched: the query terms it holds, as numbers (1-based) into `term_df`.
        prev_*, next_*: the same for the turn before and after it in its conversation (None
            and empty where there is none).
        term_df: each query term's number of memories of the user holding it.
        memories: the user's number of memories.
        avgdl: their mean number of lexemes.
    """

    id: UUID
    conversation_id: str | None
    user_message: str
    ai_response: str
    created_at: datetime
    metadata: dict[str, Any]
    kind: str
    distance: float
    bm25: float
    embedding: Any  # pgvector's Vector or a numpy array: read it with `vector_of`
    doc_len: int
    matched: list[int]
    prev_distance: float | None
    prev_matched: list[int]
    prev_doc_len: int | None
    prev_bm25: float
    next_distance: float | None
    next_matched: list[int]
    next_doc_len: int | None
    next_bm25: float
    term_df: list[float]
    memories: float
    avgdl: float


def vector_of(row: CandidateRow) -> np.ndarray[Any, Any]:
    """A candidate's stored vector as a float64 array (pgvector hands a `Vector` from a
    composite row, a numpy array elsewhere)."""
    value = row.embedding
    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype=np.float64)
