"""Which model a store uses when none is configured: the one its database is bound to, else the
default (bge-small-en-v1.5), so an upgrade from the old default (all-MiniLM-L6-v2) keeps
finding the stored memories; an explicit setting that disagrees stays an error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs
from typer.testing import CliRunner

from recall import RecallStore
from recall.cli import app
from recall.config import Settings
from recall.db.migrate import apply_migrations, bind_embedding_space, bound_model
from recall.db.pool import connect_once
from recall.embeddings import choose
from recall.errors import ConfigError, EmbeddingMismatchError
from recall.store import MemoryStore
from tests.conftest import Databases, quiet_cli_logging


@pytest.fixture(autouse=True)
def _fresh_notice(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test sees the once-per-process notice as a new process would."""
    monkeypatch.setattr(choose, "_hinted", set())
    yield
    structlog.reset_defaults()  # the CLI configures structlog for its process


async def bound_database(databases: Databases, model: str, dims: int) -> str:
    """A new migrated database whose vectors are bound to `model` (as an older recall left it)."""
    url = await databases.create("recall_choice")
    conn = await connect_once(url)
    try:
        await apply_migrations(conn)
        await bind_embedding_space(conn, model, dims)
    finally:
        await conn.close()
    return url


async def stored_model(url: str) -> str | None:
    conn = await connect_once(url)
    try:
        return await bound_model(conn)
    finally:
        await conn.close()


async def test_unconfigured_keeps_the_databases_model_and_says_how_to_move(
    databases: Databases,
) -> None:
    url = await bound_database(databases, "all-MiniLM-L6-v2", 384)
    with capture_logs() as events:
        async with MemoryStore.connect(Settings(database_url=url)) as store:
            assert store.embedder.name == "all-MiniLM-L6-v2"
        async with MemoryStore.connect(Settings(database_url=url)) as store:
            assert store.embedder.name == "all-MiniLM-L6-v2"
    [notice] = [e for e in events if e["event"] == "embedding.model.legacy"]  # said once
    assert notice["model"] == "all-MiniLM-L6-v2" and notice["default"] == "bge-small-en-v1.5"
    assert "`recall reembed`" in notice["hint"]
    assert await stored_model(url) == "all-MiniLM-L6-v2"  # nothing rebound


async def test_a_new_database_gets_the_default(databases: Databases) -> None:
    url = await databases.create("recall_choice")
    with capture_logs() as events:
        async with MemoryStore.connect(Settings(database_url=url)) as store:
            assert store.embedder.name == "bge-small-en-v1.5"
    assert "embedding.model.legacy" not in [e["event"] for e in events]
    assert await stored_model(url) == "bge-small-en-v1.5"


async def test_an_explicit_setting_that_disagrees_is_an_error(databases: Databases) -> None:
    url = await bound_database(databases, "all-MiniLM-L6-v2", 384)
    settings = Settings(database_url=url, embedding_model="bge-small-en-v1.5")
    with pytest.raises(EmbeddingMismatchError, match="recall reembed"):
        await MemoryStore.connect(settings).open()


async def test_a_bound_model_recall_cannot_load_is_a_clear_error(databases: Databases) -> None:
    url = await bound_database(databases, "fake-hash-8", 8)
    with pytest.raises(ConfigError, match="'fake-hash-8'") as raised:
        await MemoryStore.connect(Settings(database_url=url)).open()
    assert "`recall reembed`" in str(raised.value)
    assert "RECALL_EMBEDDING_MODEL" in str(raised.value)


async def test_the_old_default_without_its_extra_names_the_extra_and_reembed(
    databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(choose, "minilm_installed", lambda: False)
    url = await bound_database(databases, "all-MiniLM-L6-v2", 384)
    with pytest.raises(ConfigError) as raised:
        await MemoryStore.connect(Settings(database_url=url)).open()
    message = str(raised.value)
    assert "pip install 'langgraph-recall[minilm]'" in message
    assert "`recall reembed`" in message


async def test_recall_store_follows_the_memories_model(databases: Databases) -> None:
    url = await bound_database(databases, "all-MiniLM-L6-v2", 384)
    async with RecallStore.connect(database_url=url, index={"fields": ["text"]}) as store:
        assert store.index_config is not None and store.index_config["dims"] == 384
        assert store._index is not None and store._index.embedder.name == "all-MiniLM-L6-v2"


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    quiet_cli_logging(monkeypatch)
    monkeypatch.delenv("RECALL_EMBEDDING_MODEL", raising=False)
    return CliRunner()


@pytest.fixture
async def minilm_url(databases: Databases) -> str:
    return await bound_database(databases, "all-MiniLM-L6-v2", 384)


def test_stats_says_how_to_move_and_reembed_moves_to_the_default(
    minilm_url: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sync: the CLI runs its own event loop
    url = minilm_url
    monkeypatch.setenv("RECALL_DATABASE_URL", url)
    stats = runner.invoke(app, ["stats"])
    assert stats.exit_code == 0, stats.output
    assert "embedding model: all-MiniLM-L6-v2\n" in stats.stdout
    assert "note: this database holds embeddings from 'all-MiniLM-L6-v2'" in stats.stdout
    assert "run `recall reembed`" in stats.stdout

    moved = runner.invoke(app, ["reembed"])
    assert moved.exit_code == 0, moved.output
    assert asyncio.run(stored_model(url)) == "bge-small-en-v1.5"
    after = runner.invoke(app, ["stats"])
    assert "embedding model: bge-small-en-v1.5\n" in after.stdout
    assert "note:" not in after.stdout
