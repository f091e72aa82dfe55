"""Shared fixtures: a real PostgreSQL + pgvector (the embedded server unless
RECALL_TEST_DATABASE_URL points at another), one fresh database per test session."""

from __future__ import annotations

import json
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import AsyncConnection, sql
from psycopg.conninfo import make_conninfo

from recall.config import Settings
from recall.db.embedded import EmbeddedServer
from recall.db.pool import connect_once
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA_DIR = ROOT / ".recall" / "test-pgdata"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for servers the tests start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def server_url() -> str:
    """URL of the server the tests use (its maintenance database)."""
    url = os.environ.get("RECALL_TEST_DATABASE_URL")
    if url:
        return url
    return EmbeddedServer(TEST_DATA_DIR).start(stop_at_exit=True)


class Databases:
    """Creates throw-away databases on the test server."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.created: list[str] = []

    async def create(self, prefix: str = "recall_test") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        conn = await connect_once(self.server_url)
        try:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        finally:
            await conn.close()
        self.created.append(name)
        return make_conninfo(self.server_url, dbname=name)

    async def drop_all(self) -> None:
        conn = await connect_once(self.server_url)
        try:
            for name in self.created:
                await conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        finally:
            await conn.close()


@pytest.fixture(scope="session")
async def databases(server_url: str) -> AsyncIterator[Databases]:
    dbs = Databases(server_url)
    yield dbs
    await dbs.drop_all()


@pytest.fixture(scope="session")
async def database_url(databases: Databases) -> str:
    """A database shared by the session's store tests (each test uses its own user ids)."""
    return await databases.create()


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, embedding_cache_ttl=0)


@pytest.fixture(scope="session")
async def store(settings: Settings) -> AsyncIterator[MemoryStore]:
    """A store on the session database with the deterministic 64-dim fake embedder."""
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as s:
        yield s


@pytest.fixture(scope="session")
async def model_store(databases: Databases) -> AsyncIterator[MemoryStore]:
    """A store with the real all-MiniLM-L6-v2 model, in its own database."""
    url = await databases.create("recall_model")
    async with MemoryStore.connect(Settings(database_url=url)) as s:
        yield s


@pytest.fixture
def user() -> str:
    """A user id no other test uses."""
    return f"user-{uuid.uuid4().hex[:12]}"


async def explain_indexed_search(conn: AsyncConnection[Any], params: dict[str, Any]) -> str:
    """EXPLAIN (FORMAT JSON) of the statement `recall.search_indexed` runs for
    `params["user_id"]` (migration 0010), under the settings the function sets, as text."""
    cur = await conn.execute(b"SELECT recall.search_indexed_sql(%s)", [params["user_id"]])
    row = await cur.fetchone()
    assert row is not None
    # the function passes its arguments as $1-$4 (EXECUTE ... USING)
    names = {"1": "query", "2": "candidates", "3": "max_distance", "4": "limit"}
    statement = re.sub(r"\$([1-4])\b", lambda m: f"%({names[m.group(1)]})s", str(row[0]))
    async with conn.transaction():
        await conn.execute(
            b"SELECT set_config('hnsw.ef_search', %s, true),"
            b" set_config('enable_sort', 'off', true)",
            [str(params["candidates"])],
        )
        cur = await conn.execute(
            b"EXPLAIN (FORMAT JSON) " + statement.encode(), params, prepare=False
        )
        return json.dumps([r[0] for r in await cur.fetchall()])
