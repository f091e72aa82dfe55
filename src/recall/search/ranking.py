"""Ranking rows into memories: cosine from distance, and the fusion of the vector and keyword
candidate lists into one calibrated order (the hybrid mode without a second stage), through
the rankers' interface (`recall.search.rankers`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recall.memory import Memory, MemoryRow
from recall.search.candidates import CandidateRow
from recall.search.fusion import Candidate
from recall.search.rankers import Query, Ranker

__all__ = [
    "cosine",
    "fuse",
    "merge_candidates",
    "row_memory",
]


def cosine(distance: float | None) -> float | None:
    """Cosine similarity (clamped to 0-1) from pgvector's cosine distance."""
    return None if distance is None else max(0.0, min(1.0, 1.0 - float(distance)))


def row_memory(
    row: MemoryRow | CandidateRow,
    score: float | None = None,
    explanation: dict[str, Any] | None = None,
) -> Memory:
    """A result row (a search's or a second-stage candidate) as a `Memory` (similarity from its
    distance, `score` and `explanation` as given)."""
    return Memory(
        id=str(row.id),
        user_message=row.user_message,
        ai_response=row.ai_response,
        similarity=cosine(row.distance),
        conversation_id=row.conversation_id,
        created_at=row.created_at,
        metadata=row.metadata or {},
        kind=row.kind,
        score=score,
        explanation=explanation,
    )


def merge_candidates(
    vector_hits: list[MemoryRow], keyword_hits: list[MemoryRow]
) -> tuple[dict[str, MemoryRow], list[Candidate]]:
    """The union of both lists as fusion sees it (a keyword-only hit can enter), with each
    candidate's row by id."""
    rows: dict[str, MemoryRow] = {}
    candidates: dict[str, Candidate] = {}
    for rank, row in enumerate(vector_hits):
        key = str(row.id)
        rows[key] = row
        candidates[key] = Candidate(key, cosine(row.distance) or 0.0, vector_rank=rank)
    for rank, row in enumerate(keyword_hits):
        key = str(row.id)
        rows.setdefault(key, row)
        cand = candidates.setdefault(key, Candidate(key, cosine(row.distance) or 0.0))
        cand.bm25 = float(row.bm25 or 0.0)
        cand.keyword_rank = rank
    return rows, list(candidates.values())


def fuse(
    vector_hits: list[MemoryRow],
    keyword_hits: list[MemoryRow],
    ranker: Ranker[Sequence[Candidate]],
    query: Query,
) -> list[tuple[Memory, float]]:
    """Merge both lists (`merge_candidates`) and rank them with `ranker` (the fusion), best
    first, each memory with its score."""
    rows, ordered = merge_candidates(vector_hits, keyword_hits)
    ranking = ranker.rank(query, ordered)
    scores = ranking.scores
    return [(row_memory(rows[ordered[i].key], scores[i]), scores[i]) for i in ranking.order]
