"""What a search computes over a user's held memories (`recall.store.held`) instead of asking
the database: the keyword side, BM25 over their lexemes (`keyword_side`, decision 0060), and,
once the query is embedded, the second stage's candidates (`candidates`): what
`recall.search_details` (the exact nearest memories and the keyword side's best, with the turns
before and after each), `recall.store.candidates`' pick and `recall.search.assembly.assemble`
make of the database's rows, made here from the held rows by their places, with no id looked
up. `tests/integration/test_held_rows.py` holds both to the database's calls."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from uuid import UUID

import numpy as np

from recall.embeddings import Vector
from recall.rows import HELD_COLUMNS, CandidateRow, HeldState
from recall.search.assembly import NO_HIT, Hit, KeywordSide, candidate, pick
from recall.search.bm25 import Postings, Scored, idf, scored
from recall.search.judging import holds_nothing
from recall.store.held import HeldUser

__all__ = ["candidates", "keyword_side"]

(_ID, _CONVERSATION, _USER, _AI, _CREATED, _METADATA, _KIND, _LENGTH) = (
    HELD_COLUMNS.index(c) for c in (
        "id", "conversation_id", "user_message", "ai_response", "created_at", "metadata", "kind",
        "doc_len"))  # fmt: skip
_POSTINGS_KEPT = 4096  # the terms whose postings a user's held rows keep, once looked up


def keyword_side(held: HeldUser, state: HeldState) -> KeywordSide | None:
    """The keyword side of the query whose words' lexemes `state` holds, scored over `held`'s
    rows as `recall.search_terms` scores the database's (`recall.search.bm25.scored`: the same
    memories, order and values); None when a word is not one lexeme (the caller asks the
    database)."""
    if any(lexeme is None for lexeme in state.lexemes):
        return None
    n, avgdl = state.memories, state.avgdl
    if n is None or avgdl is None:  # no count kept: the statement returns no row
        return KeywordSide(())
    terms = list(dict.fromkeys(lexeme for lexeme in state.lexemes if lexeme))
    found = scored(terms, n, avgdl, lambda term: _postings(held, term), held.lengths)
    return KeywordSide.of(_HeldHits(held, found), found.idfs, idf(0.0, n), n)


def _postings(held: HeldUser, term: str) -> Postings:
    """The documents holding `term` (and its boost in each), looked up once per held rows."""
    known = held.postings.get(term)
    if known is None:
        lexicons = held.lexicons
        holding = [j for j, lexicon in enumerate(lexicons) if term in lexicon]
        boosts = [lexicons[j][term] for j in holding]
        known = (np.array(holding, dtype=np.intp), np.array(boosts, dtype=np.float64))
        if len(held.postings) < _POSTINGS_KEPT:
            held.postings[term] = known
    return known


class _HeldHits(Mapping[UUID, Hit]):
    """The keyword side's hits over held rows, as `KeywordSide.hits` holds them: each memory
    holding a query term, by id, in place order; each made when looked up (a search looks up a
    few dozen of a couple of hundred), by row (`by_row`) or by id."""

    __slots__ = ("_found", "_made", "_place", "_scores", "held")

    def __init__(self, held: HeldUser, found: Scored) -> None:
        self.held, self._found = held, found
        place = np.zeros(len(held.scored), dtype=np.int64)
        place[found.order] = np.arange(1, len(found.order) + 1)
        self._place: list[int] = place.tolist()
        self._scores: list[float] = found.scores.tolist()
        self._made: dict[int, Hit | None] = {}

    def by_row(self, row: int) -> Hit | None:
        """The hit of the held row at `row`, else None."""
        if row in self._made:
            return self._made[row]
        j = self.held.document[row]
        made = None
        if j >= 0 and self._place[j]:
            score = self._scores[j]
            made = (self._place[j], 0.0 if math.isnan(score) else score, self._found.matched(j))
        self._made[row] = made
        return made

    def __getitem__(self, ident: UUID) -> Hit:
        made = self.by_row(self.held.position[ident])
        if made is None:
            raise KeyError(ident)
        return made

    def __iter__(self) -> Iterator[UUID]:
        rows, scored_rows = self.held.rows, self.held.scored
        return (rows[scored_rows[j]][_ID] for j in self._found.order.tolist())

    def __len__(self) -> int:
        return len(self._found.order)


def candidates(
    held: HeldUser, vector: Vector, k: int, side: KeywordSide
) -> tuple[list[CandidateRow], list[int]]:
    """The second stage's candidates over `held`'s rows, as the database's rows make them: the
    `k` nearest memories that hold a statement (exact; ties to the newer memory, then by content
    hash) and the keyword side's best `k` by BM25 of those held, leaving out a row not judged
    yet that holds nothing, in the order of their distance to `vector`, each with its and its
    neighbours' distances and hits; and the nearest as indexes
    into them, nearest first.

    Raises:
        ValueError: `vector` is not as long as the held vectors.
    """
    if not held.rows:
        return [], []
    distance = held.distances(vector)
    nearest: list[int] = []
    if k > 0:
        pool = np.flatnonzero(held.eligible)
        nearest = pool[np.lexsort((held.tie[pool], distance[pool]))[:k]].tolist()
    hits = side.hits
    hit: Callable[[int], Hit | None]
    if isinstance(hits, _HeldHits) and hits.held is held:
        hit = hits.by_row
    else:  # the database's keyword side (a phrase): looked up by id
        hit = lambda i: hits.get(held.rows[i][_ID])  # noqa: E731
    best = [held.position[i] for i in side.best(k) if i in held.position]
    chosen = np.fromiter(set(nearest) | set(best), dtype=np.intp)
    order = chosen[np.lexsort((held.tie[chosen], distance[chosen]))].tolist()
    at = {i: n for n, i in enumerate(order)}
    nothing = [_judged(held, i)[1] for i in order]
    chosen_at = pick(nothing, lambda n: hit(order[n]), [at[i] for i in nearest], k)
    picked = [order[n] for n in chosen_at]
    near = distance.tolist()
    out = [_candidate(held, i, near, hit, side) for i in picked]
    position = {i: n for n, i in enumerate(picked)}
    return out, [position[i] for i in nearest if i in position]


def _judged(held: HeldUser, i: int) -> tuple[dict[str, Any], bool]:
    """Row `i`'s metadata decoded and whether it holds nothing, once per held rows."""
    known = held.judged[i]
    if known is None:
        r = held.rows[i]
        metadata = json.loads(r[_METADATA])
        known = (metadata, holds_nothing(r[_USER], r[_AI], metadata, r[_KIND]))
        held.judged[i] = known
    return known


def _candidate(
    held: HeldUser,
    i: int,
    near: list[float],
    hit: Callable[[int], Hit | None],
    side: KeywordSide,
) -> CandidateRow:
    r = held.rows[i]
    b, a = held.before[i], held.after[i]
    return candidate(
        (r[_ID], r[_CONVERSATION], r[_USER], r[_AI], r[_CREATED], _judged(held, i)[0], r[_KIND]),
        near[i], r[_LENGTH], hit(i) or NO_HIT,
        near[b] if b >= 0 else None, (hit(b) or NO_HIT) if b >= 0 else NO_HIT,
        near[a] if a >= 0 else None, (hit(a) or NO_HIT) if a >= 0 else NO_HIT, side,
    )  # fmt: skip
