"""Search: the three retrieval modes, the choice of plan per user (exact, or the user's own
HNSW index; cached per user), and keyword search by BM25."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from itertools import islice
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import AsyncConnection

from recall.config import RETRIEVAL_MODES, RetrievalMode
from recall.db.memories import user_plan
from recall.db.search import detail_rows, keyword_rows, scoped_rows, term_rows, vector_rows
from recall.embeddings import Vector
from recall.errors import InvalidInputError
from recall.memory import Memory, MemoryRow, clean_id, clean_text
from recall.search.candidates import CandidateRow, DetailRow, TermRow, assemble, split_scoped
from recall.search.echo import is_unanswered
from recall.search.keywords import KeywordQuery, keywords_from_text, parse_keywords
from recall.search.rankers import Query
from recall.search.ranking import cosine, fuse, row_memory
from recall.search.restatements import Candidate, arrange
from recall.search.second_stage import SecondStage, StageCandidates
from recall.store.base import Plan
from recall.store.checks import check_limit, check_threshold
from recall.store.maintenance import Maintenance

__all__ = ["ECHO_SLACK", "SCOPE", "SCOPE_FROM", "Search"]

ECHO_SLACK = 20  # rows fetched beyond the limit, so leaving out echoes still fills it
# A user with more memories than SCOPE_FROM gets the second stage over their SCOPE nearest
# memories: BM25 and its statistics are taken there (as for a user of SCOPE memories, the size
# the second stage was fitted on), so its cost does not grow with the history; a memory that only
# BM25 would find outside them is not a candidate (docs/retrieval.md).
SCOPE_FROM = 2000
SCOPE = 300


def _answered(rows: list[MemoryRow]) -> list[MemoryRow]:
    """The rows that are not a question left unanswered (recall.search.echo)."""
    return [r for r in rows if not is_unanswered(r.user_message, r.ai_response)]


def _best_by_bm25(terms: list[TermRow], k: int) -> list[UUID]:
    """The ids of the best `k` memories by BM25, and a few more: questions left unanswered
    leave afterwards (`_pick`). Ties go by id: UUIDs compare as their text does, and as
    PostgreSQL orders them."""
    hits = sorted((t for t in terms if t.id is not None), key=lambda t: (-(t.bm25 or 0.0), t.id))
    return [t.id for t in hits[: k + ECHO_SLACK] if t.id is not None]


def _unanswered_ids(rows: list[DetailRow]) -> set[UUID]:
    """The ids of the rows that are a question left unanswered, each row judged once."""
    return {r.id for r in rows if is_unanswered(r.user_message, r.ai_response)}


def _pick(
    terms: list[TermRow], details: list[DetailRow], near: list[UUID], k: int, unanswered: set[UUID]
) -> list[DetailRow]:
    """The second stage's candidates, in `details`' order: the vector side's (`near`), and the
    best `k` by BM25 once the questions left unanswered (`unanswered`, their ids) are out (the
    SQL brings a few more for that). Picked before they are assembled, so that only they are."""
    bm25 = {t.id: t.bm25 or 0.0 for t in terms if t.id is not None}
    answered = [d for d in details if d.id not in unanswered]
    by_bm25 = sorted(
        (d for d in answered if bm25.get(d.id, 0.0) > 0), key=lambda d: (-bm25[d.id], d.id)
    )
    wanted = set(near) | {d.id for d in by_bm25[:k]}
    return [d for d in answered if d.id in wanted]


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
        mode: RetrievalMode | None = None,
        query_vector: Vector | None = None,
        explain: bool = False,
    ) -> list[Memory]:
        """The user's memories most relevant to `query_text`, best first.

        Modes:
            semantic: cosine similarity; returns at most `limit` memories with similarity
                >= `similarity_threshold`, the same as an exact search over all of the
                user's memories (docs/decisions/0001-per-user-search.md).
            keyword: BM25 over full-text search of the query's words; the threshold does not
                apply (BM25 has no fixed scale); `similarity` is still the cosine.
            hybrid (the default): the learned second stage and its gate (decision 0024) over
                the best memories by cosine and by BM25: `Memory.score` (0-1) is what the
                threshold compares, and at 0.5 nothing passes when no memory answers the
                message (docs/retrieval.md). For an embedder without a fitted second stage,
                the fusion of decision 0005. `similarity` is still the cosine.

        Args:
            user_id: whose memories to search.
            query_text: the text to embed (cut to `max_query_length`).
            limit: 1 to 1000; None: `settings.max_memories`.
            similarity_threshold: 0 to 1; None: `settings.similarity_threshold`.
            mode: "semantic", "keyword" or "hybrid"; None: `settings.retrieval_mode`.
            query_vector: a precomputed query embedding; `query_text` is then not embedded.
            explain: fill `Memory.explanation` with the parts of each score (hybrid mode with
                the second stage only).

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
        if mode not in RETRIEVAL_MODES:
            raise InvalidInputError(
                f"mode must be one of {', '.join(RETRIEVAL_MODES)}, not {mode!r}"
            )
        terms: list[TermRow] | None = None
        if query_vector is not None:
            vector = self.embedder.check_vector(query_vector)
        elif mode == "hybrid" and self._overlaps(uid):
            # the keyword side needs no vector: it runs while the query is being embedded
            vector, terms = await asyncio.gather(
                self.embedder.embed_query(text),
                self._terms(uid, keywords_from_text(text), None),
            )
        else:
            vector = await self.embedder.embed_query(text)
        # a few more rows than asked for: echoes of the query are dropped (recall.search.echo)
        fetch = limit + ECHO_SLACK
        if mode == "keyword":
            rows = _answered(await self._keyword_rows(uid, text, vector, fetch))
            return [row_memory(r, score=r.bm25) for r in rows[:limit]]
        if mode == "semantic":
            rows = await self._vector_search(uid, vector, fetch, 1.0 - threshold)
            rows = _answered(rows)
            sims = [cosine(r.distance) or 0.0 for r in rows]
            order = list(range(len(rows)))
            picked = self._arranged(text, rows, order, sims, sims, threshold, limit)
            return [row_memory(rows[i], score=score) for i, score in picked]
        if self.second_stage is not None:
            return await self._second_stage(
                self.second_stage, uid, text, vector, limit, threshold, explain=explain, terms=terms
            )
        pool_size = max(limit, self.settings.hybrid_candidates)

        async def vector_side() -> list[MemoryRow]:
            return await self._vector_search(uid, vector, pool_size, 2.0)

        async def keyword_side() -> list[MemoryRow]:
            return await self._keyword_rows(uid, text, vector, pool_size)

        # two connections at once: the two candidate queries run in parallel on the server
        vec_rows, kw_rows = await asyncio.gather(vector_side(), keyword_side())
        # echoes leave before fusion: its rank features compare each candidate with the best
        query = Query(text, np.asarray(vector, dtype=np.float64))
        fused = fuse(_answered(vec_rows), _answered(kw_rows), self.fusion, query)
        found = [m for m, _score in fused]
        scores = [score for _m, score in fused]
        sims = [m.similarity or 0.0 for m in found]
        picked = self._arranged(text, found, range(len(found)), scores, sims, threshold, limit)
        return [replace(found[i], score=score) for i, score in picked]

    def _arranged(
        self,
        text: str,
        rows: Sequence[Candidate],
        order: Sequence[int],
        scores: Sequence[float],
        nearness: Sequence[float],
        threshold: float,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The candidates that fill the limit, as (index, score): with `settings.sources_first`
        a source before its restatements, one slot per fact and the newest statement on a
        slot first (`recall.search.restatements`); else the first `limit` at or over the
        threshold."""
        if self.settings.sources_first:
            return arrange(text, rows, order, scores, nearness, threshold, limit)
        picked: list[tuple[int, float]] = []
        for i in order[:limit]:
            if scores[i] < threshold:
                break
            picked.append((i, scores[i]))
        return picked

    async def _second_stage(
        self,
        stage: SecondStage,
        uid: str,
        text: str,
        vector: Vector,
        limit: int,
        threshold: float,
        *,
        explain: bool,
        terms: list[TermRow] | None,
    ) -> list[Memory]:
        """The default ranking: the candidates (`candidates`), scored and gated in Python."""
        k = max(stage.candidates, limit)
        # the candidates' vectors only for a ranker that reads their products with the query's
        vectors = stage.product_weights is not None
        rows, near = await self.candidates(uid, text, vector, k, terms=terms, vectors=vectors)
        if not rows:
            return []
        query = Query(text, np.asarray(vector, dtype=np.float64))
        scored = stage.rank(query, StageCandidates(rows, near))
        near_q = [cosine(r.distance) or 0.0 for r in rows]
        picked = self._arranged(text, rows, scored.order, scored.scores, near_q, threshold, limit)
        out = []
        for i, score in picked:
            why = scored.explanation(i) if explain else None
            out.append(row_memory(rows[i], score, why))
        return out

    async def candidates(
        self,
        user_id: str,
        query_text: str,
        query_vector: Vector,
        k: int,
        *,
        terms: list[TermRow] | None = None,
        vectors: bool = True,
    ) -> tuple[list[CandidateRow], list[int]]:
        """The second stage's candidates for a query: the user's best `k` memories by cosine
        (their plan: exact, or their own HNSW index) and by BM25 (over their `SCOPE` nearest
        when they hold more than `SCOPE_FROM`), questions left unanswered out, and the vector
        side's order as indexes into them (best first). For
        `benchmarks/fit_second_stage.py` too, so that what is fitted is what is served.

        Args:
            terms: the keyword side (`recall.search_terms` over all the user's memories),
                when `search` fetched it while the query was being embedded.
            vectors: fetch the candidates' vectors (`CandidateRow.embedding`; None without).

        Raises:
            StoreError.
        """
        plan = await self._plan_of(user_id)
        keywords = keywords_from_text(query_text)
        scoped = None
        if plan.memories > SCOPE_FROM:  # BM25 over the nearest, in one call (migration 0021)
            scoped = await self._scoped(user_id, query_vector, plan, keywords, k, vectors)
        if scoped is not None:
            terms, details, near = scoped
            unanswered = _unanswered_ids(details)
        elif plan.memories > SCOPE_FROM:  # the same in three calls
            nearest = await self._vector_search(user_id, query_vector, SCOPE, 2.0)
            terms = await self._terms(user_id, keywords, [r.id for r in nearest])
            # the first k answered ones (judged until k are found, not all SCOPE of them)
            answered = (r.id for r in nearest if not is_unanswered(r.user_message, r.ai_response))
            near = list(islice(answered, k))
            details = await self._details(
                user_id, query_vector, 0, near + _best_by_bm25(terms, k), vectors
            )
            unanswered = _unanswered_ids(details)
        else:
            if terms is None:
                terms = await self._terms(user_id, keywords, None)
            details = await self._details(
                user_id, query_vector, k + ECHO_SLACK, _best_by_bm25(terms, k), vectors
            )
            unanswered = _unanswered_ids(details)
            # the exact nearest, as recall.search_exact orders them
            ordered = sorted(details, key=lambda d: (d.distance, d.id))[: k + ECHO_SLACK]
            near = [r.id for r in ordered if r.id not in unanswered][:k]
        rows = assemble(terms, _pick(terms, details, near, k, unanswered))
        position = {r.id: i for i, r in enumerate(rows)}
        return rows, [position[i] for i in near if i in position]

    async def _scoped(
        self,
        user_id: str,
        vector: Vector,
        plan: Plan,
        keywords: KeywordQuery,
        k: int,
        vectors: bool = True,
    ) -> tuple[list[TermRow], list[DetailRow], list[UUID]] | None:
        """A large user's keyword side, the candidates' details and the first `k` answered
        memories of their `SCOPE` nearest (ids), from one call (`recall.search_scoped`): it
        brings the details of the first `k + ECHO_SLACK` nearest, and the unanswered questions
        among them are judged here. None when fewer than `k` of those are answered and the
        scope holds more: then the three calls of before find the rest."""
        fetch = k + ECHO_SLACK
        async with self._conn("search", read=True, reader=user_id) as conn:
            rows = await scoped_rows(
                conn,
                user_id=user_id,
                vector=vector,
                scope=SCOPE,
                index=plan.hnsw_index,
                ef_search=self.settings.hnsw_ef_search,
                keywords=keywords,
                near=fetch,
                best=fetch,
                vectors=vectors,
            )
        terms, details, nearest = split_scoped(rows)
        by_id = {d.id: d for d in details}
        answered = [
            i for i in nearest if not is_unanswered(by_id[i].user_message, by_id[i].ai_response)
        ]
        if len(answered) < k and len(nearest) == fetch:
            return None
        return terms, details, answered[:k]

    def _overlaps(self, user_id: str) -> bool:
        """Whether the keyword side can run while the query is embedded: the default mode has
        a second stage and the user is known to hold no more than `SCOPE_FROM` memories."""
        plan = self._plans.get(user_id)
        return self.second_stage is not None and plan is not None and plan.memories <= SCOPE_FROM

    async def _plan_of(self, user_id: str) -> Plan:
        cached = self._plans.get(user_id)
        if cached is not None:
            return cached
        async with self._conn("search", read=True, user=user_id) as conn:
            return await self._plan(conn, user_id)

    async def _terms(
        self, user_id: str, keywords: KeywordQuery, scope: list[UUID] | None
    ) -> list[TermRow]:
        # recall.search_terms sets the row-level security key itself: no transaction
        async with self._conn("search", read=True, reader=user_id) as conn:
            return await term_rows(conn, user_id=user_id, keywords=keywords, scope=scope)

    async def _details(
        self, user_id: str, vector: Vector, limit: int, ids: list[UUID], vectors: bool
    ) -> list[DetailRow]:
        async with self._conn("search", read=True, reader=user_id) as conn:
            return await detail_rows(
                conn, user_id=user_id, vector=vector, limit=limit, ids=ids, vectors=vectors
            )

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
