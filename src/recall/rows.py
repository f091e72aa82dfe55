"""The rows recall reads from the database, one dataclass per result shape (frozen, but for a
memory's rows, `StoredRow`), on the lowest floor: the storage layer returns them and the search
floor ranks them, and neither imports the other for them (issue 48). Field names are the SQL
blocks' column names (`recall.db.sql.fetch_all` builds them by name).

A memory read or search row is `MemoryRow`; the second stage's candidate is `CandidateRow`, put
together (`recall.search.assembly.assemble`) from the keyword side (`TERM_COLUMNS`, no vector)
and the details of `recall.search_details`' shape (`DETAIL_COLUMNS`: the vector side and the
neighbours), which `recall.store.held` computes from the user's held rows (`HELD_COLUMNS`); for
a large user both come from one call, `recall.search_scoped` (`SCOPED_COLUMNS`). They stay
tuples, checked against their columns (`recall.db.sql.fetch_tuples`): a search reads hundreds of
them once, and only the candidates picked from them become records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

__all__ = [
    "DETAIL_COLUMNS",
    "HELD_COLUMNS",
    "SCOPED_COLUMNS",
    "TERM_COLUMNS",
    "AddedMemory",
    "CandidateRow",
    "ChatSummary",
    "ChunkStored",
    "ConversationSummary",
    "EmbeddingSpace",
    "ForgottenUser",
    "HeldState",
    "ImportedId",
    "InsertedMemory",
    "JudgeRow",
    "MemoryRow",
    "NearestSummary",
    "PendingConversation",
    "PendingTurn",
    "Progress",
    "ReembedRow",
    "ShardResult",
    "StoreItemRow",
    "StoreStats",
    "StoredRow",
    "TurnWrite",
    "UserBucket",
    "UserPlan",
    "VectorExtension",
]


@dataclass(slots=True)
class StoredRow:
    """A memory's stored columns, in this order: what a read row and a candidate begin with.
    Not frozen, nor its kinds: a frozen `__init__` sets each field through `object.__setattr__`
    (1.45 against 0.15 µs for 21 fields), for dozens of candidates a search.

    Attributes:
        id: the memory's uuid.
        conversation_id, user_message, ai_response, created_at, metadata, kind: as stored.
    """

    id: UUID
    conversation_id: str | None
    user_message: str
    ai_response: str
    created_at: datetime
    metadata: dict[str, Any]
    kind: str


@dataclass(slots=True)
class MemoryRow(StoredRow):
    """One memory as a read or a search returns it: the columns of `recall.search_hit`
    (migration 0005), which every memory-returning block of `queries.sql` selects by name.

    `recall.search.ranking.row_memory` turns it into a `Memory`.

    Attributes:
        id, conversation_id, user_message, ai_response, created_at, metadata, kind: as stored.
        distance: cosine distance to the query vector; None where there was no vector.
        bm25: the keyword score; None outside keyword search.
    """

    distance: float | None
    bm25: float | None


TERM_COLUMNS = ("id", "bm25", "matched", "term_idf", "unheld_idf", "memories")
"""The columns of a row of `recall.search_terms` (migration 0014) as the keyword side's statement
reads it, in order: a memory holding a query term (its BM25 and the terms' numbers, 1-based) or,
with `id` None, the query terms' idf (0 for a term no memory holds), the idf such a term would have,
and the number of memories they were counted over (`recall.bm25_idf`, migration 0033). Read as
tuples, looked up by memory in `recall.search.assembly.KeywordSide`."""

DETAIL_COLUMNS = (
    "id", "conversation_id", "user_message", "ai_response", "created_at", "metadata", "kind",
    "distance", "embedding", "doc_len", "prev_id", "prev_distance", "next_id", "next_distance",
)  # fmt: skip
"""The columns of a row of `recall.search_details` (migration 0014), in order: a memory as
stored with its distance to the query, its vector (None unless asked for), its number of
lexemes (None before it was counted), and the turn before and after it in its conversation
(id and distance; None where there is none). Read as tuples, made `CandidateRow`s once picked
(`recall.search.assembly.assemble`)."""

HELD_COLUMNS = (
    "id", "version", "conversation_id", "user_message", "ai_response", "created_at", "metadata",
    "kind", "embedding", "doc_len", "holds", "content_hash", "terms", "boosts",
)  # fmt: skip
"""The columns of a row of `recall.held_rows` (migrations 0034, 0036), in order: a memory's id,
row version, what a search reads of it (the metadata as JSON text, decoded only for a candidate),
its lexemes and the boost of each. Read as tuples, held by `recall.store.held`."""

SCOPED_COLUMNS = ("part", "near", *TERM_COLUMNS, *DETAIL_COLUMNS[1:])
"""The columns of a row of `recall.search_scoped` (migration 0021), in order: by `part`, the
terms' statistics (0) or a memory holding a query term (1), the columns of a `TERM_COLUMNS` row,
or a candidate's details (2), those of a `DETAIL_COLUMNS` row, with `near` its place among the
nearest (1-based; None when only BM25 brought it). Its rows stay tuples and are split into the
two rows they stand for (`recall.search.assembly.split_scoped`)."""


@dataclass(slots=True)
class CandidateRow(StoredRow):
    """One candidate of a search, as the second stage sees it (`assemble`).

    Attributes:
        id, conversation_id, user_message, ai_response, created_at, metadata, kind: as stored.
        distance: cosine distance to the query vector.
        bm25: its BM25 for the query (0 when it holds no query term).
        doc_len: its number of lexemes.
        matched: the query terms it holds, as numbers (1-based) into `term_idf`.
        prev_*, next_*: the distance, terms and BM25 of the turn before and after it in its
            conversation (None, empty and 0 where there is none).
        term_idf: each query term's idf among the user's memories (0 for a term none holds).
        unheld_idf: the idf of a term none of them holds (the most a term weighs).
        memories: the user's number of memories.
    """

    distance: float
    bm25: float
    doc_len: int
    matched: list[int]
    prev_distance: float | None
    prev_matched: list[int]
    prev_bm25: float
    next_distance: float | None
    next_matched: list[int]
    next_bm25: float
    term_idf: list[float]
    unheld_idf: float
    memories: float


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
class HeldState:
    """`held_state`: a user's stamp, each memory's version unless it is the one given, their
    count and mean length (None: none kept) and each word's lexeme ("": none; None: several)."""

    stamp: int
    ids: list[UUID] | None
    versions: list[int] | None
    lexemes: list[str | None]
    memories: float | None
    avgdl: float | None


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
    `judging_sources`: a memory a turn was given."""

    user_id: str
    id: UUID
    user_message: str
    ai_response: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JudgeRow:
    """`judging_batch`: a memory not judged by the current rule (`recall.db.judge_stored`), with its
    number of lexemes before and its kind."""

    user_id: str
    id: UUID
    user_message: str
    ai_response: str
    metadata: dict[str, Any]
    doc_len: int
    kind: str


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
class StoreRankedRow(StoreItemRow):
    """An item as RecallStore's keyword and hybrid search reads it (`store_search_ranked`):
    `score` is its BM25 (None: it holds no query word); `distance` its best vector's cosine
    distance to the query, and `vector_rank` and `keyword_rank` its place (from 0) among the
    first `SearchPlan.candidates` nearest and best by BM25 (None: not in that list)."""

    distance: float | None = None
    vector_rank: int | None = None
    keyword_rank: int | None = None


@dataclass(frozen=True, slots=True)
class ShardResult:
    """One shard's outcome of a command run on every shard (Citus' run_command_on_shards)."""

    shardid: int
    success: bool
    result: str
