"""Every statement that returns rows names its columns as the fields of its row type, in
order, so `recall.db.sql.fetch_all` builds typed rows by name (and, the order being the same,
by position, which is faster) and never puts a value in another field."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import pytest
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from recall.db.sql import _row_factory, fetch_tuples, query
from recall.errors import StoreError
from recall.memory import make_turn
from recall.rows import (
    SCOPED_COLUMNS,
    AddedMemory,
    ChatSummary,
    EmbeddingSpace,
    InsertedMemory,
    MemoryRow,
    NearestSummary,
    PendingConversation,
    PendingTurn,
    Progress,
    ReembedRow,
    StoredRow,
    StoreStats,
    UserBucket,
    UserPlan,
    VectorExtension,
)
from recall.store import MemoryStore

Params = Callable[[dict[str, Any]], dict[str, Any]]


def _new_memory(k: dict[str, Any]) -> dict[str, Any]:
    return {
        "user_id": k["user_id"],
        "conversation_id": "c1",
        "user_message": "a new row, rolled back",
        "ai_response": "ok",
        "created_at": None,
        "metadata": Jsonb({}),
        "content_hash": b"rolled back",
        "embedding": k["query"],
        "embedding_model": "fake",
        "kind": "turn",
    }


# (block, row type, its parameters from the seeded user's values)
CASES: list[tuple[str, type[Any], Params]] = [
    ("search_exact", MemoryRow, lambda k: {**k, "max_distance": 2.0, "limit": 5}),
    (
        "search_indexed",
        MemoryRow,
        lambda k: {**k, "max_distance": 2.0, "limit": 5, "candidates": 40},
    ),
    (
        "search_keyword",
        MemoryRow,
        lambda k: {
            **k, "tsquery": "apple", "words": ["apple"], "limit": 5, "conversation_id": None
        },
    ),
    ("recent", MemoryRow, lambda k: {"user_id": k["user_id"], "limit": 5}),
    ("get_memory", MemoryRow, lambda k: {"user_id": k["user_id"], "id": k["id"]}),
    (
        "conversation_recent",
        MemoryRow,
        lambda k: {"user_id": k["user_id"], "conversation_id": "c1", "kind": "turn", "limit": 5},
    ),
    ("add_memory", AddedMemory, _new_memory),
    ("insert_memory", InsertedMemory, _new_memory),
    ("user_plan", UserPlan, lambda k: {"user_id": k["user_id"]}),
    ("progress_get", Progress, lambda k: {"user_id": k["user_id"], "conversation_id": "c1"}),
    (
        "turns_after",
        PendingTurn,
        lambda k: {
            "user_id": k["user_id"],
            "conversation_id": "c1",
            "after_at": "0001-01-01T00:00:00+00:00",
            "after_id": "00000000-0000-0000-0000-000000000000",
            "limit": 5,
        },
    ),
    (
        "pending_conversations",
        PendingConversation,
        lambda k: {"user_id": k["user_id"], "conversation_id": None},
    ),
    ("nearest_summary", NearestSummary, lambda k: {"user_id": k["user_id"], "query": k["query"]}),
    ("chat_summary_get", ChatSummary, lambda k: {"user_id": k["user_id"], "conversation_id": "c1"}),
    ("stats", StoreStats, lambda k: {}),
    ("user_buckets", UserBucket, lambda k: {}),
    ("get_embedding_space", EmbeddingSpace, lambda k: {}),
    ("vector_extension", VectorExtension, lambda k: {}),
    ("reembed_in_place_batch", ReembedRow, lambda k: {"model_name": "another", "batch": 5}),
]  # fmt: skip


@pytest.fixture(scope="module")
async def seeded(store: MemoryStore) -> dict[str, Any]:
    """A user with two turns in conversation c1, one of them processed into a model-written
    memory, and a rolling summary: every case above has a row to return."""
    user = f"rows-{uuid.uuid4().hex[:12]}"
    first = await store.add_turn(user, "I baked an apple pie", "yum", conversation_id="c1")
    await store.add_turn(user, "and an apple tart", "yum", conversation_id="c1")
    through = (await store.conversations.pending_turns(user, "c1", 10))[0]
    memory = make_turn(user, "bakes apple pies", "", conversation_id="c1", kind="summary")
    [vector] = await store.embedder.embed_documents([memory.text])
    stored = await store.conversations.store_chunk(
        user, "c1", [memory], [vector], through=through, dedup_threshold=0.95
    )
    assert stored.last_memory_id is not None
    await store.conversations.set_chat_summary(
        user, "c1", "pies", last_memory_id=stored.last_memory_id
    )
    return {"user_id": user, "id": first.id, "query": await store.embedder.embed_query("apple")}


@pytest.mark.parametrize(("name", "row", "params"), CASES, ids=[c[0] for c in CASES])
async def test_the_columns_are_the_row_fields(
    store: MemoryStore, seeded: dict[str, Any], name: str, row: type[Any], params: Params
) -> None:
    async with store.connection(all_users=True) as conn, conn.transaction(force_rollback=True):
        cur = conn.cursor(row_factory=class_row(row))
        await cur.execute(query(name), params(seeded))
        assert cur.description is not None
        assert [c.name for c in cur.description] == [f.name for f in fields(row)]
        rows = await cur.fetchall()
    assert rows and all(isinstance(r, row) for r in rows)


async def test_the_scoped_rows_are_read_by_their_column_names(
    store: MemoryStore, seeded: dict[str, Any]
) -> None:
    """`recall.search_scoped`'s rows stay tuples (`fetch_tuples`), read by position once their
    columns are checked to be `SCOPED_COLUMNS`; a block whose columns are others is refused."""
    params = {
        "user_id": seeded["user_id"], "query": seeded["query"], "scope": 10, "candidates": 40,
        "indexed": False, "tsquery": "apple", "words": ["apple"], "near": 5, "best": 5,
        "vectors": False,
    }  # fmt: skip
    async with store.connection(all_users=True) as conn:
        rows = await fetch_tuples(conn, "search_scoped", params, SCOPED_COLUMNS, binary=True)
        assert {r[0] for r in rows} == {0, 1, 2}  # statistics, keyword hits, details
        assert all(len(r) == len(SCOPED_COLUMNS) for r in rows)
        with pytest.raises(StoreError, match="search_scoped returned the columns"):
            await fetch_tuples(conn, "search_scoped", params, SCOPED_COLUMNS[::-1])


def test_every_row_type_is_slotted_and_frozen_but_a_memorys() -> None:
    """A memory's rows (`StoredRow` and its kinds) are not frozen: a search makes dozens."""
    for _name, row, _params in CASES:
        assert row.__dataclass_params__.frozen != issubclass(row, StoredRow), row
        assert "__slots__" in vars(row), row


@dataclass(frozen=True, slots=True)
class _Pair:
    a: int
    b: str


@dataclass(frozen=True, slots=True)
class _Keyed:
    a: int
    b: str = field(kw_only=True)


@pytest.mark.parametrize(
    ("statement", "row", "expected"),
    [
        # the columns in field order: built by position
        (b"SELECT 1 AS a, 'x' AS b", _Pair, _Pair(a=1, b="x")),
        # in another order: by name
        (b"SELECT 'x' AS b, 1 AS a", _Pair, _Pair(a=1, b="x")),
        # a keyword-only field: by name
        (b"SELECT 1 AS a, 'x' AS b", _Keyed, _Keyed(1, b="x")),
    ],
)
async def test_rows_are_the_same_by_position_as_by_name(
    store: MemoryStore, statement: bytes, row: type[Any], expected: Any
) -> None:
    async with store.pool.connection() as conn:
        cur = conn.cursor(row_factory=_row_factory(row))
        await cur.execute(statement)
        assert await cur.fetchall() == [expected]
