"""Every variable in docs/configuration.md takes effect: one test per variable, each setting it
in the environment and watching the component that reads it (through `Settings.from_env()`,
the way an application gets its defaults) behave differently. A variable that is ignored
fails its test; a documented variable without a test fails `test_every_variable_has_a_test`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import IndexConfig, PutOp
from psycopg import AsyncConnection
from structlog.testing import capture_logs

from recall import RecallStore
from recall.config import Settings, parse_mode, process_settings
from recall.creation.consolidate import Consolidator
from recall.creation.extraction import RunnableExtractor
from recall.embeddings import MiniLMEmbeddings, configured_embeddings
from recall.errors import ConfigError, InvalidInputError, MigrationError
from recall.limits import MAX_LIMIT
from recall.metrics import AlertRules, RetrievalMetrics
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.search.judging import RULE
from recall.search.provenance import Provenance
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases
from tests.fakes import FailingStore, provider

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = re.compile(r"^\| `(RECALL_[A-Z_]+)`", re.MULTILINE)


class CountingEmbeddings(FakeEmbeddings):
    """The fake model, recording what it was asked to embed."""

    def __init__(self, dimensions: int = 64) -> None:
        super().__init__(dimensions)
        self.queries: list[str] = []
        self.batches: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return super().embed_query(text)


def config(user: str, thread: str = "thread-1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "langgraph_auth_user": {"identity": user}}}


def ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


class ProcessEnv:
    """`monkeypatch`'s `setenv` and `delenv`, each making the process read its settings again
    (`recall.config.process_settings`, read once): a variable set here is seen as a process
    started with it would see it."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self._patch = patch

    def setenv(self, name: str, value: str) -> None:
        self._patch.setenv(name, value)
        process_settings.cache_clear()

    def delenv(self, name: str, raising: bool = True) -> None:
        self._patch.delenv(name, raising)
        process_settings.cache_clear()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> ProcessEnv:
    """An environment pointing at the session database, with no other RECALL_* variable."""
    patch = ProcessEnv(monkeypatch)
    for name in [n for n in os.environ if n.startswith("RECALL_") or n == "DATABASE_URL"]:
        patch.delenv(name)
    patch.setenv("RECALL_DATABASE_URL", database_url)
    return patch


async def open_store(embeddings: FakeEmbeddings | None = None) -> MemoryStore:
    """A store with settings from the environment (and the fake model)."""
    return await MemoryStore.connect(embeddings=embeddings or FakeEmbeddings(64))


@asynccontextmanager
async def await_store() -> AsyncIterator[MemoryStore]:
    """A store opened now, with the settings the environment holds now."""
    store = await open_store()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def env_store(env: ProcessEnv) -> AsyncIterator[MemoryStore]:
    store = await open_store()
    yield store
    await store.close()


async def add_facts(store: MemoryStore, user: str, count: int) -> None:
    for i in range(count):
        await store.add_turn(user, f"my dog Max fact number {i}", f"noted dog fact {i}")


# -- where the data is ---------------------------------------------------------------------


async def test_recall_database_url(env: ProcessEnv, database_url: str) -> None:
    async with MemoryStore.connect(embeddings=FakeEmbeddings(64)) as store:
        assert store.database is not None and store.database.url == database_url
        assert store.database.embedded is None  # no embedded server was started


async def test_database_url_fallback(env: ProcessEnv, database_url: str) -> None:
    env.delenv("RECALL_DATABASE_URL")
    env.setenv("DATABASE_URL", database_url)
    async with MemoryStore.connect(embeddings=FakeEmbeddings(64)) as store:
        assert store.database is not None and store.database.url == database_url


async def test_recall_read_database_url(env: ProcessEnv, database_url: str) -> None:
    env.setenv("RECALL_READ_DATABASE_URL", database_url)
    async with MemoryStore.connect(embeddings=FakeEmbeddings(64)) as store:
        assert store.read_pool is not store.pool


def run_cli(*args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    """`recall ARGS` in a new process (the CLI configures logging for its whole process)."""
    return subprocess.run(
        [sys.executable, "-m", "recall", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env_vars},
        timeout=120,
        check=True,
    )


def test_recall_data_dir(env: ProcessEnv, tmp_path: Path) -> None:
    env.delenv("RECALL_DATABASE_URL")
    out = run_cli("db", "status", RECALL_DATA_DIR=str(tmp_path / "elsewhere"))
    assert str(tmp_path / "elsewhere") in out.stdout


async def test_recall_embedded_shared_buffers_mb(env: ProcessEnv, tmp_path: Path) -> None:
    from recall.db.pool import locate_database

    env.delenv("RECALL_DATABASE_URL")
    env.setenv("RECALL_DATA_DIR", str(tmp_path / "pgdata"))
    env.setenv("RECALL_EMBEDDED_SHARED_BUFFERS_MB", "48")
    database = await locate_database(Settings.from_env(), stop_at_exit=False)
    try:
        conn = await AsyncConnection.connect(database.url, autocommit=True)
        async with conn:
            cur = await conn.execute(b"SHOW shared_buffers")
            row = await cur.fetchone()
        assert row is not None and row[0] == "48MB"
    finally:
        assert database.embedded is not None
        await database.embedded.astop()


async def test_recall_queue_path(
    env: ProcessEnv, env_store: MemoryStore, user: str, tmp_path: Path
) -> None:
    queue = tmp_path / "queue" / "outbox.sqlite3"
    env.setenv("RECALL_QUEUE_PATH", str(queue))
    node = create_store_memories_node(env_store)
    turn = {"messages": [HumanMessage("I moved to Berlin"), AIMessage("Welcome to Berlin!")]}
    await node(turn, config(user))
    assert queue.exists()


async def test_recall_auto_migrate(env: ProcessEnv, databases: Databases) -> None:
    env.setenv("RECALL_DATABASE_URL", await databases.create("recall_nomigrate"))
    env.setenv("RECALL_AUTO_MIGRATE", "false")
    with pytest.raises(MigrationError, match="recall migrate"):
        await open_store()


async def test_recall_auto_migrate_holds_for_recall_store_too(
    env: ProcessEnv, databases: Databases
) -> None:
    """Both stores open their database one way (recall.db.opening): RecallStore migrated
    whatever the setting said."""
    env.setenv("RECALL_DATABASE_URL", await databases.create("recall_nomigrate_basestore"))
    env.setenv("RECALL_AUTO_MIGRATE", "false")
    with pytest.raises(MigrationError, match="recall migrate"):
        async with RecallStore.connect():
            pass


async def test_recall_connection_pool_size(env: ProcessEnv) -> None:
    env.setenv("RECALL_CONNECTION_POOL_SIZE", "3")
    async with MemoryStore.connect(embeddings=FakeEmbeddings(64)) as store:
        assert store.pool.max_size == 3


async def test_recall_held_memories_mb(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_HELD_MEMORIES_MB", "0")
    async with await_store() as store:
        await store.add_turn(user, "I keep bees on the roof", "How many hives?")
        async with store.pool.connection() as conn:
            held, _ = await store.core.held.sync(conn, user)
        # read for the search, not kept for the next
        assert len(held.rows) == 1 and store.core.held.get(user) is None


# -- the model ----------------------------------------------------------------------------


def test_recall_embedding_model(env: ProcessEnv) -> None:
    env.setenv("RECALL_EMBEDDING_MODEL", "no-such-model")
    with pytest.raises(ConfigError, match="RECALL_EMBEDDING_MODEL='no-such-model'"):
        configured_embeddings(Settings.from_env())


def test_recall_embedding_backend(env: ProcessEnv) -> None:
    env.setenv("RECALL_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
    env.setenv("RECALL_EMBEDDING_BACKEND", "torch")
    model = configured_embeddings(Settings.from_env())
    assert isinstance(model, MiniLMEmbeddings) and model.backend == "torch"


def test_recall_model_cache_dir(env: ProcessEnv, tmp_path: Path) -> None:
    env.setenv("RECALL_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
    env.setenv("RECALL_MODEL_CACHE_DIR", str(tmp_path / "models"))
    model = configured_embeddings(Settings.from_env())
    assert isinstance(model, MiniLMEmbeddings) and model.cache_dir == tmp_path / "models"


async def query_embeddings(question: str, times: int) -> list[str]:
    """The queries the model embedded while a store (settings from the environment) searched
    `question` `times` times."""
    model = CountingEmbeddings()
    async with await open_store(model) as store:
        for _ in range(times):
            await store.search("someone", question, mode="semantic")
    return model.queries


async def test_recall_embedding_cache_ttl(env: ProcessEnv) -> None:
    env.setenv("RECALL_EMBEDDING_CACHE_TTL", "0")
    assert await query_embeddings("the same question", 2) == ["the same question"] * 2


async def test_recall_embedding_cache_size(env: ProcessEnv) -> None:
    env.setenv("RECALL_EMBEDDING_CACHE_SIZE", "0")
    assert await query_embeddings("the same question", 2) == ["the same question"] * 2


async def test_the_query_cache_is_on_by_default(env: ProcessEnv) -> None:
    """The control for the two tests above: with the defaults, one embedding."""
    assert await query_embeddings("the same question", 2) == ["the same question"]


async def test_recall_embedding_batch_size(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_EMBEDDING_BATCH_SIZE", "2")
    model = CountingEmbeddings()
    turns = [
        {"user_id": user, "user_message": f"fact {i} here", "ai_response": "ok"} for i in range(5)
    ]
    async with await open_store(model) as store:
        await store.add_turns(turns)
    assert model.batches and max(model.batches) == 2


async def test_recall_max_query_length(env: ProcessEnv) -> None:
    env.setenv("RECALL_MAX_QUERY_LENGTH", "10")
    assert await query_embeddings("a question much longer than ten", 1) == ["a question"]


# -- what is stored -----------------------------------------------------------------------


async def test_recall_max_message_length(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_MAX_MESSAGE_LENGTH", "12")
    async with await open_store() as store:
        memory = await store.add_turn(user, "a rather long message indeed", "short reply")
    assert memory.user_message == "a rather lon"


async def test_recall_max_metadata_bytes(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_MAX_METADATA_BYTES", "20")
    async with await open_store() as store:
        with pytest.raises(InvalidInputError, match="metadata"):
            await store.add_turn(user, "hello there", "hi", metadata={"note": "x" * 40})


async def test_recall_min_message_length(
    env: ProcessEnv, env_store: MemoryStore, user: str, tmp_path: Path
) -> None:
    env.setenv("RECALL_MIN_MESSAGE_LENGTH", "50")
    env.setenv("RECALL_QUEUE_PATH", str(tmp_path / "q.sqlite3"))
    node = create_store_memories_node(env_store)
    with capture_logs() as logs:
        await node({"messages": [HumanMessage("I like tea"), AIMessage("Nice!")]}, config(user))
    assert [e.get("reason") for e in logs if e["event"] == "memory.write.skip"] == ["too_short"]
    assert await env_store.recent(user) == []


async def test_recall_filter_system_messages(
    env: ProcessEnv, env_store: MemoryStore, user: str, tmp_path: Path
) -> None:
    env.setenv("RECALL_QUEUE_PATH", str(tmp_path / "q.sqlite3"))
    turn = {
        "messages": [
            HumanMessage("Set my timezone to Lisbon"),
            SystemMessage("User timezone changed to Europe/Lisbon"),
            AIMessage("Done, your timezone is Lisbon now."),
        ]
    }
    await create_store_memories_node(env_store)(turn, config(user))  # default: filtered
    assert [m.user_message for m in await env_store.recent(user)] == ["Set my timezone to Lisbon"]
    env.setenv("RECALL_FILTER_SYSTEM_MESSAGES", "false")
    await create_store_memories_node(env_store)(turn, config(user))
    stored = {m.user_message: m for m in await env_store.recent(user)}
    assert set(stored) == {"Set my timezone to Lisbon", "User timezone changed to Europe/Lisbon"}
    system = stored["User timezone changed to Europe/Lisbon"]
    judged = {"recall": {"holds": "statement", "rule": RULE}}  # a note holds a statement
    assert system.ai_response == "" and system.metadata == {"source": "system_message", **judged}
    assert system.kind == "note"


async def test_recall_filter_error_responses(
    env: ProcessEnv, env_store: MemoryStore, user: str, tmp_path: Path
) -> None:
    env.setenv("RECALL_QUEUE_PATH", str(tmp_path / "q.sqlite3"))
    env.setenv("RECALL_FILTER_ERROR_RESPONSES", "false")
    turn = {"messages": [HumanMessage("What is my plan?"), AIMessage("Error: upstream timeout")]}
    await create_store_memories_node(env_store)(turn, config(user))
    assert [m.ai_response for m in await env_store.recent(user)] == ["Error: upstream timeout"]


# -- retrieval ----------------------------------------------------------------------------


async def test_recall_max_memories(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_MAX_MEMORIES", "5")
    env.setenv("RECALL_SIMILARITY_THRESHOLD", "0")
    async with await_store() as store:  # the store reads the settings; the node defers to it
        await add_facts(store, user, 6)
        out = await create_retrieve_memories_node(store)(ask("my dog Max fact"), config(user))
    assert len(out["retrieved_memories"]) == 5
    # issue 48: a limit the store would refuse at every search fails when the process starts,
    # instead of every retrieval being turned into "no memories"
    env.setenv("RECALL_MAX_MEMORIES", str(MAX_LIMIT + 1))
    with pytest.raises(ConfigError, match=f"RECALL_MAX_MEMORIES={MAX_LIMIT + 1} is invalid"):
        Settings.from_env()
    env.setenv("RECALL_MAX_MEMORIES", str(MAX_LIMIT))
    assert Settings.from_env().max_memories == MAX_LIMIT


async def test_recall_similarity_threshold(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_MODE", "semantic")

    async def found() -> int:
        async with await_store() as store:
            await add_facts(store, user, 2)
            node = create_retrieve_memories_node(store)
            out = await node(ask("my dog Max fact number 1"), config(user))
        return len(out["retrieved_memories"])

    assert await found() > 0
    env.setenv("RECALL_SIMILARITY_THRESHOLD", "0.999")
    assert await found() == 0


async def test_recall_mode(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_MODE", "keyword")
    async with await_store() as store:
        await add_facts(store, user, 1)
        node = create_retrieve_memories_node(store)
        with capture_logs() as logs:
            out = await node(ask("dog"), config(user))
    [done] = [e for e in logs if e["event"] == "memory.retrieve.done"]
    assert done["mode"] == "keyword" and len(out["retrieved_memories"]) == 1


async def test_a_bad_recall_mode_fails_at_start_with_the_stores_message(env: ProcessEnv) -> None:
    """Issue 48: the settings checked the mode their own way; they call `parse_mode`, the
    store's check, so a bad RECALL_MODE stops the process with the same message."""
    env.setenv("RECALL_MODE", " fuzzy ")
    with pytest.raises(ConfigError) as checked:
        parse_mode("fuzzy", ConfigError, "RECALL_MODE")
    message = str(checked.value)
    assert message == "RECALL_MODE must be one of semantic, keyword, hybrid, not 'fuzzy'"
    with pytest.raises(ConfigError) as at_start:
        await open_store()
    assert str(at_start.value) == message
    with pytest.raises(ConfigError) as direct:
        Settings(mode="fuzzy")  # type: ignore[arg-type]  # what a user may pass
    assert str(direct.value) == message


async def test_recall_retrieval_mode(env: ProcessEnv, user: str) -> None:
    """RECALL_MODE's deprecated old name (issue 39): still read, with a warning."""
    env.setenv("RECALL_RETRIEVAL_MODE", "keyword")
    with pytest.warns(DeprecationWarning, match="use mode"):
        store = await open_store()
    try:
        await add_facts(store, user, 1)
        found = await store.find(user, "dog")
    finally:
        await store.close()
    assert found.mode == "keyword" and len(found.memories) == 1


async def test_a_store_opened_with_its_own_settings_is_not_overridden_by_the_environment(
    env: ProcessEnv, database_url: str, user: str
) -> None:
    """Issue 31: the node read the environment for limit, threshold and mode and passed them,
    so a store opened with explicit Settings was silently overridden. The store decides now."""
    env.setenv("RECALL_MAX_MEMORIES", "1")
    env.setenv("RECALL_SIMILARITY_THRESHOLD", "0.999")
    env.setenv("RECALL_MODE", "keyword")
    own = Settings(
        database_url=database_url,
        max_memories=4,
        similarity_threshold=0.0,
        mode="semantic",
    )
    async with MemoryStore.connect(own, embeddings=FakeEmbeddings(64)) as store:
        await add_facts(store, user, 6)
        node = create_retrieve_memories_node(store)  # its own settings: the environment's
        with capture_logs() as logs:
            out = await node(ask("my dog Max fact"), config(user))
        # what the caller gives still wins over the store
        given = create_retrieve_memories_node(store, limit=2)
        out_given = await given(ask("my dog Max fact"), config(user))
    [done] = [e for e in logs if e["event"] == "memory.retrieve.done"]
    assert done["mode"] == "semantic" and len(out["retrieved_memories"]) == 4
    assert len(out_given["retrieved_memories"]) == 2


async def test_recall_search_timeout_ms(env: ProcessEnv) -> None:
    env.setenv("RECALL_SEARCH_TIMEOUT_MS", "50")
    node = create_retrieve_memories_node(provider(FailingStore(delay=5.0)))
    started = time.perf_counter()
    with capture_logs() as logs:
        out = await node(ask("anything at all"), config("u"))
    assert out == {"retrieved_memories": []} and time.perf_counter() - started < 2.0
    assert [e["timeout_ms"] for e in logs if e["event"] == "memory.retrieve.timeout"] == [50]


async def retrieval_event(store: MemoryStore, user: str, event: str) -> dict[str, Any]:
    """The one `event` a default retrieval node logs for a question."""
    with capture_logs() as logs:
        await create_retrieve_memories_node(store)(ask("where is Max"), config(user))
    [found] = [e for e in logs if e["event"] == event]
    return dict(found)


async def test_recall_log_search_queries(
    env: ProcessEnv, env_store: MemoryStore, user: str
) -> None:
    assert "query" not in await retrieval_event(env_store, user, "memory.retrieve.start")
    env.setenv("RECALL_LOG_SEARCH_QUERIES", "true")
    start = await retrieval_event(env_store, user, "memory.retrieve.start")
    assert start["query"] == "where is Max"


async def test_recall_log_similarity_scores(
    env: ProcessEnv, env_store: MemoryStore, user: str
) -> None:
    env.setenv("RECALL_LOG_SIMILARITY_SCORES", "false")
    done = await retrieval_event(env_store, user, "memory.retrieve.done")
    assert "similarities" not in done and "latency_ms" in done


async def test_recall_track_retrieval_latency(
    env: ProcessEnv, env_store: MemoryStore, user: str
) -> None:
    env.setenv("RECALL_TRACK_RETRIEVAL_LATENCY", "false")
    metrics = RetrievalMetrics()
    node = create_retrieve_memories_node(env_store, metrics=metrics)
    with capture_logs() as logs:
        await node(ask("where is Max"), config(user))
    [done] = [e for e in logs if e["event"] == "memory.retrieve.done"]
    assert "latency_ms" not in done and "similarities" in done
    assert metrics.totals() == {}  # successful retrievals are not recorded


async def test_recall_alert_on_failures(env: ProcessEnv) -> None:
    def failing_node(metrics: RetrievalMetrics) -> Any:
        store = provider(FailingStore(RuntimeError("down")))
        return create_retrieve_memories_node(store, metrics=metrics)

    rules = AlertRules(max_errors=2, min_samples=1)
    for alerts_on in (True, False):
        env.setenv("RECALL_ALERT_ON_FAILURES", str(alerts_on).lower())
        metrics = RetrievalMetrics(rules=rules)
        node = failing_node(metrics)
        with capture_logs() as logs:
            for _ in range(3):
                await node(ask("anything at all"), config("u"))
        fired = [e for e in logs if e["event"] == "memory.alert.fired"]
        assert bool(fired) is alerts_on
        assert metrics.totals() == {"unexpected": 3}  # recorded either way


async def test_recall_user_index_threshold(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_USER_INDEX_THRESHOLD", "3")
    async with await open_store() as store:
        await add_facts(store, user, 3)
        assert user in await store.optimize()


async def test_recall_store_index_threshold(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_STORE_INDEX_THRESHOLD", "3")
    index: IndexConfig = {"dims": 16, "embed": FakeEmbeddings(16), "fields": ["text"]}
    async with RecallStore.connect(index=index) as store:
        await store.abatch([PutOp((user, "kb"), f"k{i}", {"text": f"fact {i}"}) for i in range(3)])
        await store.abatch([PutOp((user, "small"), "k", {"text": "fact"})])
        # the batch that took kb to 3 vectors built its index before it returned (decision 0032)
        assert store._planner.through(f"{user}.kb", 16) == "namespace"
        assert store._planner.through(f"{user}.small", 16) is None
        assert await store.build_indexes() == []


async def test_a_store_made_on_a_pool_takes_the_process_settings(env: ProcessEnv) -> None:
    env.setenv("RECALL_STORE_INDEX_THRESHOLD", "3")
    async with RecallStore.connect() as opened:
        made = RecallStore(opened._pool)  # a store on a pool of one's own
        assert made._planner.threshold == 3  # not Settings()'s default


async def test_recall_store_wide_threshold(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_STORE_WIDE_THRESHOLD", "3")
    index: IndexConfig = {"dims": 24, "embed": FakeEmbeddings(24), "fields": ["text"]}
    async with RecallStore.connect(index=index) as store:
        await store.abatch([PutOp((user, f"n{i}"), "k", {"text": f"fact {i}"}) for i in range(3)])
        await store.asearch((user,), query="fact")
        await store.wait_for_index_builds()
        url = store.database.url if store.database else ""
    conn = await AsyncConnection.connect(url)
    async with conn:
        cur = await conn.execute(b"SELECT ns FROM recall.store_indexes WHERE dims = 24")
        assert await cur.fetchall() == [("",)]  # the index over every namespace


async def test_recall_store_breadth_sample(env: ProcessEnv, user: str) -> None:
    """Issue 47: the share of indexed searches checked against the exact scan, read from the
    environment (every one at 1: each search through the index is tallied)."""
    env.setenv("RECALL_STORE_INDEX_THRESHOLD", "3")
    env.setenv("RECALL_STORE_BREADTH_SAMPLE", "1")
    index: IndexConfig = {"dims": 16, "embed": FakeEmbeddings(16), "fields": ["text"]}
    async with RecallStore.connect(index=index) as store:
        assert store._planner.sample == 1.0
        await store.abatch([PutOp((user, "kb"), f"k{i}", {"text": f"fact {i}"}) for i in range(5)])
        for i in range(3):
            await store.asearch((user, "kb"), query=f"fact {i}")
            await store.wait_for_index_builds()
        assert store._planner.tally(f"{user}.kb", 16).questions == 3
    env.setenv("RECALL_STORE_BREADTH_SAMPLE", "1.5")
    with pytest.raises(ConfigError, match="RECALL_STORE_BREADTH_SAMPLE"):
        Settings.from_env()


async def _user_index_definition(store: MemoryStore, user: str) -> str:
    conn = await AsyncConnection.connect(store.database.url if store.database else "")
    async with conn:
        cur = await conn.execute(
            b"SELECT i.indexdef FROM recall.users u JOIN pg_indexes i"
            b" ON i.schemaname = 'recall' AND i.indexname = u.hnsw_index WHERE u.user_id = %s",
            [user],
        )
        row = await cur.fetchone()
    assert row is not None, "no per-user index was built"
    return str(row[0])


async def _index_built_with(env: ProcessEnv, user: str, variable: str, value: str) -> str:
    """The definition of `user`'s own index, built with `variable=value` in the environment."""
    env.setenv("RECALL_USER_INDEX_THRESHOLD", "3")
    env.setenv(variable, value)
    async with await open_store() as store:
        await add_facts(store, user, 3)
        await store.optimize()
        return await _user_index_definition(store, user)


async def test_recall_hnsw_m(env: ProcessEnv, user: str) -> None:
    assert "m='5'" in await _index_built_with(env, user, "RECALL_HNSW_M", "5")


async def test_recall_hnsw_ef_construction(env: ProcessEnv, user: str) -> None:
    definition = await _index_built_with(env, user, "RECALL_HNSW_EF_CONSTRUCTION", "40")
    assert "ef_construction='40'" in definition


@pytest.fixture
def vector_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every vector search statement the store runs."""
    import recall.store.candidates as store_search
    from recall.db.search_rows import vector_rows as real

    calls: list[dict[str, Any]] = []

    async def spy(conn: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return await real(conn, **kwargs)

    monkeypatch.setattr(store_search, "vector_rows", spy)
    return calls


async def test_recall_hnsw_ef_search(
    env: ProcessEnv, vector_calls: list[dict[str, Any]], user: str
) -> None:
    env.setenv("RECALL_HNSW_EF_SEARCH", "7")
    env.setenv("RECALL_USER_INDEX_THRESHOLD", "3")
    async with await open_store() as store:
        await add_facts(store, user, 3)
        await store.optimize()
        vector_calls.clear()  # each add_turn looked for a turn it repeats (issue 37)
        found = await store.search(user, "my dog Max", mode="semantic", similarity_threshold=0)
    assert found and [c["ef_search"] for c in vector_calls] == [7]
    assert vector_calls[0]["index"] is not None  # the user's own index served it


async def test_recall_hybrid_candidates(
    env: ProcessEnv, vector_calls: list[dict[str, Any]], user: str
) -> None:
    env.setenv("RECALL_HYBRID_CANDIDATES", "9")
    async with await open_store() as store:
        await add_facts(store, user, 2)
        vector_calls.clear()  # each add_turn looked for a turn it repeats (issue 37)
        await store.search(user, "my dog Max", mode="hybrid")
    assert [c["limit"] for c in vector_calls] == [9]


# -- the example server -------------------------------------------------------------------


async def test_recall_auth_tokens(env: ProcessEnv) -> None:
    from recall.server.auth import authenticate

    env.setenv("RECALL_AUTH_TOKENS", "t-zed:zed")
    user = await authenticate("Bearer t-zed")
    assert user["identity"] == "zed"


def test_recall_operators(env: ProcessEnv) -> None:
    from langgraph_sdk import Auth

    from recall.server.auth import operators_only

    def change(user: str) -> Auth.types.AuthContext:
        return Auth.types.AuthContext(
            permissions=[],
            user=cast(Auth.types.BaseUser, Auth.types.StudioUser(user, is_authenticated=True)),
            resource="assistants",
            action="update",
        )

    with pytest.raises(Auth.exceptions.HTTPException):  # nobody is an operator by default
        operators_only(change("ops"))
    env.setenv("RECALL_OPERATORS", "ops, root")
    assert operators_only(change("ops")) is True
    with pytest.raises(Auth.exceptions.HTTPException):
        operators_only(change("alice"))


def test_recall_chat_model(env: ProcessEnv) -> None:
    from recall.example.responder import create_respond_node

    create_respond_node()  # unset: the offline responder, no model to load
    env.setenv("RECALL_CHAT_MODEL", "no-such-provider:no-such-model")
    with pytest.raises(Exception) as caught:  # noqa: PT011  # which one depends on what is installed
        create_respond_node()
    assert "no-such-provider" in str(caught.value) or isinstance(caught.value, ImportError)


async def test_recall_metrics_summary_s(env: ProcessEnv, env_store: MemoryStore) -> None:
    from recall.server.app import app, lifespan
    from recall.store.shared import set_default_store

    env.setenv("RECALL_METRICS_SUMMARY_S", "0.05")
    set_default_store(env_store)
    try:
        with capture_logs() as logs:
            async with lifespan(app):
                await asyncio.sleep(0.3)
    finally:
        set_default_store(None)
    assert len([e for e in logs if e["event"] == "memory.metrics.summary"]) >= 2


async def test_recall_log_level(env: ProcessEnv, databases: Databases) -> None:
    quiet = run_cli("migrate", RECALL_DATABASE_URL=await databases.create("recall_log"))
    assert "db.migrate.applied" not in quiet.stderr  # the CLI logs warnings only by default
    loud = run_cli(
        "migrate",
        RECALL_DATABASE_URL=await databases.create("recall_log"),
        RECALL_LOG_LEVEL="INFO",
    )
    assert "db.migrate.applied" in loud.stderr


# -- retention (a database of their own: retention works across every user) -----------------

# the moment retention runs, and the turns' ages are measured from (issue 44: not the clock)
RETAINED_AT = datetime(2026, 3, 1, 12, tzinfo=UTC)


async def _retention_store(env: ProcessEnv, databases: Databases, user: str) -> MemoryStore:
    env.setenv("RECALL_DATABASE_URL", await databases.create("recall_retention"))
    store = await open_store()
    await store.add_turns(
        {"user_id": user, "user_message": f"turn number {age}", "ai_response": "ok",
         "created_at": RETAINED_AT - timedelta(days=age)}
        for age in (90, 20, 1)
    )  # fmt: skip
    return store


async def test_recall_retention_days(env: ProcessEnv, databases: Databases, user: str) -> None:
    env.setenv("RECALL_RETENTION_DAYS", "30")
    async with await _retention_store(env, databases, user) as store:
        await store.apply_retention(now=RETAINED_AT)
        left = {m.user_message for m in await store.recent(user, 10)}
    assert left == {"turn number 20", "turn number 1"}  # kept by default: all three


async def test_recall_retention_max_per_user(
    env: ProcessEnv, databases: Databases, user: str
) -> None:
    env.setenv("RECALL_RETENTION_MAX_PER_USER", "1")
    async with await _retention_store(env, databases, user) as store:
        await store.apply_retention(now=RETAINED_AT)
        left = {m.user_message for m in await store.recent(user, 10)}
    assert left == {"turn number 1"}  # kept by default: all three


# -- memory creation -------------------------------------------------------------------------


def _extractor(*answers: dict[str, Any]) -> RunnableExtractor:
    responses = [json.dumps(a) for a in answers]
    return RunnableExtractor(FakeListChatModel(responses=responses))


TEA = {"title": "Tea", "summary": "The user drinks green tea every morning.",
       "entities": ["tea"], "key_phrases": ["green tea"]}  # fmt: skip
TEA_AGAIN = {**TEA, "summary": "The user likes green tea a lot, mostly after lunch."}


async def test_recall_consolidation_chunk_size(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_CONSOLIDATION_CHUNK_SIZE", "2")
    async with await open_store() as store:
        for i in range(2):
            await store.add_turn(user, f"turn {i} about tea", "ok", conversation_id="c1")
        result = await Consolidator(store, _extractor(TEA)).run(user, "c1")
    assert result.chunks == 1 and result.created == 1  # the default (10) waits for 10 turns


async def test_recall_dedup_threshold(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_CONSOLIDATION_CHUNK_SIZE", "1")
    env.setenv("RECALL_DEDUP_THRESHOLD", "0.5")
    async with await open_store() as store:
        await store.add_turn(user, "I love green tea", "ok", conversation_id="c1")
        await store.add_turn(user, "green tea every morning", "ok", conversation_id="c1")
        result = await Consolidator(store, _extractor(TEA, TEA_AGAIN)).run(user, "c1")
    # the second memory is close to the first (cosine 0.84: under the default 0.95, over 0.5)
    assert (result.created, result.updated) == (1, 1)


async def test_recall_sources_first(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_SOURCES_FIRST", "false")
    async with await open_store() as store:
        fact = await store.add_turn(user, "I drive a Toyota Prius.", "Noted.")
        updates = Provenance((fact.id,), supersedes=fact.id)
        new = await store.add_turn(
            user, "I sold the Prius, I drive a Tesla now.", "Noted.", provenance=updates
        )
        found = await store.search(
            user, "I drive a Toyota Prius.", mode="semantic", similarity_threshold=0
        )
    # the ranker's order: the older statement, nearest the message, before the newer one
    assert [m.id for m in found] == [fact.id, new.id]


async def test_recall_link_repeated_turns(env: ProcessEnv, user: str) -> None:
    env.setenv("RECALL_LINK_REPEATED_TURNS", "false")
    async with await open_store() as store:
        await store.add_turn(user, "I drive a Toyota Prius.", "Noted.", conversation_id="a")
        await store.add_turn(user, "I drive a Toyota Prius.", "Noted.", conversation_id="b")
        assert len(await store.recent(user)) == 2


# -- the list --------------------------------------------------------------------------------


def test_every_variable_has_a_test() -> None:
    documented = set(DOCUMENTED.findall((ROOT / "docs" / "configuration.md").read_text()))
    fields = {"RECALL_" + name.upper() for name in Settings.__dataclass_fields__}
    assert fields <= documented, f"undocumented settings: {sorted(fields - documented)}"
    tests = {name for name in globals() if name.startswith("test_recall_")}
    missing = {v for v in documented if f"test_{v.lower()}" not in tests}
    assert not missing, f"variables without a test: {sorted(missing)}"
