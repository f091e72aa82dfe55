"""MemoryStore: store, search, list and erase one user's memories in PostgreSQL + pgvector.

One part per job, each in its own module, sharing a `StoreCore` (pools, embedder, settings,
connection scoping, plan cache, ranker): `search` over `candidates`, `writes` with `repeats`,
`bulk`, `reads`, `conversations`, `erasure` and `maintenance`. Each public method says in a
line what it does and calls its part, where it is documented in full (`Search.find` for
`find`, ...). Opening one: `recall.store.connector`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Self

from langchain_core.embeddings import Embeddings
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from recall.config import RetrievalMode, Settings
from recall.db.pool import Database
from recall.embeddings import Embedder, Vector
from recall.errors import InvalidInputError
from recall.limits import PAGE_SIZE, RECENT_LIMIT
from recall.memory import Memory, Turn
from recall.outbox import Outbox
from recall.rows import CandidateRow, ConversationSummary
from recall.search.assembly import KeywordSide
from recall.search.provenance import Provenance
from recall.search.rankers import Ranker
from recall.store.bulk import Bulk, ImportProgress
from recall.store.candidates import Candidates
from recall.store.checks import MAX_LIMIT
from recall.store.connector import StoreConnector
from recall.store.conversations import Conversations
from recall.store.core import StoreCore
from recall.store.erasure import Erasure, Retention
from recall.store.maintenance import Maintenance
from recall.store.reads import MemoryLinks, Reads
from recall.store.repeats import Repeats
from recall.store.results import SearchResult
from recall.store.search import Search
from recall.store.writes import Writes

__all__ = ["MAX_LIMIT", "MemoryStore", "StoreConnector"]


class MemoryStore:
    """Long-term memory of many users in one PostgreSQL database.

    Open it with `MemoryStore.connect()`; the constructor takes ready parts (a pool whose
    connections have pgvector registered, an `Embedder`, `Settings`) for callers that manage
    their own. Every method is for one user, and no method returns another user's rows.

    Args:
        pool: an autocommit pool whose connections have pgvector registered.
        embedder: embeds turns and queries.
        settings: limits, search and index settings.
        database: where the pool connects (kept for the embedded server's lifetime).
        ranker: the default mode's one ranker (`recall.search.rankers.Ranker`); None: the one
            shipped for the embedder's model (`recall.store.core.shipped_ranker`).
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
        ranker: Ranker[Any] | None = None,
        read_pool: AsyncConnectionPool | None = None,
    ) -> None:
        core = StoreCore(pool, embedder, settings, database=database, ranker=ranker,
                         read_pool=read_pool)  # fmt: skip
        self.core = core  # what the parts share; tests and benchmarks look inside it
        self.loop: asyncio.AbstractEventLoop | None = _running_loop()
        """The event loop the store was opened on, which its pools belong to (None when made
        outside one); a sync node sends its work there (`recall.nodes.blocking`)."""
        self._maintenance = Maintenance(core)
        self._candidates = Candidates(core, self._maintenance)
        self._search = Search(core, self._candidates)
        self._writes = Writes(core, Repeats(core))
        self._bulk = Bulk(core)
        self._reads = Reads(core)
        self.conversations = Conversations(core)
        """One conversation's memory creation state (`recall.creation`, the context nodes):
        its newest memories, unprocessed turns, chunks, rolling summary and who waits."""
        self._erasure = Erasure(core, self._maintenance)
        if self.loop is not None:  # memories stored before the writer judged them (0049)
            self._maintenance.schedule_judging()

    @classmethod
    def connect(
        cls,
        settings: Settings | None = None,
        *,
        embeddings: Embeddings | None = None,
        embedding_model_name: str | None = None,
        ranker: Ranker[Any] | None = None,
    ) -> StoreConnector[Self]:
        """Open a store: `async with MemoryStore.connect() as store:` (or `await` it).

        Args:
            settings: None uses `process_settings()`. With no database URL, the embedded
                server starts (or is reused) in `settings.data_dir`.
            embeddings: any LangChain `Embeddings`; None loads `settings.embedding_model`, or,
                left unset, the model the database is bound to, else the default
                (`recall.embeddings.configured_embeddings`).
            embedding_model_name: the name recorded with the data for `embeddings`.
            ranker: the default mode's ranker (docs/retrieval.md); None: the one shipped for
                the embedder's model (its second stage, else the fusion of decision 0005).

        Raises:
            ConfigError, StoreError, MigrationError, EmbeddingMismatchError: set-up failed.
        """
        return StoreConnector(cls, settings, embeddings, embedding_model_name, ranker)

    @property
    def pool(self) -> AsyncConnectionPool:
        """The primary's pool (writes, and reads with no replica)."""
        return self.core.pool

    @property
    def read_pool(self) -> AsyncConnectionPool:
        """The pool searches and reads use: a replica's, else `pool`."""
        return self.core.read_pool

    @property
    def embedder(self) -> Embedder:
        """The embedder of turns and queries."""
        return self.core.embedder

    @property
    def settings(self) -> Settings:
        """The store's settings: its limits and defaults."""
        return self.core.settings

    @property
    def database(self) -> Database | None:
        """Where the pool connects (the embedded server, when it started one)."""
        return self.core.database

    @property
    def ranker(self) -> Ranker[Any]:
        """The default mode's one ranker: a `SecondStage` (0024) or a `FusionModel` (0005)."""
        return self.core.ranker

    @ranker.setter
    def ranker(self, ranker: Ranker[Any]) -> None:
        self.core.ranker = ranker

    @asynccontextmanager
    async def connection(
        self, user_id: str | None = None, *, all_users: bool = False, read: bool = False
    ) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection in a transaction scoped, for row-level security, to one user
        (or with `all_users`, to everyone): an escape hatch for applications and scripts.

        Raises:
            InvalidInputError: neither a `user_id` nor `all_users`.
            StoreError: the database failed.
        """
        if user_id is None and not all_users:
            raise InvalidInputError("connection() needs a user_id or all_users=True")
        async with self.core.conn("connection", user=user_id, all_users=all_users, read=read) as c:
            yield c

    async def warm_up(self) -> None:
        """Load the embedding model now, so the first user does not wait for it."""
        await self.core.embedder.embed_documents(["warm-up"])
        await self.core.embedder.embed_query("warm-up")

    async def close(self) -> None:
        """Finish background index builds and close the pool (idempotent)."""
        if self.core.closed:
            return
        self.core.closed = True
        await self._maintenance.stop_builds()
        await self.core.close_pools()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_for_index_builds(self) -> None:
        """Wait until the index builds scheduled in the background have finished."""
        await self._maintenance.wait_for_index_builds()

    async def wait_for_judging(self) -> int | None:
        """Wait for the background judging of memories stored before the writer judged them:
        how many this store judged, None when another process did it or it failed (logged)."""
        return await self._maintenance.judged()

    async def optimize(self) -> list[str]:
        """Build the HNSW index of every user at or over `user_index_threshold` memories."""
        return await self._maintenance.optimize()

    async def stats(self) -> dict[str, int]:
        """Counts for operators: memories, users, indexed users, largest user, bytes on disk."""
        return await self._maintenance.stats()

    async def user_buckets(self) -> list[tuple[str, int, int]]:
        """(bucket, users, memories) per user size bucket: 1-10, 11-100, ... over 10,000."""
        return await self._maintenance.user_buckets()

    async def candidates(
        self,
        user_id: str,
        query_text: str,
        query_vector: Vector,
        k: int,
        *,
        words: KeywordSide | None = None,
    ) -> tuple[list[CandidateRow], list[int]]:
        """The second stage's candidates for a query and the vector side's order as indexes
        into them (`Candidates.for_query`): what is fitted is what is served."""
        return await self._candidates.for_query(user_id, query_text, query_vector, k, words=words)

    async def search(
        self,
        user_id: str,
        query_text: str,
        limit: int | None = None,
        similarity_threshold: float | None = None,
        *,
        mode: RetrievalMode | None = None,
        query_vector: Vector | None = None,
        explain: bool = False,
        now: datetime | None = None,
        intent: bool = True,
    ) -> list[Memory]:
        """The user's memories most relevant to `query_text`, best first: the memories of
        `find(...)` that pass (`SearchResult.memories`); a time the message names is read
        from `now` (the clock's when None); `intent` False for a search someone typed (the
        gate does not ask whether the message asks anything of memory)."""
        return await self._search.search(user_id, query_text, limit, similarity_threshold,
                                         mode=mode, query_vector=query_vector, explain=explain,
                                         now=now, intent=intent)  # fmt: skip

    async def find(
        self,
        user_id: str,
        query_text: str,
        limit: int | None = None,
        similarity_threshold: float | None = None,
        *,
        mode: RetrievalMode | str | None = None,
        query_vector: Vector | None = None,
        explain: bool = False,
        kept_out: bool = False,
        now: datetime | None = None,
        intent: bool = True,
    ) -> SearchResult:
        """Search as `search` does, and say what was resolved and decided: the mode, limit
        and threshold used, and each memory's score and whether it passes (decision 0033)."""
        return await self._search.find(user_id, query_text, limit, similarity_threshold,
                                       mode=mode, query_vector=query_vector, explain=explain,
                                       kept_out=kept_out, now=now, intent=intent)  # fmt: skip

    def search_limit(self, limit: int | None = None) -> int:
        """The most memories a search returns when asked for `limit` (None: this store's
        default, `settings.max_memories`), as `find` resolves it."""
        return self._search.search_limit(limit)

    async def keyword_search(
        self,
        user_id: str,
        keywords: str,
        limit: int | None = None,
        *,
        conversation_id: str | None = None,
    ) -> list[Memory]:
        """Keyword search (VectorMemorySearch): `;`-separated keywords, ORed, ranked by BM25;
        `limit` None: `recall.limits.KEYWORD_LIMIT`."""
        return await self._search.keyword_search(user_id, keywords, limit,
                                                  conversation_id=conversation_id)  # fmt: skip

    async def add_turn(
        self,
        user_id: str,
        user_message: str,
        ai_response: str,
        *,
        conversation_id: str | None = None,
        created_at: Any = None,
        metadata: Mapping[str, Any] | None = None,
        kind: str = "turn",
        provenance: Provenance | Mapping[str, Any] | None = None,
    ) -> Memory:
        """Store one user/AI turn pair and return it; the same turn twice is stored once, and
        a turn that repeats a stored memory of the user almost word for word is counted on it
        and not stored again (`settings.link_repeated_turns`; the stored memory is returned)."""
        return await self._writes.add_turn(user_id, user_message, ai_response,
                                           conversation_id=conversation_id,
                                           created_at=created_at, metadata=metadata, kind=kind,
                                           provenance=provenance)  # fmt: skip

    async def add_checked_turn(self, turn: Turn) -> Memory:
        """Store a turn already checked with this store's limits and return it, as `add_turn`
        does after checking: `recall.memory.make_turn(...)` with `max_length` and
        `max_metadata_bytes` from `store.settings`. The writer node checks each turn so before
        queueing it and hands the checked turn here, so a turn is checked once on its way."""
        return await self._writes.add_checked_turn(turn)

    async def add_turns(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = 1000,
        on_batch: Callable[[int], Awaitable[None] | None] | None = None,
        writers: int = 2,
        progress: ImportProgress | None = None,
        on_progress: Callable[[ImportProgress], None] | None = None,
    ) -> list[str]:
        """Bulk-store turns (dicts with `add_turn`'s argument names); return their ids in order."""
        return await self._bulk.add_turns(turns, batch_size=batch_size, on_batch=on_batch,
                                          writers=writers, progress=progress,
                                          on_progress=on_progress)  # fmt: skip

    async def recent(self, user_id: str, n: int = RECENT_LIMIT) -> list[Memory]:
        """The user's `n` most recent memories, newest first (similarity None)."""
        return await self._reads.recent(user_id, n)

    async def page(
        self,
        user_id: str,
        limit: int = PAGE_SIZE,
        before: Memory | tuple[datetime, str] | None = None,
        *,
        kind: str | None = None,
    ) -> list[Memory]:
        """One page of the user's memories, newest first: the `limit` written before `before`
        (the last memory of the previous page, or its (created_at, id); None: the first page),
        only those of `kind` ("turn", "note" or "summary") when it is set."""
        return await self._reads.page(user_id, limit, before, kind=kind)

    async def export(self, user_id: str, *, page_size: int = 1000) -> AsyncIterator[Memory]:
        """Every memory of the user, newest first, read from the primary (a replica may not
        have the latest yet) one page of `page_size` at a time, each on its own connection.
        A memory written during the export may be left out; none is read twice."""
        async for memory in self._reads.export(user_id, page_size=page_size):
            yield memory

    async def summaries(self, user_id: str, limit: int = 100) -> list[ConversationSummary]:
        """The rolling summaries of the user's conversations (`recall.creation`), newest first."""
        return await self._reads.summaries(user_id, limit)

    async def get(self, user_id: str, memory_id: str) -> Memory | None:
        """One of the user's memories by id, or None (also for another user's id)."""
        return await self._reads.get(user_id, memory_id)

    async def links(self, user_id: str, memory_id: str) -> MemoryLinks | None:
        """One of the user's memories with its sources and restatements
        (`recall.search.provenance`), or None (also for another user's id)."""
        return await self._reads.links(user_id, memory_id)

    async def delete(self, user_id: str, memory_id: str) -> bool:
        """Delete one of the user's memories; return whether it existed."""
        return await self._erasure.delete(user_id, memory_id)

    async def forget_before(self, user_id: str, before: datetime) -> int:
        """Delete the user's memories dated before `before` (of every kind); the newer ones,
        the user's trackers and summaries stay."""
        return await self._erasure.forget_before(user_id, before)

    async def apply_retention(
        self,
        *,
        days: int | None = None,
        max_per_user: int | None = None,
        now: datetime | None = None,
    ) -> Retention:
        """Remove every user's memories older than `days`, then each user's beyond
        `max_per_user` (issue 37: first the restatements whose source is still stored, oldest
        first, then the oldest of the others): an age pass over the users, then a cap pass,
        each removing one user's memories per transaction. A failure leaves the removals
        before it done: users the age pass reached may not have had the cap pass yet."""
        return await self._erasure.apply_retention(days=days, max_per_user=max_per_user, now=now)

    async def forget_user(self, user_id: str, *, outboxes: Sequence[Outbox] = ()) -> int:
        """Erase everything of the user: memories, bookkeeping, tracker, rolling summaries,
        their own HNSW index, and turns still waiting in `outboxes` (`TurnWriter.outbox`)."""
        return await self._erasure.forget_user(user_id, outboxes=outboxes)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
