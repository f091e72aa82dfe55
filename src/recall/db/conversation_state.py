"""Memory creation's statements: a conversation's unprocessed turns and tracker, storing a
chunk of model-written memories (near-duplicates merged), the rolling summary, and which
conversations wait. Every function takes a connection scoped by the caller."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg import AsyncConnection

from recall.db.memories import memory_params
from recall.db.sql import fetch_all, fetch_one, run
from recall.embeddings import Vector
from recall.memory import Turn
from recall.rows import (
    ChatSummary,
    ChunkStored,
    InsertedMemory,
    NearestSummary,
    PendingConversation,
    PendingTurn,
    Progress,
)

__all__ = [
    "chat_summary",
    "pending_conversations",
    "pending_turns",
    "set_chat_summary",
    "store_chunk",
]

# the tracker's position before a conversation's first turn
_BEGINNING = (datetime.fromisoformat("0001-01-01T00:00:00+00:00"), UUID(int=0))


async def pending_turns(
    conn: AsyncConnection[Any], user_id: str, conversation_id: str, limit: int
) -> list[PendingTurn]:
    """The conversation's first `limit` turns after its tracker, oldest first."""
    key = {"user_id": user_id, "conversation_id": conversation_id}
    progress = await fetch_one(conn, "progress_get", key, Progress)
    after_at, after_id = (
        (progress.last_created_at, progress.last_memory_id) if progress else _BEGINNING
    )
    params = {**key, "after_at": after_at, "after_id": after_id, "limit": limit}
    return await fetch_all(conn, "turns_after", params, PendingTurn)


async def store_chunk(
    conn: AsyncConnection[Any],
    user_id: str,
    conversation_id: str,
    memories: Sequence[Turn],
    vectors: Sequence[Vector],
    *,
    model_name: str,
    dedup_distance: float,
    through: PendingTurn,
) -> ChunkStored:
    """Store model-written memories (kind "summary") of one conversation, and move its
    tracker to `through`. Call it in one transaction: the chunk is then stored whole, tracker
    included, or not at all.

    A memory within `dedup_distance` (cosine) of one of the user's model-written memories
    replaces it; one whose text is stored already changes nothing.
    """
    created = updated = identical = 0
    last: str | None = None
    for memory, vector in zip(memories, vectors, strict=True):
        params = {
            **memory_params(memory, vector, model_name),
            # whatever the memory says: this conversation's, dated when stored, a summary
            "user_id": user_id,
            "conversation_id": conversation_id,
            "ai_response": "",
            "created_at": None,
            "kind": "summary",
        }
        near = await fetch_one(
            conn, "nearest_summary", {"user_id": user_id, "query": vector}, NearestSummary
        )
        if near is not None and float(near.distance) <= dedup_distance:
            try:
                async with conn.transaction():
                    await run(conn, "update_summary_memory", {**params, "id": near.id})
                updated += 1
                last = str(near.id)
            except psycopg.errors.UniqueViolation:
                identical += 1  # the same text is stored as another memory
            continue
        inserted = await fetch_one(conn, "insert_memory", params, InsertedMemory)
        if inserted is None:
            identical += 1
        else:
            created += 1
            last = str(inserted.memory_id)
    await run(
        conn,
        "progress_set",
        {
            "user_id": user_id,
            "conversation_id": conversation_id,
            "last_hash": through.content_hash,
            "last_created_at": through.created_at,
            "last_memory_id": through.id,
        },
    )
    return ChunkStored(created=created, updated=updated, identical=identical, last_memory_id=last)


async def chat_summary(
    conn: AsyncConnection[Any], user_id: str, conversation_id: str
) -> ChatSummary | None:
    """The conversation's rolling summary, or None."""
    key = {"user_id": user_id, "conversation_id": conversation_id}
    return await fetch_one(conn, "chat_summary_get", key, ChatSummary)


async def set_chat_summary(
    conn: AsyncConnection[Any],
    user_id: str,
    conversation_id: str,
    summary: str,
    last_memory_id: str | UUID,
) -> None:
    """Write the conversation's rolling summary, made through memory `last_memory_id`."""
    params = {
        "user_id": user_id,
        "conversation_id": conversation_id,
        "summary": summary,
        "last_memory_id": last_memory_id,
    }
    await run(conn, "chat_summary_set", params)


async def pending_conversations(
    conn: AsyncConnection[Any], user_id: str | None, conversation_id: str | None
) -> list[PendingConversation]:
    """Conversations with turns after their tracker (all users' when `user_id` is None; the
    connection must then be scoped to all users), with how many, ordered by user and id."""
    params = {"user_id": user_id, "conversation_id": conversation_id}
    return await fetch_all(conn, "pending_conversations", params, PendingConversation)
