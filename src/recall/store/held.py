"""The memories a search holds between searches: each user's rows kept in the process and
checked against the database's row versions while the query is embedded, so that the default
path's keyword side (BM25 over their lexemes, decision 0060) and, after the embedding, its
vector side (the exact nearest memories, the candidates' details and the turns before and after
each) are computed in the process instead of in calls (docs/decisions/0059-held-rows.md;
`recall.store.held_search`). For users of up to `SCOPE_FROM` memories; a larger user's
candidates come from one call over their nearest (`recall.search_scoped`)."""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import numpy as np
from cachetools import LRUCache
from psycopg import AsyncConnection

from recall.db.search_rows import held_rows, held_state
from recall.embeddings import Vector
from recall.rows import HELD_COLUMNS, HeldState
from recall.search.assembly import stored_vector
from recall.search.bm25 import Postings

__all__ = ["HeldRows", "HeldUser"]

Row = tuple[Any, ...]

# each column's place, looked up by its name
(_ID, _VERSION, _CONVERSATION, _USER, _AI, _CREATED, _METADATA, _KIND, _EMBEDDING, _LENGTH, _HOLDS,
 _HASH, _TERMS, _BOOSTS) = (HELD_COLUMNS.index(c) for c in (
    "id", "version", "conversation_id", "user_message", "ai_response", "created_at", "metadata",
    "kind", "embedding", "doc_len", "holds", "content_hash", "terms", "boosts"))  # fmt: skip
# what a held row costs beyond its vector, texts and lexemes (its tuple, ids, times, array
# entries); tracemalloc measured 3.8 kB a row in all for four LoCoMo users (1,226 rows), which
# these constants put at 4.3
_ROW_BYTES = 900
_LEXEME_BYTES = 60  # a lexeme's entry in its row's dict (the string shared: interned)
_BOOSTS_HELD = {b: b for b in (1.0, 1.5, 2.0)}


def _neighbours(rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's turn before and after it in its conversation (indexes; -1 for none), in
    (created_at, content_hash) order, as `recall.search_details` finds them (migration 0023).
    A row without a conversation has neither."""
    before = np.full(len(rows), -1, dtype=np.int64)
    after = np.full(len(rows), -1, dtype=np.int64)
    talked = [i for i, r in enumerate(rows) if r[_CONVERSATION] is not None]
    talked.sort(key=lambda i: (rows[i][_CONVERSATION], rows[i][_CREATED], rows[i][_HASH]))
    for a, b in itertools.pairwise(talked):
        if rows[a][_CONVERSATION] == rows[b][_CONVERSATION]:
            after[a], before[b] = b, a
    return before, after


def _lexicon(row: Row) -> dict[str, float]:
    """A row's lexemes with their boosts: as read (two arrays; each lexeme interned and each
    boost one of three floats, shared by every row that holds them), or as held before."""
    terms = row[_TERMS]
    if isinstance(terms, dict):
        return terms
    boosts = (_BOOSTS_HELD.get(b, b) for b in row[_BOOSTS] or ())
    return dict(zip(map(sys.intern, terms or ()), boosts, strict=True))


@dataclass(frozen=True, eq=False)
class HeldUser:
    """One user's memories as held: their rows (`recall.rows.HELD_COLUMNS`, each vector a
    read-only row of `matrix`, the lexemes a dict of each one's boost) and, in the same order,
    what the nearest are found by; and, for BM25, the rows that hold a statement in the order
    their ties take (`scored`: its documents), with their lexemes and lengths.

    Build one with `HeldUser.of`; it is never changed (a search may read it while the next sync
    replaces it).
    """

    rows: tuple[Row, ...]
    position: dict[UUID, int]  # a row's index by its id
    matrix: np.ndarray  # (rows, dimensions), float32, read-only
    squares: np.ndarray  # each vector's squared norm, float64
    eligible: np.ndarray  # whether a row may be a nearest memory (it holds a statement)
    tie: np.ndarray  # a row's place in (created_at descending, content_hash) order
    before: list[int]  # the turn before (index; -1: none)
    after: list[int]  # the turn after
    scored: tuple[int, ...]  # the rows BM25 scores (they hold a statement), in `tie` order
    document: list[int]  # a row's index among them (-1: not scored)
    lexicons: tuple[dict[str, float], ...]  # theirs: each lexeme's boost
    lengths: np.ndarray  # and their lengths (NaN: not counted)
    nbytes: int  # about what it holds in memory
    stamp: int  # `recall.held_state`'s stamp when the rows were read (a write changes it)
    postings: dict[str, Postings] = field(default_factory=dict)  # a term's, once looked up
    # a row's metadata decoded and whether it holds nothing (`holds_nothing`), once read by a
    # search (shared between searches: `recall.search.ranking.row_memory` copies it out)
    judged: list[tuple[dict[str, Any], bool] | None] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        rows: Iterable[Row],
        stamp: int = 0,
        *,
        matrix: np.ndarray | None = None,
        judged: list[tuple[dict[str, Any], bool] | None] | None = None,
    ) -> HeldUser:
        """The held form of a user's rows (every column of `recall.rows.HELD_COLUMNS`, as read
        or as held), read after their `stamp` was: their vectors from `matrix` (one row each)
        when given, else from the rows; what searches judged of them (`judged`) kept.

        Raises:
            ValueError: the rows' vectors are not all of one length.
        """
        listed = list(rows)
        if matrix is None:
            if listed:
                matrix = np.stack([stored_vector(r[_EMBEDDING], np.float32) for r in listed])
            else:
                matrix = np.zeros((0, 0), dtype=np.float32)
        matrix.flags.writeable = False
        # held: the vector is the matrix's row, the lexemes a dict (a row held before as it is)
        listed = [
            r if r[_EMBEDDING] is None else (*r[:_EMBEDDING], None, *r[_EMBEDDING + 1 : _TERMS],
                                             _lexicon(r), None)
            for r in listed
        ]  # fmt: skip
        by_hash = sorted(range(len(listed)), key=lambda i: listed[i][_HASH])
        by_hash.sort(key=lambda i: listed[i][_CREATED], reverse=True)  # stable: hash breaks ties
        tie = np.empty(len(listed), dtype=np.int64)
        tie[by_hash] = np.arange(len(listed))
        before, after = _neighbours(listed)
        eligible = [r[_HOLDS] in (None, "statement") for r in listed]
        ranked = tuple(i for i in by_hash if eligible[i])
        document = np.full(len(listed), -1, dtype=np.int64)
        document[list(ranked)] = np.arange(len(ranked))
        texts = sum(
            len(r[_USER]) + len(r[_AI]) + len(r[_METADATA]) + _LEXEME_BYTES * len(r[_TERMS])
            for r in listed
        )
        return cls(
            rows=tuple(listed),
            position={r[_ID]: i for i, r in enumerate(listed)},
            matrix=matrix,
            squares=np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64),
            eligible=np.array(eligible, dtype=bool),
            tie=tie,
            before=before.tolist(),
            after=after.tolist(),
            scored=ranked,
            document=document.tolist(),
            lexicons=tuple(listed[i][_TERMS] for i in ranked),
            lengths=np.array([listed[i][_LENGTH] for i in ranked], dtype=np.float64),
            nbytes=matrix.nbytes + texts + _ROW_BYTES * len(listed),
            stamp=stamp,
            judged=judged if judged is not None else [None] * len(listed),
        )

    @property
    def dimensions(self) -> int | None:
        """The length of the held vectors (None when the user holds none)."""
        return self.matrix.shape[1] if self.rows else None

    def changed(self, ids: Sequence[UUID], versions: Sequence[int]) -> list[UUID] | None:
        """Of `ids` (the user's every memory, with their row `versions`), those new or changed
        since these rows were read; None when nothing changed (none new, changed or gone)."""
        stale = [
            m
            for m, v in zip(ids, versions, strict=True)
            if (i := self.position.get(m)) is None or self.rows[i][_VERSION] != v
        ]
        return None if not stale and len(ids) == len(self.rows) else stale

    def updated(
        self, ids: Sequence[UUID], versions: Sequence[int], fresh: Sequence[Row], stamp: int
    ) -> HeldUser:
        """These rows brought up to `ids` and their `versions` (read with `stamp`): `fresh`
        (the new and changed rows, read after them) in, the rows no longer listed out."""
        read = {r[_ID]: r for r in fresh}
        rows: list[Row] = []
        kept: dict[int, int] = {}  # a row kept as held: its place in `rows`, its index here
        for m, v in zip(ids, versions, strict=True):
            i = self.position.get(m)
            row = read.pop(m, None)
            if row is None and i is not None and self.rows[i][_VERSION] == v:
                kept[len(rows)] = i
                row = self.rows[i]
            if row is not None:  # a row deleted between the two reads is left out
                rows.append(row)
        rows.extend(read.values())
        if not kept:  # nothing held stays: the rows as read
            return HeldUser.of(rows, stamp)
        # the kept rows' vectors and judgements taken over; the fresh rows' vectors read (of
        # another length than the held ones': ValueError, as `of` raises)
        matrix = np.empty((len(rows), self.matrix.shape[1]), np.float32)
        matrix[list(kept)] = self.matrix[list(kept.values())]
        fresh_at = [n for n in range(len(rows)) if n not in kept]
        if fresh_at:
            matrix[fresh_at] = np.stack(
                [stored_vector(rows[n][_EMBEDDING], np.float32) for n in fresh_at]
            )
        judged = [self.judged[kept[n]] if n in kept else None for n in range(len(rows))]
        return HeldUser.of(rows, stamp, matrix=matrix, judged=judged)

    def distances(self, vector: Vector) -> np.ndarray:
        """Every held row's cosine distance to `vector`, as pgvector's `<=>` computes it
        (float32 products, their quotient in float64, the similarity clamped to [-1, 1]).

        Raises:
            ValueError: `vector` is not as long as the held vectors.
        """
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (self.matrix.shape[1],):
            raise ValueError(
                f"different vector dimensions {self.matrix.shape[1]} and {query.shape[0]}"
            )
        dots = (self.matrix @ query).astype(np.float64)
        square = float(np.dot(query, query))
        with np.errstate(divide="ignore", invalid="ignore"):
            similarity = dots / np.sqrt(self.squares * square)
        return 1.0 - np.clip(similarity, -1.0, 1.0)


class HeldRows:
    """The users' held memories (`HeldUser`), at most `megabytes` in all: the least recently
    searched user is dropped first, and a user larger than that is read for each search and
    not kept (0: none kept): the rows its sync read are handed to that search once (`take`).

    Args:
        megabytes: `Settings.held_memories_mb`.
    """

    def __init__(self, megabytes: int) -> None:
        self._users: LRUCache[str, HeldUser] = LRUCache(
            maxsize=max(megabytes, 0) * 2**20 or 1, getsizeof=lambda held: held.nbytes or 1
        )
        self._passing: tuple[str, HeldUser] | None = None  # the last sync not kept

    def drop(self, user_id: str) -> None:
        """Forget what is held of `user_id` (their memories were erased here)."""
        self._users.pop(user_id, None)
        if self._passing is not None and self._passing[0] == user_id:
            self._passing = None

    def get(self, user_id: str) -> HeldUser | None:
        """What is held of `user_id`, as of their last sync (None: nothing)."""
        return self._users.get(user_id)

    def take(self, user_id: str) -> HeldUser | None:
        """`get`, else the rows the last sync read of `user_id` and did not keep (over the
        budget), handed over once: the search that synced them reads them, not the database
        again."""
        held = self._users.get(user_id)
        if held is None and self._passing is not None and self._passing[0] == user_id:
            held, self._passing = self._passing[1], None
        return held

    async def sync(
        self,
        conn: AsyncConnection[Any],
        user_id: str,
        words: list[str] | None = None,
        *,
        again: bool = False,
    ) -> tuple[HeldUser, HeldState]:
        """`user_id`'s memories as the database holds them now, read over `conn`: their stamp,
        and, only when it changed since the last sync, their row versions (the same call) and
        then the rows new or changed (every row the first time, or `again`); with the stamp,
        what BM25 reads besides the rows, for `words` (`HeldState`). The rows are read after
        the stamp, so a write that lands between changes the next sync's stamp."""
        held = None if again else self._users.get(user_id)
        known = await held_state(
            conn, user_id=user_id, stamp=held.stamp if held else None, words=words or []
        )
        if held is not None and known.ids is None:
            return held, known
        if held is None or known.ids is None or known.versions is None:
            fresh = HeldUser.of(await held_rows(conn, user_id=user_id, ids=None), known.stamp)
        else:
            stale = held.changed(known.ids, known.versions)
            if stale is None:
                fresh = dataclasses.replace(held, stamp=known.stamp)
            else:
                rows = await held_rows(conn, user_id=user_id, ids=stale) if stale else []
                fresh = held.updated(known.ids, known.versions, rows, known.stamp)
        if fresh.nbytes <= self._users.maxsize:
            self._users[user_id] = fresh
        else:
            self._users.pop(user_id, None)
            self._passing = (user_id, fresh)
        return fresh, known
