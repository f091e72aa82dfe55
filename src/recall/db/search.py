"""Search statements: a user's nearest memories by cosine (the exact plan or their own HNSW
index), their best memories by BM25, and the second stage's candidates."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from recall.db.sql import fetch_all
from recall.embeddings import Vector
from recall.memory import MemoryRow
from recall.search.candidates import CandidateRow
from recall.search.keywords import KeywordQuery

__all__ = ["candidate_rows", "keyword_rows", "vector_rows"]


async def vector_rows(
    conn: AsyncConnection[Any],
    *,
    user_id: str,
    vector: Vector,
    limit: int,
    max_distance: float,
    index: str | None,
    ef_search: int,
) -> list[MemoryRow]:
    """Nearest memories by cosine: the exact plan, or the user's own HNSW index."""
    params = {
        "user_id": user_id,
        "query": vector,
        "limit": limit,
        "max_distance": max_distance,
        "candidates": max(limit, ef_search),
    }
    # both are one call that sets the row-level security key itself (migrations 0005, 0010)
    name = "search_exact" if index is None else "search_indexed"
    return await fetch_all(conn, name, params, MemoryRow)


async def keyword_rows(
    conn: AsyncConnection[Any],
    *,
    user_id: str,
    keywords: KeywordQuery,
    vector: Vector | None,
    limit: int,
    conversation_id: str | None = None,
) -> list[MemoryRow]:
    """Best memories by BM25 over PostgreSQL full-text search (cosine too when `vector`)."""
    if keywords.empty:
        return []
    params = {
        "user_id": user_id,
        "tsquery": keywords.tsquery,
        "words": keywords.words,
        "query": vector,
        "limit": limit,
        "conversation_id": conversation_id,
    }
    return await fetch_all(conn, "search_keyword", params, MemoryRow)


async def candidate_rows(
    conn: AsyncConnection[Any],
    *,
    user_id: str,
    vector: Vector,
    keywords: KeywordQuery,
    vector_ids: list[UUID],
    limit: int,
    scope: list[UUID] | None = None,
) -> list[CandidateRow]:
    """The second stage's candidates: the user's best `limit` memories by BM25 (among `scope`
    when given) and `vector_ids`, with what its features need (migration 0014), in id order."""
    params = {
        "user_id": user_id,
        "query": vector,
        "tsquery": None if keywords.empty else keywords.tsquery,
        "words": keywords.words,
        "vector_ids": vector_ids,
        "limit": limit,
        "scope": scope,
    }
    # binary: each candidate's vector arrives as floats, not as text to parse (~3 ms a search)
    return await fetch_all(conn, "search_candidates", params, CandidateRow, binary=True)
