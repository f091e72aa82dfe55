"""The rows the storage layer returns, one frozen dataclass per result shape. Field names are
the blocks' column names (`recall.db.sql.fetch_all` builds them by name). A memory read or
search row, which the search floor ranks, is `recall.memory.MemoryRow`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

__all__ = [
    "AddedMemory",
    "ChatSummary",
    "ChunkStored",
    "ConversationSummary",
    "EmbeddingSpace",
    "ForgottenUser",
    "ImportedId",
    "InsertedMemory",
    "NearestSummary",
    "OwnWordsRow",
    "PendingConversation",
    "PendingTurn",
    "Progress",
    "ReembedRow",
    "ShardResult",
    "StoreItemRow",
    "StoreStats",
    "TurnWrite",
    "UserBucket",
    "UserPlan",
    "VectorExtension",
]


@dataclass(frozen=True, slots=True)
class AddedMemory:
    """`add_memory`: the stored turn's id and date, and whether this call inserted it."""

    memory_id: UUID
    memory_created_at: datetime
    inserted: bool


@dataclass(frozen=True, slots=True)
class TurnWrite:
    """`add_turn` (migration 0019): a stored turn (`inserted` true, or false for the same
    turn stored before; its texts then as stored, or None when just inserted), or one of the
    user's nearest memories within the repeat distance (`inserted` None: nothing stored)."""

    id: UUID
    created_at: datetime
    inserted: bool | None
    conversation_id: str | None
    user_message: str | None
    ai_response: str | None
    metadata: dict[str, Any] | None
    kind: str | None


@dataclass(frozen=True, slots=True)
class InsertedMemory:
    """`insert_memory`: a new row's id and date (no row when the content was stored before)."""

    memory_id: UUID
    memory_created_at: datetime


@dataclass(frozen=True, slots=True)
class ImportedId:
    """`import_ids`: the id stored for the turn at position `ord` of an import batch."""

    ord: int
    id: UUID


@dataclass(frozen=True, slots=True)
class UserPlan:
    """`user_plan`: how many memories a user has, and their own HNSW index if built."""

    memory_count: int
    hnsw_index: str | None


@dataclass(frozen=True, slots=True)
class ForgottenUser:
    """What erasing a user's rows did: memories deleted, and the index their row named."""

    memories: int
    hnsw_index: str | None


@dataclass(frozen=True, slots=True)
class Progress:
    """`progress_get`: the last turn of a conversation that memory creation processed."""

    last_hash: bytes
    last_created_at: datetime
    last_memory_id: UUID


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """`turns_after`: a stored turn that memory creation has not processed yet."""

    id: UUID
    user_message: str
    ai_response: str
    created_at: datetime
    content_hash: bytes


@dataclass(frozen=True, slots=True)
class PendingConversation:
    """`pending_conversations`: a conversation with turns memory creation has not processed."""

    user_id: str
    conversation_id: str
    pending: int


@dataclass(frozen=True, slots=True)
class NearestSummary:
    """`nearest_summary`: the user's model-written memory closest to a vector."""

    id: UUID
    distance: float


@dataclass(frozen=True, slots=True)
class ChunkStored:
    """What storing one chunk of model-written memories did.

    Attributes:
        created: new memories.
        updated: existing memories replaced by a near-duplicate.
        identical: memories already stored with the same text (nothing changed).
        last_memory_id: the last memory created or updated, None when none was.
    """

    created: int
    updated: int
    identical: int
    last_memory_id: str | None


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """`user_summaries`: one conversation's rolling summary."""

    conversation_id: str
    summary: str
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ChatSummary:
    """`chat_summary_get`: a conversation's rolling summary."""

    summary: str
    last_memory_id: UUID
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class StoreStats:
    """`stats`: counts for operators."""

    memories: int
    users: int
    indexed_users: int
    largest_user: int
    bytes: int


@dataclass(frozen=True, slots=True)
class UserBucket:
    """`user_buckets`: users and memories in one user size bucket (the sum of a bigint
    column is numeric, hence `Decimal`)."""

    bucket: str
    users: int
    memories: Decimal


@dataclass(frozen=True, slots=True)
class EmbeddingSpace:
    """`get_embedding_space`: the model whose vectors fill the table, and their dimension."""

    model_name: str
    dimensions: int


@dataclass(frozen=True, slots=True)
class VectorExtension:
    """`vector_extension`: pgvector's installed and available versions (None: absent)."""

    installed: str | None
    available: str | None


@dataclass(frozen=True, slots=True)
class ReembedRow:
    """`reembed_*_batch`: a memory to embed again with the new model (its metadata for its
    reply's own part, where one is recorded: `recall.memory.own_words`). Also
    `own_words_sources`: a memory a turn quotes."""

    user_id: str
    id: UUID
    user_message: str
    ai_response: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class OwnWordsRow:
    """`own_words_batch`: a turn whose reply quotes memories and was never judged for its own
    words (decision 0038), with its number of lexemes before."""

    user_id: str
    id: UUID
    user_message: str
    ai_response: str
    metadata: dict[str, Any]
    doc_len: int


@dataclass(frozen=True, slots=True)
class StoreItemRow:
    """An item of `RecallStore` as read (`store_get`, `store_search_*`): its namespace is the
    labels joined by '.', and `score` is None for plain reads and unscored results. `expires`:
    the item has a TTL, so a read with `refresh_ttl` pushes it forward (the searches say; a
    statement that does not is taken to say yes)."""

    ns: str
    key: str
    value: dict[str, object]
    created_at: datetime
    updated_at: datetime
    score: float | None = None
    expires: bool = True


@dataclass(frozen=True, slots=True)
class ShardResult:
    """One shard's outcome of a command run on every shard (Citus' run_command_on_shards)."""

    shardid: int
    success: bool
    result: str
