"""Opening a `RecallStore`: the database found (or the embedded server started), migrated,
the index resolved, the pool opened and the TTL sweeper started; all undone on leaving."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import structlog
from langgraph.store.base import IndexConfig, TTLConfig

from recall.basestore.indexing import resolve_index
from recall.basestore.operations import is_minutes
from recall.config import RETRIEVAL_MODES, RetrievalMode, Settings
from recall.db.migrate import bound_model
from recall.db.opening import open_database
from recall.db.pool import open_pool
from recall.errors import ConfigError

if TYPE_CHECKING:
    from recall.basestore.store import RecallStore

__all__ = ["RecallStoreConnector"]

log = structlog.stdlib.get_logger(__name__)

_TTL_KEYS = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}


def _check_ttl(ttl: TTLConfig | None) -> None:
    if ttl is None:
        return
    if not isinstance(ttl, dict) or set(ttl) - _TTL_KEYS:
        raise ConfigError(f"ttl must be a TTLConfig with keys from {sorted(_TTL_KEYS)}: {ttl!r}")
    for name in ("default_ttl", "sweep_interval_minutes"):
        minutes = ttl.get(name)
        if minutes is not None and not is_minutes(minutes):
            raise ConfigError(f"ttl {name} is a number of minutes above 0, not {minutes!r}")


class RecallStoreConnector:
    """What `RecallStore.connect()` returns: use it with `async with`."""

    def __init__(
        self,
        cls: type[RecallStore],
        database_url: str | None,
        index: IndexConfig | None,
        ttl: TTLConfig | None,
        search_mode: RetrievalMode,
        settings: Settings | None,
    ) -> None:
        self._cls = cls
        self._database_url = database_url
        self._index = index
        self._ttl = ttl
        self._search_mode = search_mode
        self._settings = settings
        self._store: RecallStore | None = None

    async def open(self) -> RecallStore:
        """Reach (or start) the database, migrate it (`recall.db.opening`), resolve the index,
        open the pool.

        Raises:
            ConfigError: a bad `index`, `ttl` or `search_mode`.
            StoreError, MigrationError: the database could not be reached or migrated, or it
                needs migrations and `auto_migrate` is off.
            EmbeddingError: the model failed when asked for its dimension.
        """
        if self._search_mode not in RETRIEVAL_MODES:
            modes = ", ".join(RETRIEVAL_MODES)
            raise ConfigError(f"search_mode must be one of {modes}, not {self._search_mode!r}")
        _check_ttl(self._ttl)
        settings = self._settings or Settings.from_env()
        if self._database_url is not None:
            settings = dataclasses.replace(settings, database_url=self._database_url)
        # an index that leaves `embed` out, with no model configured: the model the memories
        # are bound to, so both stores of one database embed alike
        database, bound = await open_database(settings, bound_model)
        index = await resolve_index(self._index, settings, bound)
        pool = await open_pool(database.url, max_size=settings.connection_pool_size)
        store = self._cls(
            pool,
            index=index,
            ttl=self._ttl,
            search_mode=self._search_mode,
            database=database,
            settings=settings,
        )
        if self._ttl and self._ttl.get("sweep_interval_minutes"):
            await store.start_ttl_sweeper()
        log.info(
            "store.basestore.opened",
            embedded=database.embedded is not None,
            dims=index.dims if index is not None else None,
            model=index.embedder.name if index is not None else None,
            search_mode=self._search_mode,
        )
        return store

    def __await__(self) -> Generator[Any, None, RecallStore]:
        """`store = await RecallStore.connect(...)`: the caller closes it with `aclose()`."""
        return self.open().__await__()

    async def __aenter__(self) -> RecallStore:
        self._store = await self.open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.aclose()
