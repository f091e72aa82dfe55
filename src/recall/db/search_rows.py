"""Search statements: a user's nearest memories by cosine (the exact plan or their own HNSW
index), their best memories by BM25, and the second stage's candidates."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from recall.db.sql import fetch_all, fetch_one, fetch_tuples
from recall.embeddings import Vector
from recall.rows import HELD_COLUMNS, SCOPED_COLUMNS, TERM_COLUMNS, HeldState, MemoryRow
from recall.search.keywords import KeywordQuery

__all__ = ["held_rows", "held_state", "keyword_rows", "scoped_rows", "term_rows", "vector_rows"]


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


async def term_rows(
    conn: AsyncConnection[Any],
    *,
    user_id: str,
    keywords: KeywordQuery,
) -> list[tuple[Any, ...]]:
    """The second stage's keyword side (migration 0014): every memory of the user holding a
    query term, and one row of the terms' statistics (id None), as tuples of
    `recall.rows.TERM_COLUMNS`."""
    params = {
        "user_id": user_id,
        "tsquery": None if keywords.empty else keywords.tsquery,
        "words": keywords.words,
    }
    # binary: its arrays and floats arrive without parsing their text
    return await fetch_tuples(conn, "search_terms", params, TERM_COLUMNS, binary=True)


async def held_state(
    conn: AsyncConnection[Any], *, user_id: str, stamp: int | None, words: list[str]
) -> HeldState:
    """The user's stamp (any write to one of their memories changes it) and, unless it is
    `stamp`, each memory's id and row version; with it, what BM25 reads besides the rows:
    their memory count and mean length, and each of `words`' lexeme (migrations 0034, 0036)."""
    params = {"user_id": user_id, "stamp": stamp, "words": words}
    row = await fetch_one(conn, "held_state", params, HeldState)
    assert row is not None  # one row, for a user without memories too
    return row


async def held_rows(
    conn: AsyncConnection[Any], *, user_id: str, ids: list[UUID] | None
) -> list[tuple[Any, ...]]:
    """The user's memories of `ids` (every one when None) as tuples of
    `recall.rows.HELD_COLUMNS` (migration 0034)."""
    # binary: the vectors arrive as floats, not as text to parse
    params = {"user_id": user_id, "ids": ids}
    return await fetch_tuples(conn, "held_rows", params, HELD_COLUMNS, binary=True)


async def scoped_rows(
    conn: AsyncConnection[Any],
    *,
    user_id: str,
    vector: Vector,
    scope: int,
    index: str | None,
    ef_search: int,
    keywords: KeywordQuery,
    near: int,
    best: int,
) -> list[tuple[Any, ...]]:
    """A large user's second-stage candidates in one call (migration 0021): their `scope`
    nearest memories (their own HNSW index, or exact), the keyword side over those, and the
    details of the first `near` of them and of their best `best` by BM25, as tuples of
    `recall.rows.SCOPED_COLUMNS`."""
    params = {
        "user_id": user_id,
        "query": vector,
        "scope": scope,
        "candidates": max(scope, ef_search),
        "indexed": index is not None,
        "tsquery": None if keywords.empty else keywords.tsquery,
        "words": keywords.words,
        "near": near,
        "best": best,
    }
    return await fetch_tuples(conn, "search_scoped", params, SCOPED_COLUMNS, binary=True)
