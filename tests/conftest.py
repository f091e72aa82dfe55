"""Shared fixtures: a real PostgreSQL + pgvector (the embedded server unless
RECALL_TEST_DATABASE_URL points at another), one fresh database per test session.

With RECALL_TEST_CITUS=1 (`make test-citus`, scripts/citus-cluster) the server is a Citus
coordinator and RECALL_TEST_CITUS_WORKERS lists its workers: each new database is made on every
node, with citus and pgvector, and its workers are added to its coordinator. Only tests marked
`citus` (CITUS_MODULES, tests/citus/) are meant to run then; tests/citus/ is not collected
without a cluster."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from recall.config import Settings, process_settings
from recall.db.embedded import EmbeddedServer
from recall.db.pool import connect_once
from recall.nodes.blocking import run_blocking
from recall.store import MemoryStore
from recall.store.shared import close_default_store
from recall.testing import FakeEmbeddings

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA_DIR = ROOT / ".recall" / "test-pgdata"
CITUS = os.environ.get("RECALL_TEST_CITUS") == "1"
DROPPERS = 4  # databases dropped at once when the session ends
CITUS_WORKERS = [u for u in os.environ.get("RECALL_TEST_CITUS_WORKERS", "").split(",") if u]

# the existing integration tests that also run on a Citus cluster (marked `citus`)
CITUS_MODULES = {
    "test_store.py",
    "test_erasure.py",
    "test_isolation.py",
    "test_row_level_security.py",
    "test_reembed.py",
    "test_nodes.py",
    "test_retrieval.py",
    "test_exact_search.py",
    "test_conversations.py",
    "test_text_search_columns.py",
    "test_hostile_input.py",
    "test_store_indexes.py",
    "test_store_calibration.py",
    "test_retention.py",
    "test_provenance.py",
    "test_own_words.py",
}

# ... except these, which check how plain PostgreSQL runs a statement, not what it returns:
# EXPLAIN plans and index statistics read on the coordinator (Citus runs the statement on a
# worker), the generic plans and the policies' InitPlan that migration 0013 turns off on Citus
PLAIN_ONLY = {
    "test_naive_filtered_query_uses_the_global_index_and_loses_results",
    "test_search_functions_plan_once_for_every_user",
    "test_the_policy_reads_the_key_once_per_query",
    "test_an_indexed_search_is_prepared_once_per_index",
}

collect_ignore = [] if CITUS else ["citus"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if item.path.parent.name == "citus" or (
            item.path.name in CITUS_MODULES and name not in PLAIN_ONLY
        ):
            item.add_marker(pytest.mark.citus)


@pytest.fixture(autouse=True)
def fresh_process_settings() -> Any:
    """Each test is a process of its own as far as settings go: the process's settings
    (`recall.config.process_settings`, read once) are read again from the environment its
    `monkeypatch.setenv` calls made, and forgotten after it."""
    process_settings.cache_clear()
    yield
    process_settings.cache_clear()


def quiet_cli_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process, the CLI must not configure logging for the whole test session (loggers
    cached under its configuration would escape the other tests' capture_logs()): keep its
    effect (warnings and errors only), without caching. The CLI tests' runners call it."""
    monkeypatch.setattr(
        "recall.cli.configure_logging",
        lambda **_kwargs: structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
        ),
    )


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

    @property
    def servers(self) -> list[str]:
        """The test server, and on Citus its workers."""
        return [self.server_url, *(CITUS_WORKERS if CITUS else [])]

    async def create(self, prefix: str = "recall_test") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        for server in self.servers:
            conn = await connect_once(server)
            try:
                await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            finally:
                await conn.close()
        self.created.append(name)
        url = make_conninfo(self.server_url, dbname=name)
        if CITUS:
            await add_citus_nodes(url, [make_conninfo(w, dbname=name) for w in CITUS_WORKERS])
        return url

    async def drop_all(self) -> None:
        """Drop every database this session made, `DROPPERS` at a time (one after the other, a
        session's hundred-odd drops took 20 s of its teardown)."""
        for server in self.servers:
            names = iter(self.created)  # shared: each dropper takes the next name
            await asyncio.gather(*(_drop_each(server, names) for _ in range(DROPPERS)))


async def _drop_each(server: str, names: Iterator[str]) -> None:
    conn = await connect_once(server)
    try:
        for name in names:
            statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            await conn.execute(statement.format(sql.Identifier(name)))
    finally:
        await conn.close()


async def add_citus_nodes(
    coordinator: str, workers: list[str], *, only_workers: bool = False
) -> None:
    """Citus and pgvector in a new database on every node, the workers added to the
    coordinator (Citus keeps its node list per database); `only_workers` for a database whose
    coordinator is set up already."""
    for url in workers if only_workers else [coordinator, *workers]:
        conn = await connect_once(url)
        try:
            await conn.execute(b"CREATE EXTENSION IF NOT EXISTS citus")
            await conn.execute(b"CREATE EXTENSION IF NOT EXISTS vector")
        finally:
            await conn.close()
    conn = await connect_once(coordinator)
    try:
        if not only_workers:
            info = conninfo_to_dict(coordinator)
            await conn.execute(
                b"SELECT citus_set_coordinator_host(%s, %s)", (info["host"], int(str(info["port"])))
            )
        for url in workers:
            info = conninfo_to_dict(url)
            await conn.execute(
                b"SELECT citus_add_node(%s, %s)", (info["host"], int(str(info["port"])))
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
    """A store with the real default model (bge-small-en-v1.5, no model configured), in its
    own database."""
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


@pytest.fixture
async def process_database(
    databases: Databases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    """A fresh database for what a process opens from the environment (the nodes' and the
    middleware's process-wide stores, `MemoryStore.connect()` with no settings), with its own
    queue file; the default nodes are made anew, and the process-wide stores are closed after
    the test (this loop's and recall's own)."""
    created = await databases.create("recall_process")
    monkeypatch.setenv("RECALL_DATABASE_URL", created)
    monkeypatch.setenv("RECALL_QUEUE_PATH", str(tmp_path / "outbox.sqlite3"))
    monkeypatch.delenv("RECALL_CHAT_MODEL", raising=False)
    # the package's `store_memories` is the node; the module is reached by its import name
    for module, name in (("retrieve", "_default_retrieve"), ("store_memories", "_default_store")):
        monkeypatch.setattr(importlib.import_module(f"recall.nodes.{module}"), name, None)
    yield created
    await close_default_store()
    await asyncio.to_thread(run_blocking, close_default_store)
