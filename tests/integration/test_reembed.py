from pgvector.psycopg import register_vector_async

from recall.config import Settings
from recall.db.pool import connect_once
from recall.db.reembed import reembed
from recall.embeddings import Embedder
from recall.errors import EmbeddingMismatchError
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases
from tests.integration.test_vector_storage import embedding_storage


class Renamed(FakeEmbeddings):
    def __init__(self, dims: int, name: str) -> None:
        super().__init__(dims)
        self.model_name = name


async def test_reembed_to_another_dimension_keeps_every_memory(databases: Databases) -> None:
    url = await databases.create()
    settings = Settings(database_url=url, user_index_threshold=50)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as old:
        await old.add_turns(
            {"user_id": f"u{i % 3}", "user_message": f"apples {i}", "ai_response": "ok"}
            for i in range(200)
        )
        assert len(await old.optimize()) == 3
        before = {m.id for u in ("u0", "u1", "u2") for m in await old.recent(u, 1000)}

    try:
        await MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)).open()
        raise AssertionError("a store with another model must refuse to open")
    except EmbeddingMismatchError:
        pass

    conn = await connect_once(url)
    await register_vector_async(conn)
    try:
        assert await reembed(conn, Embedder(FakeEmbeddings(32)), batch=64) == 200
        # the new column keeps vectors in the row, as the old one did (migration 0006)
        assert await embedding_storage(conn) == "m"
    finally:
        await conn.close()

    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)) as new:
        after = {m.id for u in ("u0", "u1", "u2") for m in await new.recent(u, 1000)}
        assert after == before
        hits = await new.search("u1", "apples 1", similarity_threshold=0.0)
        assert hits and hits[0].user_message.startswith("apples")
        assert len(await new.optimize()) == 3  # per-user indexes rebuilt on the new column


async def test_reembed_same_dimension_in_place(databases: Databases) -> None:
    url = await databases.create()
    settings = Settings(database_url=url)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(16)) as old:
        await old.add_turn("u", "pears are green", "ok")
    conn = await connect_once(url)
    await register_vector_async(conn)
    try:
        assert await reembed(conn, Embedder(Renamed(16, "other-16"))) == 1
        assert await reembed(conn, Embedder(Renamed(16, "other-16"))) == 0  # nothing left
    finally:
        await conn.close()
    async with MemoryStore.connect(settings, embeddings=Renamed(16, "other-16")) as new:
        assert len(await new.search("u", "pears", similarity_threshold=0.0)) == 1
