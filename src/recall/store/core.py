"""What every part of `MemoryStore` shares: one `StoreCore`, handed to each part when the
store is made. Its pools, embedder and settings, the one ranker of the default mode, the
connection scoping (row-level security, errors wrapped as `StoreError`, reads on a replica
fenced after a user's writes), the per-user plan cache that writes keep current, the users'
held memories, and closing the pools."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

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
from recall.errors import StoreError
from recall.memory import Turn, make_turn, stored_length
from recall.search.fusion import default_fusion
from recall.search.rankers import Ranker
from recall.search.second_stage import second_stage_for
from recall.store.held import HeldRows

__all__ = ["Plan", "StoreCore", "shipped_ranker"]

log = structlog.stdlib.get_logger(__name__)


class Plan(NamedTuple):
    """What the search plan of a user depends on, cached per user."""

    memories: int  # how many memories the user has
    hnsw_index: str | None  # the name of their own HNSW index, if built


def shipped_ranker(embedding_model: str) -> Ranker[Any]:
    """The default mode's ranker shipped for `embedding_model`: its learned second stage and
    gate (decision 0024), else the fusion (decision 0005). A store given a ranker uses that
    instead: `recall.search.fusion.default_fusion()` for the fusion always, or a `SecondStage`
    or `FusionModel` of one's own fit."""
    stage = second_stage_for(embedding_model)
    return default_fusion() if stage is None else stage


class StoreCore:
    """The state and plumbing the store's parts share: `MemoryStore` makes one and passes it
    to each part (docs/decisions/0033-the-store-decides.md, "The store as parts held").

    Args:
        pool, embedder, settings, database, ranker, read_pool: as `MemoryStore` takes them
            (its defaults are the store's; here each is given).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        embedder: Embedder,
        settings: Settings,
        *,
        database: Database | None,
        ranker: Ranker[Any] | None,
        read_pool: AsyncConnectionPool | None,
    ) -> None:
        self.pool = pool
        self.read_pool = read_pool or pool
        self.ranker: Ranker[Any] = shipped_ranker(embedder.name) if ranker is None else ranker
        self.embedder = embedder
        self.settings = settings
        self.database = database
        # (memory count, own HNSW index) per user. A stale entry costs speed, never results:
        # the exact plan is exact for any user, and the indexed path re-reads the plan. Writes
        # and erasure in this process drop the user's entry.
        self.plans: TTLCache[str, Plan] = TTLCache(maxsize=10000, ttl=300)
        # With a replica: the primary's WAL end after each user's latest write or erasure in
        # this process. Their reads go to the primary until the replica has replayed that far
        # (decision 0021); an entry goes once seen replayed, or after an hour.
        self.fences: TTLCache[str, int] = TTLCache(maxsize=100000, ttl=3600)
        # Each searched user's memories, checked against their row versions at every search
        # (recall.store.held): a stale entry is brought up to date before it is read.
        self.held = HeldRows(settings.held_memories_mb)
        # the held users being brought up to date after a write here (`note_added`), and those
        # written again meanwhile (brought up to date once more after)
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._written_again: set[str] = set()
        self.closed = False

    def drop_cached(self, user_id: str) -> None:
        """Drop what this process holds of a user whose memories were erased or removed here:
        their plan and their held memories (so no erased text stays in memory)."""
        self.plans.pop(user_id, None)
        self._written_again.discard(user_id)
        refreshing = self._refreshing.get(user_id)
        if refreshing is not None:  # what it read may be from before the erasure
            refreshing.cancel()
        self.held.drop(user_id)

    async def close_pools(self) -> None:
        """Close the pools (the store marks itself `closed` and stops its builds first), once
        the held users' refreshes (`note_added`) are cancelled."""
        refreshing = list(self._refreshing.values())
        for task in refreshing:
            task.cancel()
        await asyncio.gather(*refreshing, return_exceptions=True)
        await self.pool.close()
        if self.read_pool is not self.pool:
            await self.read_pool.close()

    @asynccontextmanager
    async def conn(
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
        if self.closed:
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
        fence = self.fences.get(reader) if read and reader is not None else None
        if not read:
            pool = self.pool
        elif fence is None or reader is None:
            pool = self.read_pool
        else:
            async with self.read_pool.connection() as conn:
                replayed = await wal_replayed(conn)
                caught_up = replayed is None or replayed >= fence  # None: not a standby
                if caught_up:
                    if self.fences.get(reader) == fence:  # not moved on by a newer write
                        self.fences.pop(reader, None)
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
            self.fences[user] = max(position, self.fences.get(user, 0))

    def turn(
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

    def note_added(self, user_id: str, count: int) -> None:
        """Keep a user's cached plan after a write (so the next search of a chat that just
        stored its turn still takes the one-call path), unless the write may take the user
        over the index threshold: then the next search re-reads it and schedules the build.
        A user held here has their held memories brought up to date in the background
        (`refresh_held`)."""
        self.refresh_held(user_id)
        plan = self.plans.get(user_id)
        if plan is None:
            return
        total = plan.memories + count
        if plan.hnsw_index is None and total >= self.settings.user_index_threshold:
            self.plans.pop(user_id, None)
        else:
            self.plans[user_id] = Plan(total, plan.hnsw_index)

    def refresh_held(self, user_id: str) -> None:
        """Bring a held user's memories up to date in the background after a write here, so
        that their next search (the chat's next turn) finds them current instead of reading
        the versions and the new rows beside its query's embedding (decision 0060). A search
        still checks them: a write elsewhere, or one this misses, is read then."""
        if self.closed or self.held.get(user_id) is None:
            return
        if user_id in self._refreshing:
            self._written_again.add(user_id)
            return
        task = asyncio.get_running_loop().create_task(self._refresh(user_id))
        self._refreshing[user_id] = task
        task.add_done_callback(lambda _task: self._refreshed(user_id))

    async def _refresh(self, user_id: str) -> None:
        try:
            async with self.conn("held_refresh", read=True, reader=user_id) as conn:
                await self.held.sync(conn, user_id)
        except (StoreError, ValueError) as exc:  # the next search reads them
            log.warning("store.held.refresh_failed", error=str(exc))

    def _refreshed(self, user_id: str) -> None:
        self._refreshing.pop(user_id, None)
        if user_id in self._written_again:
            self._written_again.discard(user_id)
            self.refresh_held(user_id)
