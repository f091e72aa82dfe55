"""The rows a search starts from: each user's plan (exact, or their own HNSW index; cached per
user), the vector side, the keyword side (BM25), and the second stage's candidates, which
`benchmarks/fit_second_stage.py` fits on (`Candidates.for_query`). A part of `MemoryStore`
over its `StoreCore`; a plan may schedule an index build (`Maintenance`)."""

from __future__ import annotations

from itertools import islice
from typing import Any
from uuid import UUID

from cachetools import TTLCache
from psycopg import AsyncConnection

from recall.db.memories import user_plan
from recall.db.search_rows import detail_rows, keyword_rows, scoped_rows, term_rows, vector_rows
from recall.embeddings import Vector
from recall.memory import own_words
from recall.rows import CandidateRow, DetailRow, MemoryRow, TermRow
from recall.search.assembly import assemble, split_scoped
from recall.search.echo import is_small_talk, is_unanswered
from recall.search.keywords import KeywordQuery, keywords_from_text
from recall.store.core import Plan, StoreCore
from recall.store.maintenance import Maintenance

__all__ = [
    "ECHO_SLACK",
    "FIRST_SLACK",
    "SCOPE",
    "SCOPE_FROM",
    "Candidates",
    "answered",
    "unanswered_row",
]

ECHO_SLACK = 20  # rows fetched beyond the limit, so leaving out echoes still fills it
# The second stage's candidates of a user up to SCOPE_FROM memories are first fetched with
# FIRST_SLACK rows beyond `k` on each side, and again with ECHO_SLACK only when fewer than `k`
# of those are answered and the user has more (then the user is remembered for a while, and
# fetched with ECHO_SLACK at once): the same candidates as with ECHO_SLACK always, and a third
# fewer rows to read, send and judge where few turns are unanswered questions (issue 46).
FIRST_SLACK = 5
# A user with more memories than SCOPE_FROM gets the second stage over their SCOPE nearest
# memories: BM25 and its statistics are taken there (as for a user of SCOPE memories, the size
# the second stage was fitted on), so its cost does not grow with the history; a memory that only
# BM25 would find outside them is not a candidate (docs/retrieval.md).
SCOPE_FROM = 2000
SCOPE = 300


def unanswered_row(row: MemoryRow | DetailRow) -> bool:
    """Whether a stored row holds nothing to remember: a question left unanswered, or small
    talk on both sides (recall.search.echo), its reply judged by its own part where one was
    recorded (decision 0038)."""
    own = own_words(row.metadata)
    return is_unanswered(row.user_message, row.ai_response, own) or is_small_talk(
        row.user_message, row.ai_response, own
    )


def answered(rows: list[MemoryRow]) -> list[MemoryRow]:
    """The rows that are not a question left unanswered (recall.search.echo)."""
    return [r for r in rows if not unanswered_row(r)]


def _best_by_bm25(terms: list[TermRow], k: int, slack: int = ECHO_SLACK) -> list[UUID]:
    """The ids of the best `k` memories by BM25, and `slack` more: questions left unanswered
    leave afterwards (`_pick`). Ties keep recall.search_terms' order, which puts the newer
    memory first, then goes by content hash (migration 0023): the same in any database that
    holds the same memories, where the ids are random."""
    hits = sorted((t for t in terms if t.id is not None), key=lambda t: -(t.bm25 or 0.0))
    return [t.id for t in hits[: k + slack] if t.id is not None]


def _short(ids: list[UUID], unanswered: set[UUID], k: int, fetched: int) -> bool:
    """Whether a side fetched with too little slack: `ids` (its first rows, in its order) are
    all it fetched (`fetched` rows asked for), fewer than `k` of them are answered, and there
    may be more."""
    return len(ids) >= fetched and sum(i not in unanswered for i in ids) < k


def _unanswered_ids(rows: list[DetailRow]) -> set[UUID]:
    """The ids of the rows that are a question left unanswered, each row judged once."""
    return {r.id for r in rows if unanswered_row(r)}


def _pick(
    terms: list[TermRow], details: list[DetailRow], near: list[UUID], k: int, unanswered: set[UUID]
) -> list[DetailRow]:
    """The second stage's candidates, in `details`' order: the vector side's (`near`), and the
    best `k` by BM25 once the questions left unanswered (`unanswered`, their ids) are out (the
    SQL brings a few more for that). Picked before they are assembled, so that only they are.
    The keyword side goes in `terms`' order (ties as in `_best_by_bm25`)."""
    place = {t.id: n for n, t in enumerate(terms) if t.id is not None and (t.bm25 or 0.0) > 0}
    answered = [d for d in details if d.id not in unanswered]
    by_bm25 = sorted((d for d in answered if d.id in place), key=lambda d: place[d.id])
    wanted = set(near) | {d.id for d in by_bm25[:k]}
    return [d for d in answered if d.id in wanted]


class Candidates:
    """The plan per user and the candidate rows of each mode: the second stage's
    (`for_query`), the vector side (`vector_search`), the keyword side by BM25 (`bm25_rows`,
    `terms_of`) and the candidates' details (`details_of`).

    Args:
        core: the state the store's parts share.
        maintenance: schedules a user's index build when a plan finds them over the threshold.
    """

    def __init__(self, core: StoreCore, maintenance: Maintenance) -> None:
        self.core = core
        self.maintenance = maintenance
        # users whose candidates needed ECHO_SLACK lately (FIRST_SLACK left them short)
        self._wide: TTLCache[str, bool] = TTLCache(maxsize=10000, ttl=300)

    async def for_query(
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
        plan = await self.plan_of(user_id)
        keywords = keywords_from_text(query_text)
        scoped = None
        if plan.memories > SCOPE_FROM:  # BM25 over the nearest, in one call (migration 0021)
            scoped = await self._scoped(user_id, query_vector, plan, keywords, k, vectors)
        if scoped is not None:
            terms, details, near = scoped
            unanswered = _unanswered_ids(details)
        elif plan.memories > SCOPE_FROM:  # the same in three calls
            nearest = await self.vector_search(user_id, query_vector, SCOPE, 2.0)
            terms = await self.terms_of(user_id, keywords, [r.id for r in nearest])
            # the first k answered ones (judged until k are found, not all SCOPE of them)
            answered = (r.id for r in nearest if not unanswered_row(r))
            near = list(islice(answered, k))
            details = await self.details_of(
                user_id, query_vector, 0, near + _best_by_bm25(terms, k), vectors
            )
            unanswered = _unanswered_ids(details)
        else:
            if terms is None:
                terms = await self.terms_of(user_id, keywords, None)
            details, unanswered, near = await self._small(user_id, query_vector, k, terms, vectors)
        rows = assemble(terms, _pick(terms, details, near, k, unanswered))
        position = {r.id: i for i, r in enumerate(rows)}
        return rows, [position[i] for i in near if i in position]

    async def _small(
        self, user_id: str, vector: Vector, k: int, terms: list[TermRow], vectors: bool
    ) -> tuple[list[DetailRow], set[UUID], list[UUID]]:
        """The details of a user's `k` nearest and `k` best by BM25, a slack of more on each
        side (FIRST_SLACK, or ECHO_SLACK when that left a side short: the same candidates as
        ECHO_SLACK at once), the unanswered ones among them (ids) and the first `k` answered
        nearest (ids)."""
        slack = ECHO_SLACK if user_id in self._wide else FIRST_SLACK
        while True:
            fetch = k + slack
            best = _best_by_bm25(terms, k, slack)
            details = await self.details_of(user_id, vector, fetch, best, vectors)
            unanswered = _unanswered_ids(details)
            # the exact nearest, as recall.search_exact orders them: the details come in that
            # order (distance, ties to the newer memory, then by content hash; migration 0023)
            ordered = [d.id for d in sorted(details, key=lambda d: d.distance)[:fetch]]
            if slack >= ECHO_SLACK or not (
                _short(ordered, unanswered, k, fetch) or _short(best, unanswered, k, fetch)
            ):
                return details, unanswered, [i for i in ordered if i not in unanswered][:k]
            slack = ECHO_SLACK
            self._wide[user_id] = True

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
        async with self.core.conn("search", read=True, reader=user_id) as conn:
            rows = await scoped_rows(
                conn,
                user_id=user_id,
                vector=vector,
                scope=SCOPE,
                index=plan.hnsw_index,
                ef_search=self.core.settings.hnsw_ef_search,
                keywords=keywords,
                near=fetch,
                best=fetch,
                vectors=vectors,
            )
        terms, details, nearest = split_scoped(rows)
        by_id = {d.id: d for d in details}
        answered = [i for i in nearest if not unanswered_row(by_id[i])]
        if len(answered) < k and len(nearest) == fetch:
            return None
        return terms, details, answered[:k]

    async def plan_of(self, user_id: str) -> Plan:
        """The user's plan: cached, else read (and their index build scheduled if due)."""
        cached = self.core.plans.get(user_id)
        if cached is not None:
            return cached
        async with self.core.conn("search", read=True, user=user_id) as conn:
            return await self._plan(conn, user_id)

    async def terms_of(
        self, user_id: str, keywords: KeywordQuery, scope: list[UUID] | None
    ) -> list[TermRow]:
        """The keyword side (`recall.search_terms`): every memory of the user (of `scope`
        when given) holding one of `keywords`, with the terms' statistics."""
        # recall.search_terms sets the row-level security key itself: no transaction
        async with self.core.conn("search", read=True, reader=user_id) as conn:
            return await term_rows(conn, user_id=user_id, keywords=keywords, scope=scope)

    async def details_of(
        self, user_id: str, vector: Vector, limit: int, ids: list[UUID], vectors: bool
    ) -> list[DetailRow]:
        """The user's `limit` nearest memories and those of `ids`, with the details the
        second stage reads (`recall.search_details`)."""
        async with self.core.conn("search", read=True, reader=user_id) as conn:
            return await detail_rows(
                conn, user_id=user_id, vector=vector, limit=limit, ids=ids, vectors=vectors
            )

    async def _plan(self, conn: AsyncConnection[Any], user_id: str) -> Plan:
        cached = self.core.plans.get(user_id)
        if cached is not None:
            return cached
        row = await user_plan(conn, user_id)
        plan = Plan(0, None) if row is None else Plan(int(row.memory_count), row.hnsw_index)
        self.core.plans[user_id] = plan
        if plan.hnsw_index is None and plan.memories >= self.core.settings.user_index_threshold:
            self.maintenance.schedule_index(user_id)
        return plan

    async def vector_search(
        self, uid: str, vector: Vector, limit: int, max_distance: float
    ) -> list[MemoryRow]:
        """The user's `limit` nearest memories within `max_distance` (cosine distance),
        through their plan: exact, or their own HNSW index."""
        plan = self.core.plans.get(uid)
        if plan is not None:
            # A user whose plan is known: recall.search_exact and recall.search_indexed set
            # the row-level security key themselves (migrations 0005, 0010), so no
            # transaction: one round trip.
            async with self.core.conn("search", read=True, reader=uid) as conn:
                return await self._vector_rows(
                    conn, uid, vector, limit, max_distance, plan.hnsw_index
                )
        async with self.core.conn("search", read=True, user=uid) as conn:
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
            ef_search=self.core.settings.hnsw_ef_search,
        )

    async def nearest(
        self, user_id: str, vector: Vector, k: int, max_distance: float = 2.0
    ) -> list[MemoryRow]:
        """The user's `k` nearest memories by cosine within `max_distance` (2: any), questions
        left unanswered out (a ranker's `CandidateSource`, and semantic mode's rows)."""
        return answered(await self.vector_search(user_id, vector, k, max_distance))

    async def best_by_words(
        self, user_id: str, text: str, vector: Vector, k: int
    ) -> list[MemoryRow]:
        """The user's best `k` memories by BM25 for the words of `text`, each with its cosine
        to `vector`, questions left unanswered out (a ranker's `CandidateSource`, and keyword
        mode's rows)."""
        return answered(await self.bm25_rows(user_id, text, vector, k))

    async def bm25_rows(self, uid: str, text: str, vector: Vector, limit: int) -> list[MemoryRow]:
        """The user's best `limit` memories by BM25 for the words of `text`, each with its
        cosine to `vector` (`recall.search_keyword`)."""
        keywords = keywords_from_text(text)
        # recall.search_keyword sets the row-level security key itself: no transaction
        async with self.core.conn("search", read=True, reader=uid) as conn:
            return await keyword_rows(
                conn, user_id=uid, keywords=keywords, vector=vector, limit=limit
            )
