"""What every part of `MemoryStore` stands on: its pools, embedder and settings, the
connection scoping (row-level security, errors wrapped as `StoreError`), the per-user plan
cache that writes keep current, and closing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, Self

import psycopg
import structlog
from cachetools import TTLCache
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from recall.config import Settings
from recall.db.pool import Database
from recall.db.replica import wal_replayed, wal_written
from recall.db.rls import as_owner, scope
from recall.embeddings import Embedder
from recall.errors import InvalidInputError, StoreError
from recall.memory import Turn, make_turn, stored_length
from recall.search.fusion import FusionModel, default_fusion
from recall.search.second_stage import SecondStage, second_stage_for

__all__ = ["Plan", "StoreBase"]

log = structlog.stdlib.get_logger(__name__)


class Plan(NamedTuple):
    """What the search plan of a user depends on, cached per user."""

    memories: int  # how many memories the user has
    hnsw_index: str | None  # the name of their own HNSW index, if built


class StoreBase:
    """The state and plumbing the store's parts share (see `MemoryStore`).

    Args:
        pool: an autocommit pool whose connections have pgvector registered.
        embedder: embeds turns and queries.
        settings: limits, search and index settings.
        database: where the pool connects (kept for the embedded server's lifetime).
        fusion: the hybrid mode's fusion model, for an embedder without a second stage; None:
            the shipped one (`recall.search.fusion.default_fusion`).
        second_stage: the hybrid mode's learned second stage and gate (decision 0024): True
            for the one shipped for the embedder's model (the fusion where none is), False for
            the fusion always, or a `SecondStage` of your own fit.
        read_pool: a replica's pool for searches and reads; None uses `pool`. A user's reads
            stay on `pool` until the replica has replayed their latest write here (0021).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        embedder: Embedder,
        settings: Settings,
        *,
        database: Database | None = None,
        fusion: FusionModel | None = None,
        second_stage: SecondStage | bool = True,
        read_pool: AsyncConnectionPool | None = None,
    ) -> None:
        self.pool = pool
        self.read_pool = read_pool or pool
        self.fusion = default_fusion() if fusion is None else fusion
        self.second_stage: SecondStage | None = (
            second_stage_for(embedder.name) if second_stage is True else (second_stage or None)
        )
        self.embedder = embedder
        self.settings = settings
        self.database = database
        # (memory count, own HNSW index) per user. A stale entry costs speed, never results:
        # the exact plan is exact for any user, and the indexed path re-reads the plan. Writes
        # and erasure in this process drop the user's entry.
        self._plans: TTLCache[str, Plan] = TTLCache(maxsize=10000, ttl=300)
        self._index_tasks: dict[str, asyncio.Task[None]] = {}
        # With a replica: the primary's WAL end after each user's latest write or erasure in
        # this process. Their reads go to the primary until the replica has replayed that far
        # (decision 0021); an entry goes once seen replayed, or after an hour.
        self._fences: TTLCache[str, int] = TTLCache(maxsize=100000, ttl=3600)
        self._closed = False

    @asynccontextmanager
    async def connection(
        self, user_id: str | None = None, *, all_users: bool = False, read: bool = False
    ) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection in a transaction scoped, for row-level security, to one user
        (or with `all_users`, to everyone: for ingestion, statistics and maintenance).

        An escape hatch for applications and scripts; the store's own methods do not use it.

        Raises:
            StoreError: the database failed.
        """
        if user_id is None and not all_users:
            raise InvalidInputError("connection() needs a user_id or all_users=True")
        async with self._conn("connection", user=user_id, all_users=all_users, read=read) as conn:
            yield conn

    async def warm_up(self) -> None:
        """Load the embedding model now, so the first user does not wait for it."""
        await self.embedder.embed_documents(["warm-up"])
        await self.embedder.embed_query("warm-up")

    async def close(self) -> None:
        """Finish background index builds and close the pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        tasks = list(self._index_tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.pool.close()
        if self.read_pool is not self.pool:
            await self.read_pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def _conn(
        self,
        op: str,
        *,
        read: bool = False,
        user: str | None = None,
        all_users: bool = False,
        owner: bool = False,
        reader: str | None = None,
        fence: Collection[str] = (),
    ) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection for operation `op`: from the read pool when `read`; in a transaction
        scoped to `user` (or `all_users`), or as the owner role (`owner`), or as it comes.

        A read is for `reader` (or `user`): it goes to the primary while the replica has not
        replayed that user's latest write. A write names the users it changes in `fence`.
        """
        if self._closed:
            raise StoreError("the store is closed")
        try:
            async with self._pooled(read, reader or user) as conn:
                if owner:
                    async with as_owner(conn):
                        yield conn
                elif user is not None or all_users:
                    async with scope(conn, user_id=user, all_users=all_users):
                        yield conn
                else:
                    yield conn
                if fence and self.read_pool is not self.pool:
                    await self._fence(conn, fence)
        except PoolTimeout as exc:
            raise StoreError(f"{op}: no database connection available: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"{op} failed: {exc}") from exc

    @asynccontextmanager
    async def _pooled(self, read: bool, reader: str | None) -> AsyncIterator[AsyncConnection[Any]]:
        """A primary connection, or for a read a replica one, unless the replica has not yet
        replayed `reader`'s latest write: then a primary one, without waiting."""
        fence = self._fences.get(reader) if read and reader is not None else None
        if not read:
            pool = self.pool
        elif fence is None or reader is None:
            pool = self.read_pool
        else:
            async with self.read_pool.connection() as conn:
                replayed = await wal_replayed(conn)
                caught_up = replayed is None or replayed >= fence  # None: not a standby
                if caught_up:
                    if self._fences.get(reader) == fence:  # not moved on by a newer write
                        self._fences.pop(reader, None)
                    yield conn
            if caught_up:
                return
            log.info("store.replica.behind", behind_bytes=fence - (replayed or 0))
            pool = self.pool
        async with pool.connection() as conn:
            yield conn

    async def _fence(self, conn: AsyncConnection[Any], users: Collection[str]) -> None:
        """Note, after a write has committed on `conn`, where the primary's WAL ends: the
        users' reads stay on the primary until the replica has replayed that far."""
        position = await wal_written(conn)
        for user in users:
            self._fences[user] = max(position, self._fences.get(user, 0))

    def _turn(
        self,
        user_id: object,
        user_message: object,
        ai_response: object,
        *,
        kind: str = "turn",
        **kw: Any,
    ) -> Turn:
        """A checked turn, with this store's length (for its kind) and metadata limits."""
        return make_turn(
            user_id,
            user_message,
            ai_response,
            kind=kind,
            max_length=stored_length(kind, self.settings.max_message_length),
            max_metadata_bytes=self.settings.max_metadata_bytes,
            **kw,
        )

    def _note_added(self, user_id: str, count: int) -> None:
        """Keep a user's cached plan after a write (so the next search of a chat that just
        stored its turn still takes the one-call path), unless the write may take the user
        over the index threshold: then the next search re-reads it and schedules the build."""
        plan = self._plans.get(user_id)
        if plan is None:
            return
        total = plan.memories + count
        if plan.hnsw_index is None and total >= self.settings.user_index_threshold:
            self._plans.pop(user_id, None)
        else:
            self._plans[user_id] = Plan(total, plan.hnsw_index)
