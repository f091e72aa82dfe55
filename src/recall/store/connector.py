"""Opening a `MemoryStore` (`MemoryStore.connect()`): the database through
`recall.db.opening`, the model checked against the stored vectors, and the pools."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Generic, Protocol, TypeVar

import structlog
from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection

from recall.config import Settings, process_settings
from recall.db.migrate import bind_embedding_space, bound_model
from recall.db.opening import open_database
from recall.db.pool import open_pool
from recall.embeddings import Embedder, configured_embeddings, embedder_for
from recall.search.rankers import Ranker

__all__ = ["StoreConnector"]

log = structlog.stdlib.get_logger(__name__)


class _Closing(Protocol):
    async def close(self) -> None: ...


S = TypeVar("S", bound=_Closing)


class StoreConnector(Generic[S]):
    """What `MemoryStore.connect()` returns: use with `async with`, or `await` it.

    Args:
        cls: the store's class (`MemoryStore`, or a subclass), called with the opened parts.
    """

    def __init__(
        self,
        cls: Callable[..., S],
        settings: Settings | None,
        embeddings: Embeddings | None,
        name: str | None,
        ranker: Ranker[Any] | None = None,
    ) -> None:
        self._cls = cls
        self._ranker = ranker
        self._settings = settings
        self._embeddings = embeddings
        self._name = name
        self._store: S | None = None

    async def open(self) -> S:
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
            ranker=self._ranker,
        )

    def __await__(self) -> Generator[Any, None, S]:
        return self.open().__await__()

    async def __aenter__(self) -> S:
        self._store = await self.open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()
