"""Vectors stay inside their rows (migration 0006, decision 0008): the exact search reads
every vector of a user, and a vector moved out of line costs a TOAST lookup per row."""

import random
from typing import Any

import numpy as np
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection

from recall.config import Settings
from recall.db.migrate import apply_migrations, bind_embedding_space, load_migrations
from recall.db.pool import connect_once
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

DIMS = 384  # all-MiniLM-L6-v2: 1,544 bytes, the largest value of a memory's row


async def embedding_storage(conn: AsyncConnection[Any]) -> str:
    """The storage mode of recall.memories.embedding ('m' main, 'e' external)."""
    cur = await conn.execute(
        b"SELECT attstorage FROM pg_attribute"
        b" WHERE attrelid = 'recall.memories'::regclass AND attname = 'embedding'"
    )
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def out_of_line(conn: AsyncConnection[Any], column: str = "embedding") -> tuple[int, int]:
    """(values of `column` stored in the TOAST table, all rows), read as the owner."""
    cur = await conn.execute(
        f"SELECT count(*) FILTER (WHERE pg_column_toast_chunk_id({column}) IS NOT NULL),"  # noqa: S608
        " count(*) FROM recall.memories"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def long_text(rng: random.Random, words: int = 120) -> str:
    """A chat message of a few hundred characters that compresses poorly."""
    return " ".join(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(words)
    )


async def test_a_long_memory_keeps_its_vector_in_the_row(databases: Databases) -> None:
    url = await databases.create()
    rng = random.Random(6)
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(DIMS)) as store:
        await store.add_turns(
            {"user_id": "long", "user_message": long_text(rng), "ai_response": long_text(rng)}
            for _ in range(20)
        )
        hits = await store.search("long", "anything", similarity_threshold=0.0, limit=3)
        assert len(hits) == 3
    conn = await connect_once(url)
    try:
        assert await embedding_storage(conn) == "m"
        assert await out_of_line(conn) == (0, 20)
        assert await out_of_line(conn, "fts") == (0, 20)  # the keyword search reads it too
        assert (await out_of_line(conn, "ai_response"))[0] > 0  # the texts went out instead
    finally:
        await conn.close()


async def test_upgrades_move_stored_vectors_into_their_rows(databases: Databases) -> None:
    url = await databases.create()
    rng = random.Random(7)
    before_0006 = [m for m in load_migrations() if m.version < 6]
    conn = await connect_once(url)
    try:
        await apply_migrations(conn, before_0006)
        await register_vector_async(conn)
        await bind_embedding_space(conn, "fake-hash-384", DIMS)
        # the column as bind_embedding_space left it before 0006: pgvector's default storage
        await conn.execute(
            b"ALTER TABLE recall.memories ALTER COLUMN embedding SET STORAGE EXTERNAL"
        )
        vectors = np.random.default_rng(7).normal(size=(30, DIMS)).astype(np.float32)
        for i, vector in enumerate(vectors):
            await conn.execute(
                b"INSERT INTO recall.memories"
                b" (user_id, user_message, ai_response, content_hash, embedding, embedding_model)"
                b" VALUES ('u', %s, %s, %s, %s, 'fake-hash-384')",
                (long_text(rng), long_text(rng), i.to_bytes(4, "big"), vector),
            )
        await conn.commit()
        cur = await conn.execute(b"SELECT id, embedding, fts, doc_len FROM recall.memories")
        stored = {r[0]: r[1:] for r in await cur.fetchall()}
        assert await out_of_line(conn) == (30, 30)  # the texts are long enough to push it out

        # 0006, 0007 (which keeps fts and doc_len as they are) and every later migration
        assert await apply_migrations(conn) == [
            m.version for m in load_migrations() if m.version >= 6
        ]

        assert await embedding_storage(conn) == "m"
        assert await out_of_line(conn) == (0, 30)
        assert await out_of_line(conn, "fts") == (0, 30)
        cur = await conn.execute(b"SELECT id, embedding, fts, doc_len FROM recall.memories")
        after = {r[0]: r[1:] for r in await cur.fetchall()}
        assert after.keys() == stored.keys()
        for key, (vector, fts, doc_len) in stored.items():
            assert np.array_equal(after[key][0].to_numpy(), vector.to_numpy())
            assert after[key][1:] == (fts, doc_len)
        cur = await conn.execute(b"SELECT memory_count FROM recall.users WHERE user_id = 'u'")
        assert await cur.fetchone() == (30,)
    finally:
        await conn.close()
