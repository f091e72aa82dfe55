"""Search: the three retrieval modes, the choice of plan per user (exact, or the user's own
HNSW index; cached per user), and keyword search by BM25."""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg import AsyncConnection

from recall.db.memories import user_plan
from recall.db.search import keyword_rows, vector_rows
from recall.embeddings import Vector
from recall.errors import InvalidInputError
from recall.memory import Memory, MemoryRow, clean_id, clean_text
from recall.search.echo import is_unanswered
from recall.search.keywords import keywords_from_text, parse_keywords
from recall.search.modes import MODES, Mode
from recall.search.ranking import cosine, fuse, row_memory
from recall.store.base import Plan
from recall.store.checks import check_limit, check_threshold
from recall.store.maintenance import Maintenance

__all__ = ["ECHO_SLACK", "Search"]

ECHO_SLACK = 20  # rows fetched beyond the limit, so leaving out echoes still fills it


def _answered(rows: list[MemoryRow]) -> list[MemoryRow]:
    """The rows that are not a question left unanswered (recall.search.echo)."""
    return [r for r in rows if not is_unanswered(r.user_message, r.ai_response)]


class Search(Maintenance):
    """`MemoryStore.search` and `keyword_search` (a plan may schedule an index build, hence
    `Maintenance` below it)."""

    async def search(
        self,
        user_id: str,
        query_text: str,
        limit: int | None = None,
        similarity_threshold: float | None = None,
        *,
        mode: Mode | None = None,
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
            limit: 1 to 1000; None: `settings.max_memories`.
            similarity_threshold: 0 to 1; None: `settings.similarity_threshold`.
            mode: "semantic", "keyword" or "hybrid"; None: `settings.retrieval_mode`.
            query_vector: a precomputed query embedding; `query_text` is then not embedded.

        Raises:
            InvalidInputError, EmbeddingError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        text = clean_text(query_text, "query", max_length=self.settings.max_query_length)
        limit = check_limit(self.settings.max_memories if limit is None else limit)
        threshold = check_threshold(
            self.settings.similarity_threshold
            if similarity_threshold is None
            else similarity_threshold
        )
        mode = self.settings.retrieval_mode if mode is None else mode
        if mode not in MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        vector = (
            self.embedder.check_vector(query_vector)
            if query_vector is not None
            else await self.embedder.embed_query(text)
        )
        # a few more rows than asked for: echoes of the query are dropped (recall.search.echo)
        fetch = limit + ECHO_SLACK
        if mode == "keyword":
            rows = _answered(await self._keyword_rows(uid, text, vector, fetch))
            return [row_memory(r, score=r.bm25) for r in rows[:limit]]
        if mode == "semantic":
            rows = await self._vector_search(uid, vector, fetch, 1.0 - threshold)
            rows = _answered(rows)
            return [row_memory(r, score=cosine(r.distance)) for r in rows[:limit]]
        pool_size = max(limit, self.settings.hybrid_candidates)

        async def vector_side() -> list[MemoryRow]:
            return await self._vector_search(uid, vector, pool_size, 2.0)

        async def keyword_side() -> list[MemoryRow]:
            return await self._keyword_rows(uid, text, vector, pool_size)

        # two connections at once: the two candidate queries run in parallel on the server
        vec_rows, kw_rows = await asyncio.gather(vector_side(), keyword_side())
        # echoes leave before fusion: its rank features compare each candidate with the best
        fused = fuse(_answered(vec_rows), _answered(kw_rows), self.fusion)
        return [m for m, score in fused if score >= threshold][:limit]

    async def keyword_search(
        self,
        user_id: str,
        keywords: str,
        limit: int = 5,
        *,
        conversation_id: str | None = None,
    ) -> list[Memory]:
        """Keyword search (VectorMemorySearch): `;`-separated keywords, ORed, ranked by BM25.

        Keywords are sanitized (`recall.keywords`), at most 60 are used, and no full-text or
        SQL syntax in them can change the query. `Memory.score` is the BM25 score and
        `similarity` is None (no query vector).

        Args:
            user_id: whose memories to search.
            keywords: e.g. "dog; vet appointment; Max".
            limit: 1 to 1000 (5 by default).
            conversation_id: only this conversation (the discussion id); None: all.

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        cid = clean_id(conversation_id, "conversation_id", required=False)
        if not isinstance(keywords, str):
            raise InvalidInputError(f"keywords must be a string, not {type(keywords).__name__}")
        limit = check_limit(limit)
        async with self._conn(
            "keyword_search", read=True, reader=uid
        ) as conn:  # one call, scoped inside
            rows = await keyword_rows(
                conn,
                user_id=uid,
                keywords=parse_keywords(keywords),
                vector=None,
                limit=limit,
                conversation_id=cid,
            )
        return [row_memory(r, score=r.bm25) for r in rows]

    async def _plan(self, conn: AsyncConnection[Any], user_id: str) -> Plan:
        cached = self._plans.get(user_id)
        if cached is not None:
            return cached
        row = await user_plan(conn, user_id)
        plan = Plan(0, None) if row is None else Plan(int(row.memory_count), row.hnsw_index)
        self._plans[user_id] = plan
        if plan.hnsw_index is None and plan.memories >= self.settings.user_index_threshold:
            self._schedule_index(user_id)
        return plan

    async def _vector_search(
        self, uid: str, vector: Vector, limit: int, max_distance: float
    ) -> list[MemoryRow]:
        plan = self._plans.get(uid)
        if plan is not None:
            # A user whose plan is known: recall.search_exact and recall.search_indexed set
            # the row-level security key themselves (migrations 0005, 0010), so no
            # transaction: one round trip.
            async with self._conn("search", read=True, reader=uid) as conn:
                return await self._vector_rows(
                    conn, uid, vector, limit, max_distance, plan.hnsw_index
                )
        async with self._conn("search", read=True, user=uid) as conn:
            plan = await self._plan(conn, uid)
            return await self._vector_rows(conn, uid, vector, limit, max_distance, plan.hnsw_index)

    async def _vector_rows(
        self,
        conn: AsyncConnection[Any],
        uid: str,
        vector: Vector,
        limit: int,
        max_distance: float,
        index: str | None,
    ) -> list[MemoryRow]:
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
    ) -> list[MemoryRow]:
        # recall.search_keyword sets the row-level security key itself: no transaction
        async with self._conn("search", read=True, reader=uid) as conn:
            return await keyword_rows(
                conn, user_id=uid, keywords=keywords_from_text(text), vector=vector, limit=limit
            )
