"""MemoryStore: store, search, list and erase one user's memories in PostgreSQL + pgvector.

The class is composed of one part per job, each in its own module over `StoreBase` (pools,
connection scoping, plan cache): `writes` (add_turn), `bulk` (add_turns), `search` (search,
keyword_search), `maintenance` (index builds, optimize, stats), `reads` (recent, get),
`conversations` (memory creation's state) and `erasure` (delete, forget_user). Opening one
(`StoreConnector`): the database through `recall.db.opening`, the model checked against the
stored vectors, and the pools.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import structlog
from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection

from recall.config import Settings, process_settings
from recall.db.migrate import bind_embedding_space, bound_model
from recall.db.opening import open_database
from recall.db.pool import open_pool
from recall.embeddings import Embedder, configured_embeddings, embedder_for
from recall.search.second_stage import SecondStage
from recall.store.bulk import Bulk
from recall.store.checks import MAX_LIMIT
from recall.store.conversations import Conversations
from recall.store.erasure import Erasure
from recall.store.reads import Reads
from recall.store.search import Search
from recall.store.writes import Writes

__all__ = ["MAX_LIMIT", "MemoryStore", "StoreConnector"]

log = structlog.stdlib.get_logger(__name__)


class MemoryStore(Writes, Bulk, Search, Reads, Conversations, Erasure):
    """Long-term memory of many users in one PostgreSQL database.

    Open it with `MemoryStore.connect()`; the constructor takes ready parts (a pool whose
    connections have pgvector registered, an `Embedder`, `Settings`) for callers that manage
    their own. Every method is for one user, and no method returns another user's rows.
    """

    @classmethod
    def connect(
        cls,
        settings: Settings | None = None,
        *,
        embeddings: Embeddings | None = None,
        embedding_model_name: str | None = None,
        second_stage: SecondStage | bool = True,
    ) -> StoreConnector:
        """Open a store: `async with MemoryStore.connect() as store:` (or `await` it).

        Args:
            settings: None uses `process_settings()`. With no database URL, the embedded
                server starts (or is reused) in `settings.data_dir`.
            embeddings: any LangChain `Embeddings`; None loads `settings.embedding_model`, or,
                left unset, the model the database is bound to, else the default
                (`recall.embeddings.configured_embeddings`).
            embedding_model_name: the name recorded with the data for `embeddings`.
            second_stage: the default mode's ranking (docs/retrieval.md): True for the one
                fitted for the embedder's model (the fusion of decision 0005 where none is),
                False for that fusion always, or a `SecondStage` of your own fit.

        Raises:
            ConfigError, StoreError, MigrationError, EmbeddingMismatchError: set-up failed.
        """
        return StoreConnector(cls, settings, embeddings, embedding_model_name, second_stage)


class StoreConnector:
    """What `MemoryStore.connect()` returns: use with `async with`, or `await` it."""

    def __init__(
        self,
        cls: type[MemoryStore],
        settings: Settings | None,
        embeddings: Embeddings | None,
        name: str | None,
        second_stage: SecondStage | bool = True,
    ) -> None:
        self._cls = cls
        self._second_stage = second_stage
        self._settings = settings
        self._embeddings = embeddings
        self._name = name
        self._store: MemoryStore | None = None

    async def open(self) -> MemoryStore:
        """Start or reach the database, migrate it, check the model, open the pool.

        Raises:
            ConfigError, StoreError, MigrationError, EmbeddingMismatchError: set-up failed.
        """
        settings = self._settings or process_settings()
        embeddings = self._embeddings
        if embeddings is None and settings.embedding_model is not None:
            embeddings = configured_embeddings(settings)  # a bad setting fails before the database

        async def setup(conn: AsyncConnection[Any]) -> Embedder:
            model = embeddings
            if model is None:  # not configured: the database's model, else the default
                model = configured_embeddings(settings, await bound_model(conn))
            embedder = embedder_for(model, settings, name=self._name)
            await bind_embedding_space(conn, embedder.name, await embedder.dimensions())
            return embedder

        database, embedder = await open_database(settings, setup)
        pool = await open_pool(database.url, max_size=settings.connection_pool_size)
        read_pool = None
        if settings.read_database_url:  # a replica: searches go there, writes stay here
            try:
                read_pool = await open_pool(
                    settings.read_database_url, max_size=settings.connection_pool_size
                )
            except BaseException:
                await pool.close()
                raise
        log.info(
            "store.opened",
            embedded=database.embedded is not None,
            model=embedder.name,
            read_replica=read_pool is not None,
        )
        return self._cls(
            pool,
            embedder,
            settings,
            database=database,
            read_pool=read_pool,
            second_stage=self._second_stage,
        )

    def __await__(self) -> Generator[Any, None, MemoryStore]:
        return self.open().__await__()

    async def __aenter__(self) -> MemoryStore:
        self._store = await self.open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()
