"""Search: the three retrieval modes over their candidates (`recall.store.candidates`), one
answer that says what was decided (`find`), and keyword search by BM25. A part of
`MemoryStore` over its `StoreCore`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from recall.config import RetrievalMode, parse_mode
from recall.db.search_rows import keyword_rows
from recall.embeddings import Vector
from recall.errors import InvalidInputError
from recall.limits import KEYWORD_LIMIT
from recall.memory import Memory, clean_id, clean_text
from recall.search.assembly import KeywordSide
from recall.search.keywords import keywords_from_text, parse_keywords
from recall.search.rankers import Ask, Query
from recall.search.ranking import cosine, row_memory
from recall.search.restatements import Candidate, arrange
from recall.search.verdict import Verdict
from recall.store.candidates import SCOPE, SCOPE_FROM, Candidates
from recall.store.checks import check_limit, check_now, check_threshold
from recall.store.core import StoreCore
from recall.store.explaining import reasons
from recall.store.results import Found, SearchResult

__all__ = ["SCOPE", "SCOPE_FROM", "Search"]


def _with_reasons(text: str, found: Found, verdict: Verdict, now: datetime) -> Found:
    why = reasons(text, found.memory, passes=found.passes, verdict=verdict, now=now)
    return replace(found, why=why)


@dataclass(frozen=True, slots=True)
class _Ranked:
    """A search's candidates before the threshold and the limit: `order` (indexes, best
    first), each one's `scores` and cosine to the query (`nearness`), and `memory(i, score,
    explain)` to make candidate `i` a `Memory`. `within`: the first of `order` a search at the
    threshold would have fetched (semantic mode fetches only those), None: all of them."""

    rows: Sequence[Candidate]
    order: Sequence[int]
    scores: Sequence[float]
    nearness: Sequence[float]
    memory: Callable[[int, float, bool], Memory]
    within: int | None = None


class Search:
    """`MemoryStore.find`, `search` and `keyword_search`, over the candidate rows of each mode.

    Args:
        core: the state the store's parts share (its one ranker: `core.ranker`).
        candidates: the rows each mode starts from.
    """

    def __init__(self, core: StoreCore, candidates: Candidates) -> None:
        self.core = core
        self.candidates = candidates

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
        `find(...)` that pass (`SearchResult.memories`).

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
            mode: "semantic", "keyword" or "hybrid"; None: `settings.mode`.
            query_vector: a precomputed query embedding; `query_text` is then not embedded.
            explain: fill `Memory.explanation` with the parts of each score (hybrid mode with
                the second stage only).
            now: the moment the message is asked; a time it names ("yesterday", "last
                summer") is read from here, and so is the age `explain` gives. None: the
                clock's now; naive: UTC.
            intent: True (a turn of conversation, as the retrieval node asks): the gate also
                reads whether the message asks anything of memory at all, so small talk gets
                nothing. False (a search someone typed: `recall search`, the inspector, the
                memory-search tool): asking is given, and a memory that matches passes
                (hybrid mode with the second stage; the others have no intent).

        Raises:
            InvalidInputError, EmbeddingError, StoreError.
        """
        found = await self.find(user_id, query_text, limit, similarity_threshold, mode=mode,
                                query_vector=query_vector, explain=explain, now=now,
                                intent=intent)  # fmt: skip
        return found.memories

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
        and threshold used, and each memory's score and whether it passes. What the retrieve
        node, the tool, `recall search` and the inspector call and render
        (docs/decisions/0033-the-store-decides.md).

        Args:
            user_id, query_text, limit, similarity_threshold, query_vector: as for `search`.
            mode: as for `search`; a string is checked (`recall.config.parse_mode`).
            explain: fill `Memory.explanation` (the raw parts of the second stage's score)
                and `Found.why` (the reasons in words, `recall.store.explaining.reasons`).
            kept_out: also bring the best memories the threshold (or the post-step that puts
                a source before its restatements) keeps out, marked `passes=False`, after
                those that pass, up to `limit` in all.
            now, intent: as for `search`.

        Raises:
            InvalidInputError, EmbeddingError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        query_text = clean_text(query_text, "query", max_length=self.core.settings.max_query_length)
        limit = self.search_limit(limit)
        threshold = check_threshold(
            self.core.settings.similarity_threshold
            if similarity_threshold is None
            else similarity_threshold
        )
        used = self.core.settings.mode if mode is None else parse_mode(mode, InvalidInputError)
        verdict = Verdict(used, threshold)
        asked = check_now(now)
        vector, words = await self._query(uid, query_text, used, query_vector)
        if used == "keyword":
            rows = await self.candidates.best_by_words(uid, query_text, vector, limit)
            found = [Found(row_memory(r, score=r.bm25), verdict.passes(r.bm25)) for r in rows]
        else:
            ranked = await self._ranked(
                uid, query_text, vector, verdict, limit, kept_out, words, asked, intent
            )
            if ranked is None:
                found = []
            else:
                found = self._found(query_text, ranked, verdict, limit, explain, kept_out)
        if explain:
            found = [_with_reasons(query_text, f, verdict, asked) for f in found]
        return SearchResult(limit, verdict, tuple(found))

    def search_limit(self, limit: int | None = None) -> int:
        """The most memories a search returns when asked for `limit`: `limit`, else the
        store's default (`settings.max_memories`); the one place that default is resolved.

        Raises:
            InvalidInputError: not an integer from 1 to 1000.
        """
        return check_limit(self.core.settings.max_memories if limit is None else limit)

    async def _query(
        self, uid: str, text: str, mode: RetrievalMode, given: Vector | None
    ) -> tuple[Vector, KeywordSide | None]:
        """The query's vector (`given`, checked, or embedded) and, when the default mode
        could build it while the query was being embedded, the keyword side."""
        if given is not None:
            return self.core.embedder.check_vector(given), None
        if mode == "hybrid" and self._overlaps(uid):
            # the keyword side needs no vector: it runs while the query is being embedded
            keywords = keywords_from_text(text)
            return await asyncio.gather(
                self.core.embedder.embed_query(text),
                self.candidates.keyword_side(uid, keywords),
            )
        return await self.core.embedder.embed_query(text), None

    async def _ranked(
        self,
        uid: str,
        text: str,
        vector: Vector,
        verdict: Verdict,
        limit: int,
        kept_out: bool,
        words: KeywordSide | None,
        now: datetime,
        intent: bool,
    ) -> _Ranked | None:
        """The candidates of semantic or hybrid mode, ranked (None: the second stage found
        none); in semantic mode only those that pass `verdict` (with `kept_out`, any: to see
        what it keeps out); `now`: when the message is asked; `intent`: whether the gate reads
        the message's intent (`search`)."""
        if verdict.mode == "semantic":
            fetched = verdict.at(0.0) if kept_out else verdict
            rows = await self.candidates.nearest(uid, vector, limit, fetched.max_distance)
            sims = [cosine(r.distance) or 0.0 for r in rows]
            # the rows' distances grow: those a search at the threshold fetches come first
            within = None
            if fetched != verdict:
                within = sum(verdict.within(r.distance) for r in rows)
            return _Ranked(
                rows,
                range(len(rows)),
                sims,
                sims,
                lambda i, s, _e: row_memory(rows[i], score=s),
                within,
            )
        ranker = self.core.ranker
        query = Query(text, np.asarray(vector, dtype=np.float64), now, intent)
        ask = Ask(uid, query, vector, limit, self.core.settings.hybrid_candidates, words)
        gathered = await ranker.gather(self.candidates, ask)
        if gathered is None:
            return None
        ranking = ranker.rank(query, gathered.candidates)
        found = gathered.rows

        def memory(i: int, score: float, explain: bool) -> Memory:
            return row_memory(found[i], score, ranking.explanation(i) if explain else None)

        return _Ranked(found, ranking.order, ranking.scores, gathered.nearness, memory)

    def _found(
        self,
        text: str,
        ranked: _Ranked,
        verdict: Verdict,
        limit: int,
        explain: bool,
        kept_out: bool,
    ) -> list[Found]:
        """The memories that pass (`_arranged` under `verdict`) and, with `kept_out`, the
        best of the others (`_arranged` at 0), up to `limit` in all."""
        r = ranked
        order = r.order if r.within is None else r.order[: r.within]
        picked = self._arranged(text, r.rows, order, r.scores, r.nearness, verdict, limit)
        found = [Found(r.memory(i, score, explain), True) for i, score in picked]
        if kept_out and len(picked) < limit:
            passing = {i for i, _score in picked}
            anything = verdict.at(0.0)
            if anything != verdict:
                every = self._arranged(text, r.rows, r.order, r.scores, r.nearness, anything, limit)
            else:
                every = []
            others = [(i, score) for i, score in every if i not in passing]
            found += [
                Found(r.memory(i, score, explain), False)
                for i, score in others[: limit - len(picked)]
            ]
        return found

    def _arranged(
        self,
        text: str,
        rows: Sequence[Candidate],
        order: Sequence[int],
        scores: Sequence[float],
        nearness: Sequence[float],
        verdict: Verdict,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The candidates that fill the limit, as (index, score): with `settings.sources_first`
        a source before its restatements, one slot per fact and the newest statement on a
        slot first (`recall.search.restatements`); else the first `limit` that pass
        `verdict`."""
        if self.core.settings.sources_first:
            return arrange(text, rows, order, scores, nearness, verdict, limit)
        picked: list[tuple[int, float]] = []
        for i in order[:limit]:
            if not verdict.passes(scores[i]):
                break
            picked.append((i, scores[i]))
        return picked

    def _overlaps(self, user_id: str) -> bool:
        """Whether the keyword side can run while the query is embedded: the default mode's
        ranker starts from it (`Ranker.early_terms`) and the user is known to hold no more than
        `SCOPE_FROM` memories."""
        plan = self.core.plans.get(user_id)
        return self.core.ranker.early_terms and plan is not None and plan.memories <= SCOPE_FROM

    async def keyword_search(
        self,
        user_id: str,
        keywords: str,
        limit: int | None = None,
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
            limit: 1 to 1000; None: `recall.limits.KEYWORD_LIMIT` (5).
            conversation_id: only this conversation (the discussion id); None: all.

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        cid = clean_id(conversation_id, "conversation_id", required=False)
        if not isinstance(keywords, str):
            raise InvalidInputError(f"keywords must be a string, not {type(keywords).__name__}")
        limit = check_limit(KEYWORD_LIMIT if limit is None else limit)
        async with self.core.conn(
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
