"""A real streaming replica: a primary and a standby made from it with `pg_basebackup -R`
(benchmarks/harness/standby.py). Searches run on the standby, writes on the primary; what a
user sees while the standby lags, and the store reading its own writes (decision 0021)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from harness.standby import StreamingPair, missing_tools
from structlog.testing import capture_logs

from recall.config import Settings
from recall.memory import Memory
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

pytestmark = pytest.mark.slow

DOG = ("I adopted a dog named Max", "Max is a lovely name!")
CAT = ("I adopted a cat named Tom", "Tom is a lovely name!")


@pytest.fixture(scope="module")
def pair() -> Iterator[StreamingPair]:
    """A primary and its standby, for this module only."""
    reason = missing_tools()
    if reason is not None:
        pytest.skip(f"no streaming replica can be made: {reason}")
    servers = StreamingPair(log_statements=True)
    try:
        servers.start()
        yield servers
    finally:
        servers.close()


def _settings(pair: StreamingPair) -> Settings:
    return Settings(
        database_url=pair.primary_url,
        read_database_url=pair.standby_url,
        embedding_cache_ttl=0,
        similarity_threshold=0.0,
    )


@pytest.fixture(scope="module")
async def writer(pair: StreamingPair) -> AsyncIterator[MemoryStore]:
    """The store that writes (the server process whose writer stored the turn)."""
    # migrate on the primary first: the read pool's connections need the replayed schema
    async with MemoryStore.connect(
        Settings(database_url=pair.primary_url), embeddings=FakeEmbeddings(64)
    ):
        pass
    await pair.wait_replayed()
    async with MemoryStore.connect(_settings(pair), embeddings=FakeEmbeddings(64)) as store:
        yield store


@pytest.fixture(scope="module")
async def other(writer: MemoryStore, pair: StreamingPair) -> AsyncIterator[MemoryStore]:
    """A second store on the same pair: another process, which did not write."""
    async with MemoryStore.connect(_settings(pair), embeddings=FakeEmbeddings(64)) as store:
        yield store


@pytest.fixture
def user() -> str:
    return f"user-{uuid.uuid4().hex[:12]}"


def _texts(hits: list[Memory]) -> set[str]:
    return {hit.user_message for hit in hits}


class LogTail:
    """What a server logs from now on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = path.stat().st_size

    def read(self) -> str:
        with self.path.open("rb") as file:
            file.seek(self.start)
            return file.read().decode(errors="replace")


async def test_searches_run_on_the_standby_and_writes_on_the_primary(
    pair: StreamingPair, writer: MemoryStore, other: MemoryStore, user: str
) -> None:
    await writer.add_turn(user, *DOG)
    await pair.wait_replayed()
    async with other.read_pool.connection() as conn:
        cur = await conn.execute(b"SELECT pg_is_in_recovery()")
        assert await cur.fetchone() == (True,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await conn.execute(b"CREATE TABLE recall.written_on_a_standby ()")
    async with other.pool.connection() as conn:
        cur = await conn.execute(b"SELECT pg_is_in_recovery()")
        assert await cur.fetchone() == (False,)

    standby, primary = LogTail(pair.log(pair.standby_dir)), LogTail(pair.log(pair.primary_dir))
    assert DOG[0] in _texts(await other.search(user, "dog Max"))  # hybrid: vectors and BM25
    assert DOG[0] in _texts(await other.keyword_search(user, "dog; Max"))
    assert [m.user_message for m in await other.recent(user)] == [DOG[0]]
    # the servers log every statement: the reads ran on the standby, none on the primary
    on_standby, on_primary = standby.read(), primary.read()
    assert on_standby.count("recall.search_exact(") == 1
    assert on_standby.count("recall.search_keyword(") == 2
    assert on_standby.count("ORDER BY created_at DESC, content_hash DESC") == 1  # recent
    assert "recall.search_" not in on_primary and "created_at DESC" not in on_primary


async def test_while_the_standby_lags_another_process_sees_the_old_state_then_converges(
    pair: StreamingPair, writer: MemoryStore, other: MemoryStore, user: str
) -> None:
    await writer.add_turn(user, *DOG)
    await pair.wait_replayed()
    await pair.set_replay(paused=True)
    try:
        await writer.add_turn(user, *CAT)
        # the writer reads its own write (from the primary: the standby is behind its write)
        with capture_logs() as events:
            assert _texts(await writer.search(user, "cat Tom")) == {CAT[0], DOG[0]}
        assert "store.replica.behind" in {e["event"] for e in events}
        # another process, which did not write, searches the standby: the turn is not there
        assert _texts(await other.search(user, "cat Tom")) == {DOG[0]}

        assert await writer.forget_user(user) == 2
        assert await writer.search(user, "cat Tom") == []
        assert await writer.recent(user) == []
        # ... and the erased turns are still found on the standby by the other process
        assert _texts(await other.search(user, "cat Tom")) == {DOG[0]}
    finally:
        await pair.set_replay(paused=False)
    await pair.wait_replayed()
    assert await other.search(user, "cat Tom") == []
    assert await other.recent(user) == []
    # caught up: the writer's reads are back on the standby, with no check left to make
    with capture_logs() as events:
        assert await writer.search(user, "cat Tom") == []
    assert "store.replica.behind" not in {e["event"] for e in events}
    assert user not in writer.core.fences


async def test_a_write_is_read_back_at_once_by_its_writer(
    pair: StreamingPair, writer: MemoryStore, user: str
) -> None:
    for n in range(20):
        await writer.add_turn(user, f"turn number {n} about my dog", "noted")
        assert len(await writer.keyword_search(user, "dog", limit=50)) == n + 1
        assert len(await writer.recent(user, n=50)) == n + 1
    await pair.wait_replayed()
    assert len(await writer.recent(user, n=50)) == 20
    assert user not in writer.core.fences


async def test_searches_still_answer_with_the_primary_stopped(
    pair: StreamingPair, writer: MemoryStore, other: MemoryStore, user: str
) -> None:
    await writer.add_turn(user, *DOG)
    await pair.wait_replayed()
    pair.stop_server(pair.primary_dir)
    try:
        assert _texts(await other.search(user, "dog Max")) == {DOG[0]}
        assert _texts(await writer.search(user, "dog Max")) == {DOG[0]}  # caught up: standby
        assert [m.user_message for m in await other.recent(user)] == [DOG[0]]
    finally:
        pair.start_server(pair.primary_dir)
    # connections used in the last 2 s are lent unchecked (RecentUseCheck): check them now
    await writer.pool.check()
    await writer.add_turn(user, *CAT)
    assert _texts(await writer.search(user, "cat Tom")) == {CAT[0], DOG[0]}
