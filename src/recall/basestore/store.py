"""`RecallStore`: a LangGraph `BaseStore` on PostgreSQL + pgvector, with exact search per
namespace prefix, typed filters, TTLs in fractional minutes and the project's keyword and
hybrid ranking. docs/basestore.md is its guide; decision 0019 its choices. Opening one
(`RecallStoreConnector`): the database through `recall.db.opening`, the index resolved, the
pool opened and the TTL sweeper started; all undone on leaving."""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from collections.abc import Generator, Iterable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import psycopg
import structlog
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
)
from psycopg_pool import AsyncConnectionPool

from recall.basestore.indexing import IndexSpec, resolve_index
from recall.basestore.namespaces import split, validate_op
from recall.basestore.operations import Prepared, check_ttl, prepare, run_read, run_writes
from recall.basestore.planning import IndexPlanner
from recall.config import RetrievalMode, Settings, parse_mode, process_settings
from recall.db.items import sweep_items
from recall.db.migrate import bound_model
from recall.db.opening import open_database
from recall.db.pool import open_pool
from recall.errors import ConfigError, RecallError, StoreError

if TYPE_CHECKING:
    from recall.db.pool import Database

__all__ = ["RecallStore", "RecallStoreConnector"]

log = structlog.stdlib.get_logger(__name__)


class RecallStore(BaseStore):
    """A LangGraph `BaseStore` kept in PostgreSQL, beside `recall`'s turn memories.

    Open it with `RecallStore.connect(...)` (an async context manager). Async methods
    (`aget`, `aput`, `asearch`, `adelete`, `alist_namespaces`, `abatch`) are the main ones;
    the sync ones (`get`, `put`, ...) work from any other thread, such as a sync node's
    worker thread, and raise if called on the store's own event loop, where they would block it.

    Args:
        pool: an open pool of the project's connections (`recall.db.pool.open_pool`), the
            store's own: its searches leave their HNSW knobs on the connections.
        index: the resolved index (None: nothing is embedded, queries rank nothing).
        ttl: LangGraph's `TTLConfig` (None: items never expire unless a put says so).
        mode: how a query ranks: "semantic" (cosine, the default: an item is any JSON, and
            LangGraph's own stores rank by cosine), "keyword" (BM25) or "hybrid" (the fusion of
            both, 0-1, decision 0005: the second stage was fitted on turns, not items).
        search_mode: the deprecated name of `mode` (a DeprecationWarning).
        database: the database behind the pool (its embedded server, if any, is stopped on
            close by its owner).
        settings: the index thresholds and HNSW parameters (`store_index_threshold`,
            `store_wide_threshold`, `hnsw_*`; default: the process's, `process_settings()`).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        pool: AsyncConnectionPool,
        *,
        index: IndexSpec | None = None,
        ttl: TTLConfig | None = None,
        mode: RetrievalMode = "semantic",
        database: Database | None = None,
        settings: Settings | None = None,
        search_mode: RetrievalMode | None = None,
    ) -> None:
        self._pool = pool
        self._planner = IndexPlanner(pool, settings or process_settings())
        self._index = index
        self.ttl_config = ttl
        self.index_config: IndexConfig | None = (
            {"dims": index.dims, "fields": list(index.fields)} if index is not None else None
        )
        self.mode: RetrievalMode = parse_mode(_old_mode_name(mode, search_mode))
        self.database = database
        self._loop = asyncio.get_running_loop()
        self._sweeper: asyncio.Task[None] | None = None
        self._stop_sweeping = asyncio.Event()

    @classmethod
    def connect(
        cls,
        database_url: str | None = None,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        mode: RetrievalMode = "semantic",
        settings: Settings | None = None,
        search_mode: RetrievalMode | None = None,
    ) -> RecallStoreConnector:
        """Open a store: use as `async with RecallStore.connect(...) as store:`.

        It starts the embedded PostgreSQL when no URL is given (nor `RECALL_DATABASE_URL`),
        applies the project's migrations (there is no separate set-up step; with
        `RECALL_AUTO_MIGRATE=false` it refuses to open while some are pending), and, when `ttl`
        has `sweep_interval_minutes`, runs the sweeper until the block ends.

        Args:
            database_url: a PostgreSQL URL; None: `RECALL_DATABASE_URL` or the embedded server.
            index: LangGraph's `IndexConfig` (`dims`, `embed`, `fields`); `embed` left out
                means the project's offline model. None: no semantic search.
            ttl: LangGraph's `TTLConfig` (`default_ttl` minutes, `refresh_on_read`,
                `sweep_interval_minutes`).
            mode: "semantic" (the default), "keyword" or "hybrid" (see the class).
            settings: the rest of the configuration (default: `process_settings()`).
            search_mode: the deprecated name of `mode` (a DeprecationWarning).
        """
        mode = _old_mode_name(mode, search_mode)
        return RecallStoreConnector(cls, database_url, index, ttl, mode, settings)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` from synchronous code, waiting for the result.

        The work runs on the store's event loop: handed to it when it is running (the caller
        is then another thread, such as a sync node's worker), or run on it here when it is
        idle (a script or a sync test between async steps).

        Raises:
            RecallError: called on the store's own running event loop, where waiting would
                block it (use `abatch` there), or from another running loop while the store's
                loop is idle, or after the store's loop was closed.
        """
        ops = list(ops)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RecallError(
                "RecallStore's sync methods would block its event loop: use the async ones "
                "(aget, aput, asearch, ...) in async code, or call from a worker thread"
            )
        if self._loop.is_closed():
            raise RecallError("RecallStore's event loop is closed: open the store again")
        if self._loop.is_running():
            return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()
        if running is not None:
            raise RecallError(
                "RecallStore's event loop is idle and this thread runs another one: call the "
                "sync methods from a worker thread, or the async ones from the store's loop"
            )
        return self._loop.run_until_complete(self.abatch(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in one transaction (a batch of reads only: without one), in their order;
        return each one's result in order.

        Every op is checked and every text embedded before anything is written, so a bad op
        fails the whole batch and changes nothing.

        Raises:
            InvalidNamespaceError: a namespace breaks LangGraph's rules.
            InvalidInputError: a key, value, TTL, page or filter is unusable.
            EmbeddingError: the model failed.
            StoreError: the database failed (the batch is rolled back).
        """
        ops = list(ops)
        for op in ops:
            validate_op(op)
        prepared = await prepare(ops, self._index)
        results: list[Result] = [None] * len(ops)
        pending = False  # vectors written pending, to join their graphs after the commit
        try:
            async with self._pool.connection() as conn, _writing(conn, ops):
                position = 0
                while position < len(ops):
                    run: list[tuple[int, PutOp]] = []
                    while position < len(ops) and isinstance(put := ops[position], PutOp):
                        run.append((position, put))
                        position += 1
                    if run:
                        pending |= await run_writes(conn, run, prepared, self._index, self._planner)
                        continue
                    op = ops[position]
                    assert isinstance(op, GetOp | SearchOp | ListNamespacesOp)
                    results[position] = await run_read(
                        conn, position, op, prepared, self._index, self.mode, self._planner
                    )
                    position += 1
        except psycopg.Error as exc:
            raise StoreError(f"the store's batch failed: {exc}") from exc
        if self._index is not None:
            await self._planner.written(_vectors_written(prepared), self._index.dims, pending)
        return results

    async def setup(self) -> None:
        """Nothing to do: `connect` applies the migrations. Kept so that code written for
        LangGraph's `AsyncPostgresStore` (which needs `await store.setup()`) runs unchanged."""

    async def build_indexes(self, *, every_namespace: bool = False) -> list[tuple[str, ...]]:
        """Build and calibrate now the HNSW index of every namespace with
        `store_index_threshold` vectors or more that has none (writes that take a namespace
        there, and searches that meet one, do it in the background);
        with `every_namespace`, also the index over every namespace that serves wide prefixes.
        Returns the namespaces indexed by this call (`()` for the index over every namespace).

        Raises:
            StoreError: the database failed, or the store has no index (nothing to build).
        """
        if self._index is None:
            raise StoreError("this RecallStore embeds nothing: it has no vectors to index")
        try:
            built = await self._planner.build_due(self._index.dims, every=every_namespace)
        except psycopg.Error as exc:
            raise StoreError(f"building the store's indexes failed: {exc}") from exc
        return [split(ns) if ns else () for ns in built]

    async def wait_for_index_builds(self) -> None:
        """Wait until the counts, index builds and calibrations that writes and searches set
        off have finished."""
        await self._planner.wait()

    async def sweep_ttl(self) -> int:
        """Delete every expired item now; return how many were deleted.

        Raises:
            StoreError: the database failed.
        """
        try:
            async with self._pool.connection() as conn:
                deleted = await sweep_items(conn)
        except psycopg.Error as exc:
            raise StoreError(f"the TTL sweep failed: {exc}") from exc
        if deleted:
            log.info("store.ttl.swept", deleted=deleted)
        return deleted

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items every `sweep_interval_minutes` (else the TTL config's, else 5)
        until `stop_ttl_sweeper`; return the running task (the same one if already running)."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        interval = float(sweep_interval_minutes or configured or 5) * 60
        self._stop_sweeping.clear()
        self._sweeper = asyncio.create_task(self._sweep_every(interval), name="recall-ttl-sweeper")
        return self._sweeper

    async def _sweep_every(self, seconds: float) -> None:
        while not self._stop_sweeping.is_set():
            try:
                await asyncio.wait_for(self._stop_sweeping.wait(), timeout=seconds)
                return
            except TimeoutError:
                pass
            try:
                await self.sweep_ttl()
            except RecallError as exc:  # the next round tries again
                log.warning("store.ttl.sweep_failed", error=str(exc))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True once it has stopped (or was not running), False if it did
        not stop within `timeout` seconds."""
        if self._sweeper is None or self._sweeper.done():
            return True
        self._stop_sweeping.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._sweeper), timeout=timeout)
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Stop the sweeper and close the pool (the connector does this on leaving)."""
        await self.stop_ttl_sweeper()
        await self._planner.close()
        await self._pool.close()

    def __repr__(self) -> str:
        dims = self._index.dims if self._index is not None else None
        return f"RecallStore(index_dims={dims}, mode={self.mode!r})"

    @property
    def search_mode(self) -> RetrievalMode:
        """The deprecated name of `mode`."""
        return self.mode


def _old_mode_name(mode: RetrievalMode, search_mode: RetrievalMode | None) -> RetrievalMode:
    """`search_mode`, the deprecated name of `mode`, when given (with a DeprecationWarning)."""
    if search_mode is None:
        return mode
    warnings.warn(
        "RecallStore's search_mode= is deprecated: use mode=", DeprecationWarning, stacklevel=3
    )
    if mode not in ("semantic", search_mode):
        raise ConfigError(f"mode={mode!r} and search_mode={search_mode!r} disagree: give mode")
    return search_mode


def _writing(conn: psycopg.AsyncConnection[Any], ops: list[Op]) -> AbstractAsyncContextManager[Any]:
    """A batch with a put runs in one transaction; a batch of reads needs none (at READ
    COMMITTED each statement reads its own snapshot either way), which saves the round trips of
    BEGIN and COMMIT (an indexed search opens its own, pipelined with it)."""
    if any(isinstance(op, PutOp) for op in ops):
        return conn.transaction()
    return nullcontext()


def _vectors_written(prepared: Prepared) -> dict[str, int]:
    """How many vectors a committed batch's puts wrote, by namespace (a namespace's index is
    built once writes take it past the threshold)."""
    counts: dict[str, int] = {}
    for write in prepared.writes.values():
        if write is not None and write.vectors:
            counts[write.ns] = counts.get(write.ns, 0) + len(write.vectors)
    return counts


class RecallStoreConnector:
    """What `RecallStore.connect()` returns: use it with `async with`."""

    def __init__(
        self,
        cls: type[RecallStore],
        database_url: str | None,
        index: IndexConfig | None,
        ttl: TTLConfig | None,
        mode: RetrievalMode,
        settings: Settings | None,
    ) -> None:
        self._cls = cls
        self._database_url = database_url
        self._index = index
        self._ttl = ttl
        self._mode = mode
        self._settings = settings
        self._store: RecallStore | None = None

    async def open(self) -> RecallStore:
        """Reach (or start) the database, migrate it (`recall.db.opening`), resolve the index,
        open the pool.

        Raises:
            ConfigError: a bad `index`, `ttl` or `mode`.
            StoreError, MigrationError: the database could not be reached or migrated, or it
                needs migrations and `auto_migrate` is off.
            EmbeddingError: the model failed when asked for its dimension.
        """
        mode = parse_mode(self._mode)
        check_ttl(self._ttl)
        settings = self._settings or process_settings()
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
            mode=mode,
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
            mode=mode,
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
