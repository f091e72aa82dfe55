"""One conversation's memory creation state, for `recall.creation` and the context nodes: its
newest memories, its unprocessed turns and tracker, storing a chunk of model-written memories,
its rolling summary, and which conversations wait to be processed."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from recall.db import conversation_state as db
from recall.db.memories import conversation_recent as recent_rows
from recall.embeddings import Vector
from recall.errors import InvalidInputError
from recall.limits import RECENT_LIMIT
from recall.memory import KINDS, Memory, Turn, clean_id
from recall.rows import ChunkStored, PendingConversation, PendingTurn
from recall.search.ranking import row_memory
from recall.store.checks import check_limit, check_threshold
from recall.store.core import StoreCore

__all__ = ["Conversations"]


def _ids(user_id: object, conversation_id: object) -> tuple[str, str]:
    uid = clean_id(user_id, "user_id")
    cid = clean_id(conversation_id, "conversation_id")
    assert uid is not None and cid is not None  # required ids are never None
    return uid, cid


class Conversations:
    """`MemoryStore.conversations`: one conversation's memory creation state, for
    `recall.creation` and the context nodes (`store.conversations.pending_turns(...)`).

    Args:
        core: the state the store's parts share.
    """

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def conversation_recent(
        self,
        user_id: str,
        conversation_id: str,
        n: int = RECENT_LIMIT,
        *,
        kinds: Sequence[str] = ("summary", "turn"),
    ) -> list[Memory]:
        """The conversation's `n` newest memories, newest first, of the first kind in `kinds`
        that it has any of (by default its model-written memories, else its stored turns).

        Raises:
            InvalidInputError, StoreError.
        """
        uid, cid = _ids(user_id, conversation_id)
        n = check_limit(n, "n")
        if isinstance(kinds, str) or not all(kind in KINDS for kind in kinds):
            raise InvalidInputError(f"kinds must be a sequence of {', '.join(KINDS)}")
        async with self.core.conn("conversation_recent", read=True, user=uid) as conn:
            for kind in kinds:
                rows = await recent_rows(conn, uid, cid, kind, n)
                if rows:
                    return [row_memory(r) for r in rows]
        return []

    async def pending_turns(
        self, user_id: str, conversation_id: str, limit: int
    ) -> list[PendingTurn]:
        """The conversation's first `limit` turns that memory creation has not processed
        (those after its tracker), oldest first.

        Raises:
            InvalidInputError, StoreError.
        """
        uid, cid = _ids(user_id, conversation_id)
        limit = check_limit(limit)
        async with self.core.conn("pending_turns", user=uid) as conn:
            return await db.pending_turns(conn, uid, cid, limit)

    async def store_chunk(
        self,
        user_id: str,
        conversation_id: str,
        memories: Sequence[Turn],
        vectors: Sequence[Vector],
        *,
        through: PendingTurn,
        dedup_threshold: float,
    ) -> ChunkStored:
        """Store the model-written memories of a chunk of the conversation's turns and mark the
        chunk processed (its tracker moves to `through`), in one transaction: all or nothing.

        A memory whose vector is within `dedup_threshold` (cosine) of one of the user's
        model-written memories replaces it; one whose text is stored already changes nothing.

        Args:
            user_id, conversation_id: whose conversation.
            memories: `recall.memory.make_turn(..., kind="summary")` of this user and
                conversation, one per memory (none: only the tracker moves).
            vectors: each memory's embedding, by the store's embedder.
            through: the chunk's last turn (from `pending_turns`).
            dedup_threshold: 0 to 1.

        Raises:
            InvalidInputError: a memory is not a summary of this conversation, or the counts
                or a vector do not fit; nothing is stored.
            StoreError: the database failed; nothing is stored.
        """
        uid, cid = _ids(user_id, conversation_id)
        threshold = check_threshold(dedup_threshold)
        if len(memories) != len(vectors):
            raise InvalidInputError(f"{len(memories)} memories but {len(vectors)} vectors")
        for memory in memories:
            if (memory.kind, memory.user_id, memory.conversation_id) != ("summary", uid, cid):
                raise InvalidInputError("store_chunk stores summaries of this conversation only")
        checked = [self.core.embedder.check_vector(v) for v in vectors]
        async with self.core.conn("store_chunk", user=uid, fence=(uid,)) as conn:
            stored = await db.store_chunk(
                conn,
                uid,
                cid,
                memories,
                checked,
                model_name=self.core.embedder.name,
                dedup_distance=1.0 - threshold,
                through=through,
            )
        self.core.note_added(uid, stored.created)
        return stored

    async def chat_summary(
        self, user_id: str, conversation_id: str, *, read: bool = True
    ) -> str | None:
        """The conversation's rolling summary, or None.

        Args:
            read: read from the read pool (a replica when one is set); False reads the
                primary, for a summary about to be rewritten.

        Raises:
            InvalidInputError, StoreError.
        """
        uid, cid = _ids(user_id, conversation_id)
        async with self.core.conn("chat_summary", read=read, user=uid) as conn:
            row = await db.chat_summary(conn, uid, cid)
        return None if row is None else row.summary

    async def set_chat_summary(
        self, user_id: str, conversation_id: str, summary: str, *, last_memory_id: str | UUID
    ) -> None:
        """Write the conversation's rolling summary, made up to memory `last_memory_id`.

        Raises:
            InvalidInputError, StoreError.
        """
        uid, cid = _ids(user_id, conversation_id)
        if not isinstance(summary, str):
            raise InvalidInputError(f"summary must be a string, not {type(summary).__name__}")
        async with self.core.conn("set_chat_summary", user=uid, fence=(uid,)) as conn:
            await db.set_chat_summary(conn, uid, cid, summary, last_memory_id)

    async def pending_conversations(
        self, user_id: str | None = None, conversation_id: str | None = None
    ) -> list[PendingConversation]:
        """Conversations with turns that memory creation has not processed, and how many,
        ordered by user and conversation (`recall consolidate`).

        Args:
            user_id: only this user's; None: every user's.
            conversation_id: only conversations with this id; None: all.

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id", required=False)
        cid = clean_id(conversation_id, "conversation_id", required=False)
        async with self.core.conn("pending_conversations", all_users=True) as conn:
            return await db.pending_conversations(conn, uid, cid)
