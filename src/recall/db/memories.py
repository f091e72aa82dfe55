"""One user's memories: add one, read the newest, get, delete, the search plan's numbers, and
erasure of everything a user has. Every function takes a connection scoped by the caller
(`recall.db.rls.scope`) unless its block scopes itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from recall.db.sql import fetch_all, fetch_one, fetch_value, fetch_values, run
from recall.embeddings import Vector
from recall.memory import Turn
from recall.rows import (
    AddedMemory,
    ConversationSummary,
    ForgottenUser,
    MemoryRow,
    TurnWrite,
    UserPlan,
)
from recall.search.judging import judged

__all__ = [
    "MEMORY_COLUMNS",
    "add_memory",
    "add_turn",
    "conversation_recent",
    "count_repeat",
    "delete_memory",
    "forget_before",
    "forget_over_cap",
    "forget_user_rows",
    "get_memory",
    "memories_by_ids",
    "memories_page",
    "recent_memories",
    "restatements_of",
    "user_plan",
    "user_summaries",
    "users_over_cap",
    "users_with_memories_before",
]


MEMORY_COLUMNS = (
    "user_id",
    "conversation_id",
    "user_message",
    "ai_response",
    "created_at",
    "metadata",
    "content_hash",
    "embedding",
    "embedding_model",
    "kind",
)
"""The columns a memory row is written with, in the order of every INSERT and of the import's
COPY (`memory_params` gives them by these names). The import's COPY and INSERT also name `id`
first: a memory read back from `recall export` keeps its id; a single row is always new."""


def memory_params(turn: Turn, vector: Vector, model_name: str) -> dict[str, Any]:
    """The parameters of one memory row (`add_memory`, `insert_memory`), from a checked turn,
    its vector and the model that made it: the one place a turn becomes a row, and so where it
    is judged (`recall.search.judging.judged`: what it holds, by which rule)."""
    metadata = judged(turn.metadata, turn.user_message, turn.ai_response, turn.kind)
    return {
        "user_id": turn.user_id,
        "conversation_id": turn.conversation_id,
        "user_message": turn.user_message,
        "ai_response": turn.ai_response,
        "created_at": turn.created_at,
        "metadata": Jsonb(metadata),
        "content_hash": turn.content_hash,
        "embedding": vector,
        "embedding_model": model_name,
        "kind": turn.kind,
    }


async def add_memory(
    conn: AsyncConnection[Any], turn: Turn, vector: Vector, model_name: str
) -> AddedMemory | None:
    """Store one turn unless the user has its content hash already; either way return it.

    `recall.add_memory` (migration 0009) sets the row-level security key itself: one round
    trip, one transaction, no scope needed. None: the row was deleted between its statements.
    """
    return await fetch_one(conn, "add_memory", memory_params(turn, vector, model_name), AddedMemory)


async def add_turn(
    conn: AsyncConnection[Any],
    turn: Turn,
    vector: Vector,
    model_name: str,
    *,
    max_distance: float,
    nearest: int,
    candidates: int,
) -> list[TurnWrite]:
    """Store one turn unless it repeats: `recall.add_turn` (migration 0019), one round trip.

    Returns:
        One row with `inserted` true or false (stored now, or the same turn stored before),
        or the user's `nearest` memories of the turn's kind within `max_distance` (cosine
        distance), `inserted` None, and nothing stored: the caller decides whether the turn
        repeats one of them. Empty: the row was deleted between its statements.
    """
    params = {
        **memory_params(turn, vector, model_name),
        "max_distance": max_distance,
        "nearest": nearest,
        "candidates": max(nearest, candidates),
    }
    return await fetch_all(conn, "add_turn", params, TurnWrite)


async def recent_memories(conn: AsyncConnection[Any], user_id: str, limit: int) -> list[MemoryRow]:
    """The user's `limit` newest memories, newest first."""
    return await fetch_all(conn, "recent", {"user_id": user_id, "limit": limit}, MemoryRow)


async def memories_page(
    conn: AsyncConnection[Any],
    user_id: str,
    limit: int,
    before: tuple[datetime, UUID] | None,
    kind: str | None = None,
) -> list[MemoryRow]:
    """The user's `limit` newest memories (of `kind`, when set) older than the cursor `before`
    (created_at, id)."""
    at, mid = before if before is not None else (None, None)
    params = {"user_id": user_id, "limit": limit, "before_at": at, "before_id": mid, "kind": kind}
    return await fetch_all(conn, "memories_page", params, MemoryRow)


async def user_summaries(
    conn: AsyncConnection[Any], user_id: str, limit: int
) -> list[ConversationSummary]:
    """The rolling summaries of the user's conversations, the newest first."""
    params = {"user_id": user_id, "limit": limit}
    return await fetch_all(conn, "user_summaries", params, ConversationSummary)


async def conversation_recent(
    conn: AsyncConnection[Any], user_id: str, conversation_id: str, kind: str, limit: int
) -> list[MemoryRow]:
    """The conversation's `limit` newest memories of one kind, newest first."""
    params = {"user_id": user_id, "conversation_id": conversation_id, "kind": kind, "limit": limit}
    return await fetch_all(conn, "conversation_recent", params, MemoryRow)


async def get_memory(conn: AsyncConnection[Any], user_id: str, memory_id: UUID) -> MemoryRow | None:
    """One of the user's memories by id, or None."""
    return await fetch_one(conn, "get_memory", {"user_id": user_id, "id": memory_id}, MemoryRow)


async def count_repeat(
    conn: AsyncConnection[Any], user_id: str, memory_id: UUID, seen_at: datetime
) -> MemoryRow | None:
    """Count one repeat of a memory, seen at `seen_at`, in its metadata; the memory as it is
    now, or None when it is gone."""
    params = {"user_id": user_id, "id": memory_id, "seen_at": seen_at.isoformat()}
    return await fetch_one(conn, "count_repeat", params, MemoryRow)


async def memories_by_ids(
    conn: AsyncConnection[Any], user_id: str, ids: list[UUID]
) -> list[MemoryRow]:
    """The user's memories among `ids`, oldest first (ids not found are left out)."""
    return await fetch_all(conn, "memories_by_ids", {"user_id": user_id, "ids": ids}, MemoryRow)


async def restatements_of(
    conn: AsyncConnection[Any], user_id: str, memory_id: UUID, limit: int
) -> list[MemoryRow]:
    """The user's memories whose provenance says their reply quoted `memory_id`, oldest
    first, at most `limit`."""
    params = {"user_id": user_id, "id": str(memory_id), "limit": limit}
    return await fetch_all(conn, "restatements_of", params, MemoryRow)


async def delete_memory(conn: AsyncConnection[Any], user_id: str, memory_id: UUID) -> bool:
    """Delete one of the user's memories; return whether it existed."""
    return await run(conn, "delete_memory", {"user_id": user_id, "id": memory_id}) > 0


async def user_plan(conn: AsyncConnection[Any], user_id: str) -> UserPlan | None:
    """The user's memory count and own HNSW index, or None for a user with no row yet."""
    return await fetch_one(conn, "user_plan", {"user_id": user_id}, UserPlan)


async def forget_user_rows(conn: AsyncConnection[Any], user_id: str) -> ForgottenUser:
    """Delete the user's memories, trackers, rolling summaries and bookkeeping row (call it in
    one transaction); the index the row named is left for the caller to drop."""
    key = {"user_id": user_id}
    count = await run(conn, "forget_memories", key)
    await run(conn, "forget_progress", key)
    await run(conn, "forget_summaries", key)
    index: str | None = await fetch_value(conn, "forget_user_row", key)
    return ForgottenUser(memories=count, hnsw_index=index)


async def forget_before(conn: AsyncConnection[Any], user_id: str, before: datetime) -> int:
    """Delete the user's memories dated before `before`; return how many."""
    return await run(conn, "forget_before", {"user_id": user_id, "before": before})


async def forget_over_cap(conn: AsyncConnection[Any], user_id: str, keep: int) -> int:
    """Delete all but `keep` of the user's memories, restatements of a stored source first,
    then the oldest (queries.sql `forget_over_cap`); return how many."""
    return await run(conn, "forget_over_cap", {"user_id": user_id, "keep": keep})


async def users_with_memories_before(conn: AsyncConnection[Any], before: datetime) -> list[str]:
    """The users with a memory dated before `before` (a connection scoped to all users)."""
    users: list[str] = await fetch_values(conn, "users_with_memories_before", {"before": before})
    return users


async def users_over_cap(conn: AsyncConnection[Any], cap: int) -> list[str]:
    """The users with more than `cap` memories (a connection scoped to all users)."""
    users: list[str] = await fetch_values(conn, "users_over_cap", {"cap": cap})
    return users
