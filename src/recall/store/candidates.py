"""The rows a search starts from: each user's plan (exact, or their own HNSW index; cached per
user), the vector side, the keyword side (BM25), and the second stage's candidates, which
`benchmarks/fit_second_stage.py` fits on (`Candidates.for_query`). A part of `MemoryStore`
over its `StoreCore`; a plan may schedule an index build (`Maintenance`)."""

from __future__ import annotations

import operator
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection

from recall.db.memories import user_plan
from recall.db.search_rows import keyword_rows, scoped_rows, term_rows, vector_rows
from recall.embeddings import Vector
from recall.errors import StoreError
from recall.rows import DETAIL_COLUMNS, CandidateRow, MemoryRow
from recall.search.assembly import KeywordSide, Row, assemble, pick, split_scoped
from recall.search.judging import holds_nothing
from recall.search.keywords import KeywordQuery, keywords_from_text
from recall.store import held_search
from recall.store.core import Plan, StoreCore
from recall.store.maintenance import Maintenance

__all__ = [
    "SCOPE",
    "SCOPE_FROM",
    "Candidates",
    "holds_nothing_row",
]

# A user with more memories than SCOPE_FROM gets the second stage over their SCOPE nearest
# memories: BM25 and its statistics are taken there (as for a user of SCOPE memories), so its
# cost does not grow with the history; a memory that only BM25 would find outside them is not a
# candidate (docs/retrieval.md). 60, not 300 (decision 0055): the scoped call's HNSW breadth and
# BM25 follow the scope, and a user of 20,000 LongMemEval turns held out from the choice kept
# its reach and first within a question or two (38.6 / 25.0 % against 40.9 / 27.3 at 300 and
# semantic's 39.8 / 25.0; 88 questions) for 6.5 ms a search instead of 13.1 (vector given).
SCOPE_FROM = 2000
SCOPE = 60


def holds_nothing_row(row: MemoryRow) -> bool:
    """Whether a stored row holds nothing a search should answer with (a question left
    unanswered, small talk, a restatement): by the judgement stored when it was written
    (`recall.search.judging`), which the searches' SQL already reads, or, for a row stored
    before it and not judged yet, judged now."""
    return holds_nothing(row.user_message, row.ai_response, row.metadata, row.kind)


def _answered(rows: list[MemoryRow]) -> list[MemoryRow]:
    """The rows that hold something (`holds_nothing_row`)."""
    return [r for r in rows if not holds_nothing_row(r)]


# what a detail row's judgement reads (`holds_nothing`'s arguments, in order)
_JUDGED = operator.itemgetter(
    *(DETAIL_COLUMNS.index(c) for c in ("user_message", "ai_response", "metadata", "kind"))
)


def _pick(side: KeywordSide, details: list[Row], near: list[UUID], k: int) -> list[Row]:
    """The second stage's candidates, in `details`' order (rows of
    `recall.rows.DETAIL_COLUMNS`): `recall.search.assembly.pick` over them, the vector side
    being `near` (ids), a row not judged yet judged here. Picked before they are assembled, so
    that only they are."""
    hits = side.hits
    place = {d[0]: n for n, d in enumerate(details)}  # d[0]: its id
    nothing = [holds_nothing(*_JUDGED(d)) for d in details]
    chosen = pick(
        nothing, lambda n: hits.get(details[n][0]), [place[i] for i in near if i in place], k
    )
    return [details[n] for n in chosen]


class Candidates:
    """The plan per user and the candidate rows of each mode: the second stage's
    (`for_query`: the candidates' details from the user's held memories, `recall.store.held`),
    the vector side (`nearest`) and the keyword side by BM25 (`best_by_words`,
    `keyword_side`).

    Args:
        core: the state the store's parts share.
        maintenance: schedules a user's index build when a plan finds them over the threshold.
    """

    def __init__(self, core: StoreCore, maintenance: Maintenance) -> None:
        self.core = core
        self.maintenance = maintenance

    async def for_query(
        self,
        user_id: str,
        query_text: str,
        query_vector: Vector,
        k: int,
        *,
        words: KeywordSide | None = None,
    ) -> tuple[list[CandidateRow], list[int]]:
        """The second stage's candidates for a query: the user's best `k` memories by cosine
        (their plan: exact, or their own HNSW index) and by BM25 (over their `SCOPE` nearest
        when they hold more than `SCOPE_FROM`), of those that hold something (the SQL reads
        the judgement stored at write; a row not judged yet is judged here), and the vector
        side's order as indexes into them (best first). For `benchmarks/fit_second_stage.py`
        too, so that what is fitted is what is served.

        Args:
            words: the keyword side (`keyword_side`: over all the user's memories), when
                `search` fetched it while the query was being embedded.

        Raises:
            StoreError.
        """
        plan = await self.plan_of(user_id)
        if plan.memories > SCOPE_FROM:  # BM25 over the nearest, in one call (migration 0021)
            terms, details, nearest = await self._scoped(
                user_id, query_vector, plan, keywords_from_text(query_text), k
            )
            side = KeywordSide(terms)
        else:
            if words is None:  # the query's words parsed here only when not built beside
                words = await self.keyword_side(user_id, keywords_from_text(query_text))
            return await self._held_candidates(user_id, query_vector, k, words)
        rows = assemble(side, _pick(side, details, nearest, k))
        position = {r.id: i for i, r in enumerate(rows)}
        return rows, [position[i] for i in nearest if i in position]

    async def _scoped(
        self,
        user_id: str,
        vector: Vector,
        plan: Plan,
        keywords: KeywordQuery,
        k: int,
    ) -> tuple[list[Row], list[Row], list[UUID]]:
        """A large user's keyword side, the candidates' details and their first `k` nearest
        memories (ids), from one call (`recall.search_scoped`)."""
        async with self.core.conn("search", read=True, reader=user_id) as conn:
            rows = await scoped_rows(
                conn,
                user_id=user_id,
                vector=vector,
                scope=SCOPE,
                index=plan.hnsw_index,
                ef_search=self.core.settings.hnsw_ef_search,
                keywords=keywords,
                near=k,
                best=k,
            )
        terms, details, nearest = split_scoped(rows)
        return terms, details, nearest[:k]

    async def plan_of(self, user_id: str) -> Plan:
        """The user's plan: cached, else read (and their index build scheduled if due)."""
        cached = self.core.plans.get(user_id)
        if cached is not None:
            return cached
        async with self.core.conn("search", read=True, user=user_id) as conn:
            return await self._plan(conn, user_id)

    async def keyword_side(self, user_id: str, keywords: KeywordQuery) -> KeywordSide:
        """The keyword side: every memory of the user holding one of `keywords`, with its BM25
        and the terms it holds, and the terms' statistics, looked up by memory. Scored over the
        user's held memories, brought up to date first (`HeldRows.sync`, `held_search.keyword_side`,
        decision 0060); by `recall.search_terms` over the same connection for a phrase, or a
        word that is not one lexeme. It needs no vector: the default search builds it while the
        query is being embedded."""
        words = keywords.words
        # the held rows' sync and recall.search_terms set the row-level security key themselves
        async with self.core.conn("search", read=True, reader=user_id) as conn:
            held, state = await self.core.held.sync(conn, user_id, words)
            side = None
            if all(len(k) == 1 for k in keywords.keywords):
                side = held_search.keyword_side(held, state)
            if side is None:
                side = KeywordSide(await term_rows(conn, user_id=user_id, keywords=keywords))
        return side

    async def _held_candidates(
        self, user_id: str, vector: Vector, k: int, side: KeywordSide
    ) -> tuple[list[CandidateRow], list[int]]:
        """`for_query`'s candidates from the user's held memories (`held_search.candidates`):
        as `keyword_side` left them (`HeldRows.take`), else read now (dropped meanwhile, or held
        with vectors of another length: a re-embedding swapped the column)."""
        held = self.core.held.take(user_id)
        if held is None or held.dimensions not in (None, len(vector)):
            async with self.core.conn("search", read=True, reader=user_id) as conn:
                held, _state = await self.core.held.sync(conn, user_id, again=held is not None)
        try:
            return held_search.candidates(held, vector, k, side)
        except ValueError as exc:  # as the database would refuse to compare them
            raise StoreError(f"search failed: {exc}") from exc

    async def _plan(self, conn: AsyncConnection[Any], user_id: str) -> Plan:
        row = await user_plan(conn, user_id)
        plan = Plan(0, None) if row is None else Plan(int(row.memory_count), row.hnsw_index)
        self.core.plans[user_id] = plan
        if plan.hnsw_index is None and plan.memories >= self.core.settings.user_index_threshold:
            self.maintenance.schedule_index(user_id)
        return plan

    async def nearest(
        self, user_id: str, vector: Vector, k: int, max_distance: float = 2.0
    ) -> list[MemoryRow]:
        """The user's `k` nearest memories by cosine within `max_distance` (2: any), through
        their plan (exact, or their own HNSW index), of those that hold something (a ranker's
        `CandidateSource`, and semantic mode's rows)."""
        plan = self.core.plans.get(user_id)
        # a known plan: recall.search_exact and recall.search_indexed set the row-level
        # security key themselves (migrations 0005, 0010), so no transaction: one round trip
        async with self.core.conn(
            "search", read=True, reader=user_id, user=None if plan is not None else user_id
        ) as conn:
            if plan is None:
                plan = await self._plan(conn, user_id)
            rows = await vector_rows(
                conn,
                user_id=user_id,
                vector=vector,
                limit=k,
                max_distance=max_distance,
                index=plan.hnsw_index,
                ef_search=self.core.settings.hnsw_ef_search,
            )
        return _answered(rows)

    async def best_by_words(
        self, user_id: str, text: str, vector: Vector, k: int
    ) -> list[MemoryRow]:
        """The user's best `k` memories by BM25 for the words of `text`, each with its cosine
        to `vector` (`recall.search_keyword`, which sets the row-level security key itself),
        of those that hold something (a ranker's `CandidateSource`, and keyword mode's rows)."""
        async with self.core.conn("search", read=True, reader=user_id) as conn:
            rows = await keyword_rows(
                conn, user_id=user_id, keywords=keywords_from_text(text), vector=vector, limit=k
            )
        return _answered(rows)
