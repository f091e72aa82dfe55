"""MemoryStore: store, search, list and erase one user's memories in PostgreSQL + pgvector."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
import structlog
from cachetools import TTLCache
from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from recall.config import Settings
from recall.db.bulk import copy_turns
from recall.db.migrate import apply_migrations, bind_embedding_space, pending_migrations
from recall.db.outbox import Outbox
from recall.db.pool import Database, connect_once, locate_database, open_pool
from recall.db.rls import as_owner, scope
from recall.db.search import keyword_rows, vector_rows
from recall.db.sql import query
from recall.db.userindex import build_user_index, drop_user_index, index_name
from recall.embeddings import Embedder, Vector, configured_embeddings
from recall.errors import InvalidInputError, MigrationError, RecallError, StoreError
from recall.memory import Memory, Turn, clean_id, clean_text, make_turn
from recall.search.fusion import DEFAULT_FUSION, FusionModel
from recall.search.keywords import keywords_from_text, parse_keywords
from recall.search.modes import MODES, Mode
from recall.search.ranking import cosine, fuse, row_memory

__all__ = ["MAX_LIMIT", "MemoryStore", "StoreConnector"]

log = structlog.stdlib.get_logger(__name__)

# a batch this large is checked in a worker thread (see MemoryStore._prepare_batch)
_THREAD_BATCH = 256


def _chunks(items: Iterable[Mapping[str, Any]], size: int) -> Iterator[list[Mapping[str, Any]]]:
    """`items` in lists of `size` (the last may be shorter), consumed lazily."""
    chunk: list[Mapping[str, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


MAX_LIMIT = 1000


def _check_limit(limit: object, name: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"{name} must be an integer between 1 and {MAX_LIMIT}")
    return limit


def _check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidInputError("similarity_threshold must be a number between 0 and 1")
    if not 0.0 <= float(threshold) <= 1.0:
        raise InvalidInputError("similarity_threshold must be between 0 and 1")
    return float(threshold)


class MemoryStore:
    """Long-term memory of many users in one PostgreSQL database.

    Open it with `MemoryStore.connect()`; the constructor takes ready parts (a pool whose
    connections have pgvector registered, an `Embedder`) for callers that manage their own.
    Every method is for one user, and no method returns another user's rows.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        embedder: Embedder,
        settings: Settings,
        *,
        database: Database | None = None,
        fusion: FusionModel = DEFAULT_FUSION,
        read_pool: AsyncConnectionPool | None = None,
    ) -> None:
        self.pool = pool
        self.read_pool = read_pool or pool
        self.fusion = fusion
        self.embedder = embedder
        self.settings = settings
        self.database = database
        # (memory count, own HNSW index) per user. A stale entry costs speed, never results:
        # the exact plan is exact for any user, and the indexed path re-reads the plan. Writes
        # and erasure in this process drop the user's entry.
        self._plans: TTLCache[str, tuple[int, str | None]] = TTLCache(maxsize=10000, ttl=300)
        self._index_tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    @classmethod
    def connect(
        cls,
        settings: Settings | None = None,
        *,
        embeddings: Embeddings | None = None,
        embedding_model_name: str | None = None,
    ) -> StoreConnector:
        """Open a store: `async with MemoryStore.connect() as store:` (or `await` it).

        Args:
            settings: None reads `Settings.from_env()`. With no database URL, the embedded
                server starts (or is reused) in `settings.data_dir`.
            embeddings: any LangChain `Embeddings`; None loads `settings.embedding_model`.
            embedding_model_name: the name recorded with the data for `embeddings`.

        Raises:
            ConfigError, StoreError, MigrationError, EmbeddingMismatchError: set-up failed.
        """
        return StoreConnector(cls, settings, embeddings, embedding_model_name)

    @asynccontextmanager
    async def connection(
        self, user_id: str | None = None, *, all_users: bool = False, read: bool = False
    ) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection in a transaction scoped, for row-level security, to one user
        (or with `all_users`, to everyone: for ingestion, statistics and maintenance).

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

    async def __aenter__(self) -> MemoryStore:
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
    ) -> AsyncIterator[AsyncConnection[Any]]:
        if self._closed:
            raise StoreError("the store is closed")
        pool = self.read_pool if read else self.pool
        try:
            async with pool.connection() as conn:
                if owner:
                    async with as_owner(conn):
                        yield conn
                elif user is not None or all_users:
                    async with scope(conn, user_id=user, all_users=all_users):
                        yield conn
                else:
                    yield conn
        except PoolTimeout as exc:
            raise StoreError(f"{op}: no database connection available: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"{op} failed: {exc}") from exc

    # writes -----------------------------------------------------------------------------------

    def _turn(self, user_id: object, user_message: object, ai_response: object, **kw: Any) -> Turn:
        return make_turn(
            user_id,
            user_message,
            ai_response,
            max_length=self.settings.max_message_length,
            max_metadata_bytes=self.settings.max_metadata_bytes,
            **kw,
        )

    async def add_turn(
        self,
        user_id: str,
        user_message: str,
        ai_response: str,
        *,
        conversation_id: str | None = None,
        created_at: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Store one user/AI turn pair and return it; the same turn twice is stored once.

        Texts are cleaned as `recall.memory.clean_text` documents (NUL removed, lone surrogates
        replaced, cut to `max_message_length`).

        Raises:
            InvalidInputError: a field is unusable; nothing is stored.
            EmbeddingError: the model failed; nothing is stored.
            StoreError: the database failed; nothing is stored.
        """
        turn = self._turn(
            user_id,
            user_message,
            ai_response,
            conversation_id=conversation_id,
            created_at=created_at,
            metadata=metadata,
        )
        [vector] = await self.embedder.embed_documents([turn.text])
        params = {
            "user_id": turn.user_id,
            "conversation_id": turn.conversation_id,
            "user_message": turn.user_message,
            "ai_response": turn.ai_response,
            "created_at": turn.created_at,
            "metadata": Jsonb(turn.metadata),
            "content_hash": turn.content_hash,
            "embedding": vector,
            "embedding_model": self.embedder.name,
            "kind": turn.kind,
        }
        # recall.add_memory sets the row-level security key itself (migration 0009): one
        # round trip, one transaction
        async with self._conn("add_turn") as conn:
            cur = await conn.execute(query("add_memory"), params)
            row = await cur.fetchone()
        if row is None:  # deleted between its two statements: store it again next time
            raise StoreError("add_turn: the turn was deleted while it was being stored")
        inserted = bool(row[2])
        self._note_added(turn.user_id, int(inserted))
        log.debug("memory.add.done", inserted=inserted)
        return Memory(
            id=str(row[0]),
            user_message=turn.user_message,
            ai_response=turn.ai_response,
            similarity=None,
            conversation_id=turn.conversation_id,
            created_at=row[1],
            metadata=turn.metadata,
        )

    async def add_turns(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = 1000,
        on_batch: Callable[[int], Awaitable[None] | None] | None = None,
        writers: int = 2,
    ) -> list[str]:
        """Bulk-store turns (dicts with `add_turn`'s argument names); return their ids in order.

        Each batch is embedded in model batches and written with one binary COPY in one
        transaction, so a batch is stored whole or not at all, and re-running an import stores
        nothing twice. A dict may carry a precomputed `embedding` (a sequence of floats).
        The next batch is checked (and embedded) while the server writes the ones before it,
        and up to `writers` batches are written at once, each on its own connection: the
        server's work per batch (indexes, full-text parse) then runs on several cores. Turns
        without a date are dated in the file's order whatever order the batches commit in,
        and `on_batch` reports batches in the file's order.

        Args:
            turns: the turns; consumed lazily, batch by batch.
            batch_size: turns per transaction.
            on_batch: called with the number of turns stored (counted in the file's order)
                after each batch.
            writers: batches written at once (1 writes one after the other).

        Raises:
            InvalidInputError: a turn is unusable (or `batch_size`/`writers` < 1); the message
                gives its position. Batches before it are stored, nothing of its batch is.
            EmbeddingError, StoreError: as in `add_turn`, for the failing batch. Batches before
                it are stored; with `writers` > 1, the one being written beside it may be too
                (it is waited for, so it is stored whole or not at all). Re-running the import
                stores the rest and nothing twice.
        """
        if batch_size < 1 or writers < 1:
            raise InvalidInputError(
                f"batch_size and writers must be >= 1, not {batch_size} and {writers}"
            )
        writers = min(writers, self.pool.max_size)  # more would only queue for a connection
        ids: list[str] = []
        in_flight: deque[asyncio.Task[list[str]]] = deque()

        async def settle(keep: int) -> None:  # report the oldest batches until `keep` remain
            try:
                while len(in_flight) > keep:
                    ids.extend(await in_flight[0])
                    in_flight.popleft()
                    if on_batch is not None and (res := on_batch(len(ids))) is not None:
                        await res
            except BaseException:
                # the others are left to commit or roll back whole, then the first error goes up
                await asyncio.gather(*in_flight, return_exceptions=True)
                in_flight.clear()
                raise

        clock = None
        seen = 0
        for chunk in _chunks(turns, batch_size):
            try:
                prepared = await self._prepare_batch(chunk, offset=seen)
                if clock is None:
                    clock = await self._import_clock()
            except BaseException:
                await settle(0)  # the batches before this one still land (or report an error)
                raise
            await settle(writers - 1)
            in_flight.append(asyncio.create_task(self._write_batch(*prepared, clock, seen)))
            seen += len(chunk)
        await settle(0)
        return ids

    async def _import_clock(self) -> datetime:
        async with self._conn("add_turns") as conn:
            cur = await conn.execute(query("import_clock"))
            row = await cur.fetchone()
        if row is None:
            raise StoreError("add_turns: the server returned no time")
        clock: datetime = row[0]
        return clock

    async def _prepare_batch(
        self, items: list[Mapping[str, Any]], *, offset: int
    ) -> tuple[list[Turn], list[Vector]]:
        """Check a batch's turns and vectors, and embed the turns that came without one."""
        if len(items) >= _THREAD_BATCH:  # CPU work off the event loop, so a write can go on
            turns, vectors = await asyncio.to_thread(self._check_batch, items, offset)
        else:
            turns, vectors = self._check_batch(items, offset)
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            computed = await self.embedder.embed_documents([turns[i].text for i in missing])
            for i, vec in zip(missing, computed, strict=True):
                vectors[i] = vec
        return turns, [v for v in vectors if v is not None]

    def _check_batch(
        self, items: list[Mapping[str, Any]], offset: int
    ) -> tuple[list[Turn], list[Vector | None]]:
        known = {"user_id", "user_message", "ai_response", "conversation_id", "created_at"}
        turns: list[Turn] = []
        vectors: list[Vector | None] = []
        for pos, item in enumerate(items, start=offset):
            if not isinstance(item, Mapping):
                raise InvalidInputError(f"turn #{pos} must be a mapping, not {type(item).__name__}")
            try:
                turns.append(
                    self._turn(
                        **{k: item.get(k) for k in known},
                        metadata=item.get("metadata"),
                        kind=item.get("kind") or "turn",
                    )
                )
            except InvalidInputError as exc:
                raise InvalidInputError(f"turn #{pos}: {exc}") from exc
            given = item.get("embedding")
            vectors.append(None if given is None else self.embedder.check_vector(given))
        return turns, vectors

    async def _write_batch(
        self, turns: list[Turn], vectors: list[Vector], clock: datetime, first: int
    ) -> list[str]:
        async with self._conn("add_turns", all_users=True) as conn:
            ids = await copy_turns(
                conn, turns, vectors, self.embedder.name, clock=clock, first=first
            )
        for user_id, count in Counter(t.user_id for t in turns).items():
            self._note_added(user_id, count)
        return ids

    # reads ------------------------------------------------------------------------------------

    def _note_added(self, user_id: str, count: int) -> None:
        """Keep a user's cached plan after a write (so the next search of a chat that just
        stored its turn still takes the one-call path), unless the write may take the user
        over the index threshold: then the next search re-reads it and schedules the build."""
        plan = self._plans.get(user_id)
        if plan is None:
            return
        total = plan[0] + count
        if plan[1] is None and total >= self.settings.user_index_threshold:
            self._plans.pop(user_id, None)
        else:
            self._plans[user_id] = (total, plan[1])

    async def _plan(self, conn: AsyncConnection[Any], user_id: str) -> tuple[int, str | None]:
        cached = self._plans.get(user_id)
        if cached is not None:
            return cached
        cur = await conn.execute(query("user_plan"), {"user_id": user_id})
        row = await cur.fetchone()
        plan: tuple[int, str | None] = (0, None) if row is None else (int(row[0]), row[1])
        self._plans[user_id] = plan
        if plan[1] is None and plan[0] >= self.settings.user_index_threshold:
            self._schedule_index(user_id)
        return plan

    async def search(
        self,
        user_id: str,
        query_text: str,
        limit: int = 3,
        similarity_threshold: float = 0.5,
        *,
        mode: Mode = "semantic",
        query_vector: Vector | None = None,
    ) -> list[Memory]:
        """The user's memories most relevant to `query_text`, best first.

        Modes:
            semantic: cosine similarity; returns at most `limit` memories with similarity
                >= `similarity_threshold`, the same as an exact search over all of the
                user's memories (docs/decisions/0001-per-user-search.md).
            keyword: BM25 over full-text search of the query's words; the threshold does not
                apply (BM25 has no fixed scale); `similarity` is still the cosine.
            hybrid: vector and keyword candidates fused into a calibrated relevance (0-1,
                `Memory.score`) that the threshold applies to
                (docs/decisions/0005-hybrid-retrieval.md); `similarity` is still the cosine.

        Args:
            user_id: whose memories to search.
            query_text: the text to embed (cut to `max_query_length`).
            limit: 1 to 1000.
            similarity_threshold: 0 to 1.
            mode: "semantic", "keyword" or "hybrid".
            query_vector: a precomputed query embedding; `query_text` is then not embedded.

        Raises:
            InvalidInputError, EmbeddingError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        text = clean_text(query_text, "query", max_length=self.settings.max_query_length)
        limit = _check_limit(limit)
        threshold = _check_threshold(similarity_threshold)
        if mode not in MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        vector = (
            self.embedder.check_vector(query_vector)
            if query_vector is not None
            else await self.embedder.embed_query(text)
        )
        if mode == "keyword":
            rows = await self._keyword_rows(uid, text, vector, limit)
            return [row_memory(r, score=float(r[8])) for r in rows]
        if mode == "semantic":
            rows = await self._vector_search(uid, vector, limit, 1.0 - threshold)
            return [row_memory(r, score=cosine(r[7])) for r in rows]
        pool_size = max(limit, self.settings.hybrid_candidates)

        async def vector_side() -> list[tuple[Any, ...]]:
            return await self._vector_search(uid, vector, pool_size, 2.0)

        async def keyword_side() -> list[tuple[Any, ...]]:
            return await self._keyword_rows(uid, text, vector, pool_size)

        # two connections at once: the two candidate queries run in parallel on the server
        vec_rows, kw_rows = await asyncio.gather(vector_side(), keyword_side())
        fused = fuse(vec_rows, kw_rows, self.fusion)
        return [m for m, score in fused if score >= threshold][:limit]

    async def _vector_search(
        self, uid: str, vector: Vector, limit: int, max_distance: float
    ) -> list[tuple[Any, ...]]:
        plan = self._plans.get(uid)
        if plan is not None:
            # A user whose plan is known: recall.search_exact and recall.search_indexed set
            # the row-level security key themselves (migrations 0005, 0010), so no
            # transaction: one round trip.
            async with self._conn("search", read=True) as conn:
                return await self._vector_rows(conn, uid, vector, limit, max_distance, plan[1])
        async with self._conn("search", read=True, user=uid) as conn:
            _count, index = await self._plan(conn, uid)
            return await self._vector_rows(conn, uid, vector, limit, max_distance, index)

    async def _vector_rows(
        self,
        conn: AsyncConnection[Any],
        uid: str,
        vector: Vector,
        limit: int,
        max_distance: float,
        index: str | None,
    ) -> list[tuple[Any, ...]]:
        return await vector_rows(
            conn,
            user_id=uid,
            vector=vector,
            limit=limit,
            max_distance=max_distance,
            index=index,
            ef_search=self.settings.hnsw_ef_search,
        )

    async def _keyword_rows(
        self, uid: str, text: str, vector: Vector, limit: int
    ) -> list[tuple[Any, ...]]:
        # recall.search_keyword sets the row-level security key itself: no transaction
        async with self._conn("search", read=True) as conn:
            return await keyword_rows(
                conn, user_id=uid, keywords=keywords_from_text(text), vector=vector, limit=limit
            )

    async def keyword_search(
        self,
        user_id: str,
        keywords: str,
        limit: int = 5,
        *,
        conversation_id: str | None = None,
    ) -> list[Memory]:
        """The seed's VectorMemorySearch: `;`-separated keywords, ORed, ranked by BM25.

        Keywords are sanitized (`recall.keywords`), at most 60 are used, and no full-text or
        SQL syntax in them can change the query. `Memory.score` is the BM25 score and
        `similarity` is None (no query vector).

        Args:
            user_id: whose memories to search.
            keywords: e.g. "dog; vet appointment; Max".
            limit: 1 to 1000 (the seed's default is 5).
            conversation_id: only this conversation (the seed's discussion id); None: all.

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        cid = clean_id(conversation_id, "conversation_id", required=False)
        if not isinstance(keywords, str):
            raise InvalidInputError(f"keywords must be a string, not {type(keywords).__name__}")
        limit = _check_limit(limit)
        async with self._conn("keyword_search", read=True) as conn:  # one call, scoped inside
            rows = await keyword_rows(
                conn,
                user_id=uid,
                keywords=parse_keywords(keywords),
                vector=None,
                limit=limit,
                conversation_id=cid,
            )
        return [row_memory(r, score=float(r[8])) for r in rows]

    async def recent(self, user_id: str, n: int = 5) -> list[Memory]:
        """The user's `n` most recent memories, newest first (similarity None).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        n = _check_limit(n, "n")
        async with self._conn("recent", read=True, user=uid) as conn:
            cur = await conn.execute(query("recent"), {"user_id": uid, "limit": n})
            rows = await cur.fetchall()
        return [row_memory(r) for r in rows]

    async def get(self, user_id: str, memory_id: str) -> Memory | None:
        """One of the user's memories by id, or None (also for another user's id).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        mid = _uuid(memory_id)
        if mid is None:
            return None
        async with self._conn("get", read=True, user=uid) as conn:
            cur = await conn.execute(query("get_memory"), {"user_id": uid, "id": mid})
            row = await cur.fetchone()
        return None if row is None else row_memory(row)

    # erasure ----------------------------------------------------------------------------------

    async def delete(self, user_id: str, memory_id: str) -> bool:
        """Delete one of the user's memories; return whether it existed.

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        mid = _uuid(memory_id)
        if mid is None:
            return False
        async with self._conn("delete", user=uid) as conn:
            cur = await conn.execute(query("delete_memory"), {"user_id": uid, "id": mid})
            deleted = cur.rowcount > 0
        self._plans.pop(uid, None)  # type: ignore[arg-type]
        return deleted

    async def forget_user(self, user_id: str, *, outboxes: Sequence[Outbox] = ()) -> int:
        """Erase everything of the user: memories (turns, notes, model-written), bookkeeping,
        tracker, rolling summaries, their own HNSW index, and turns still waiting in the given
        writer queues (`TurnWriter.outbox`).

        Returns:
            How many memories were deleted (queued turns included).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        task = self._index_tasks.pop(uid, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        async with self._conn("forget_user", user=uid) as conn:
            cur = await conn.execute(query("forget_memories"), {"user_id": uid})
            count = cur.rowcount
            await conn.execute(query("forget_progress"), {"user_id": uid})
            await conn.execute(query("forget_summaries"), {"user_id": uid})
            cur = await conn.execute(query("forget_user_row"), {"user_id": uid})
            row = await cur.fetchone()
        # an index may exist without its row when a build raced the erasure: drop by name
        name = row[0] if row is not None and row[0] else index_name(uid)
        async with self._conn("forget_user", owner=True) as conn:
            await drop_user_index(conn, name)
        self._plans.pop(uid, None)
        for outbox in outboxes:
            count += await outbox.forget(uid)
        log.info("memory.forget.done", count=count)
        return count

    # maintenance ------------------------------------------------------------------------------

    def _schedule_index(self, user_id: str) -> None:
        if self._closed or user_id in self._index_tasks:
            return
        task = asyncio.get_running_loop().create_task(self._build_index(user_id))
        self._index_tasks[user_id] = task
        task.add_done_callback(lambda _t: self._index_tasks.pop(user_id, None))

    async def _build_index(self, user_id: str) -> None:
        try:
            async with self._conn("build_user_index", owner=True) as conn:
                await build_user_index(
                    conn,
                    user_id,
                    m=self.settings.hnsw_m,
                    ef_construction=self.settings.hnsw_ef_construction,
                    wait=False,
                )
            self._plans.pop(user_id, None)
        except RecallError:
            log.exception("db.user_index.failed")

    async def wait_for_index_builds(self) -> None:
        """Wait until the index builds scheduled in the background have finished."""
        while self._index_tasks:
            await asyncio.gather(*self._index_tasks.values(), return_exceptions=True)

    async def optimize(self) -> list[str]:
        """Build the HNSW index of every user at or over `user_index_threshold` memories.

        Runs after bulk imports (`recall import` calls it); search schedules the same build in
        the background when it meets such a user. Returns the user ids indexed by this call.

        Raises:
            StoreError.
        """
        async with self._conn("optimize", owner=True) as conn:
            cur = await conn.execute(
                query("users_over_threshold"), {"threshold": self.settings.user_index_threshold}
            )
            users = [r[0] for r in await cur.fetchall()]
            built = []
            for user_id in users:
                name = await build_user_index(
                    conn,
                    user_id,
                    m=self.settings.hnsw_m,
                    ef_construction=self.settings.hnsw_ef_construction,
                    wait=True,
                )
                if name is not None:
                    built.append(user_id)
                    self._plans.pop(user_id, None)
        return built

    async def stats(self) -> dict[str, int]:
        """Counts for operators: memories, users, indexed users, largest user, bytes on disk.

        Raises:
            StoreError.
        """
        async with self._conn("stats", all_users=True) as conn:
            cur = await conn.execute(query("stats"))
            row = await cur.fetchone()
        assert row is not None
        keys = ("memories", "users", "indexed_users", "largest_user", "bytes")
        return dict(zip(keys, (int(v) for v in row), strict=True))

    async def user_buckets(self) -> list[tuple[str, int, int]]:
        """(bucket, users, memories) per user size bucket: 1-10, 11-100, ... over 10,000.

        Raises:
            StoreError.
        """
        async with self._conn("user_buckets", all_users=True) as conn:
            cur = await conn.execute(query("user_buckets"))
            return [(str(b), int(u), int(m)) for b, u, m in await cur.fetchall()]


def _uuid(value: object) -> UUID | None:
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise InvalidInputError(f"memory_id must be a string, not {type(value).__name__}")
    try:
        return UUID(value)
    except ValueError:
        return None  # not an id we could have issued: nothing to find


class StoreConnector:
    """What `MemoryStore.connect()` returns: use with `async with`, or `await` it."""

    def __init__(
        self,
        cls: type[MemoryStore],
        settings: Settings | None,
        embeddings: Embeddings | None,
        name: str | None,
    ) -> None:
        self._cls = cls
        self._settings = settings
        self._embeddings = embeddings
        self._name = name
        self._store: MemoryStore | None = None

    async def open(self) -> MemoryStore:
        """Start or reach the database, migrate it, check the model, open the pool."""
        settings = self._settings or Settings.from_env()
        embeddings = self._embeddings or configured_embeddings(settings)
        embedder = Embedder(
            embeddings,
            name=self._name,
            max_query_length=settings.max_query_length,
            cache_ttl=settings.embedding_cache_ttl,
            cache_size=settings.embedding_cache_size,
            batch_size=settings.embedding_batch_size,
        )
        database = await locate_database(settings)
        conn = await connect_once(database.url)
        try:
            if settings.auto_migrate:
                await apply_migrations(conn)
            elif pending := await pending_migrations(conn):
                names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
                raise MigrationError(
                    f"the database needs migrations ({names}): run `recall migrate`"
                )
            await bind_embedding_space(conn, embedder.name, await embedder.dimensions())
        except psycopg.Error as exc:
            raise StoreError(f"database set-up failed: {exc}") from exc
        finally:
            await conn.close()
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
        return self._cls(pool, embedder, settings, database=database, read_pool=read_pool)

    def __await__(self) -> Generator[Any, None, MemoryStore]:
        return self.open().__await__()

    async def __aenter__(self) -> MemoryStore:
        self._store = await self.open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()
