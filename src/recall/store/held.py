"""The memories a search holds between searches: each user's rows kept in the process and
checked against the database's row versions while the query is embedded, so that after the
embedding the default path's vector side (the exact nearest memories, the candidates' details
and the turns before and after each) is computed here instead of in a call
(docs/decisions/0059-held-rows.md). For users of up to `SCOPE_FROM` memories; a larger user's
candidates come from one call over their nearest (`recall.search_scoped`)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from cachetools import LRUCache
from psycopg import AsyncConnection

from recall.db.search_rows import held_rows, held_versions
from recall.embeddings import Vector
from recall.rows import HELD_COLUMNS
from recall.search.assembly import stored_vector

__all__ = ["HeldRows", "HeldUser"]

Row = tuple[Any, ...]

# each column's place, looked up by its name
(_ID, _VERSION, _CONVERSATION, _USER, _AI, _CREATED, _METADATA, _KIND, _EMBEDDING, _LENGTH, _HOLDS,
 _HASH) = (HELD_COLUMNS.index(c) for c in (
    "id", "version", "conversation_id", "user_message", "ai_response", "created_at", "metadata",
    "kind", "embedding", "doc_len", "holds", "content_hash"))  # fmt: skip
# what a held row costs beyond its vector and texts (its tuple, ids, times, array entries;
# tracemalloc measured 2.8 kB a row in all for four LoCoMo users, 1,226 rows)
_ROW_BYTES = 900


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


@dataclass(frozen=True, eq=False)
class HeldUser:
    """One user's memories as held: their rows (`recall.rows.HELD_COLUMNS`, each vector a
    read-only row of `matrix`) and, in the same order, what the nearest are found by.

    Build one with `HeldUser.of`; it is never changed (a search may read it while the next sync
    replaces it).
    """

    rows: tuple[Row, ...]
    position: dict[UUID, int]  # a row's index by its id
    matrix: np.ndarray  # (rows, dimensions), float32, read-only
    squares: np.ndarray  # each vector's squared norm, float64
    eligible: np.ndarray  # whether a row may be a nearest memory (it holds a statement)
    tie: np.ndarray  # a row's place in (created_at descending, content_hash) order
    before: np.ndarray  # the turn before (index; -1: none)
    after: np.ndarray  # the turn after
    nbytes: int  # about what it holds in memory
    stamp: int  # `recall.held_versions`' stamp when the rows were read (a write changes it)

    @classmethod
    def of(cls, rows: Iterable[Row], stamp: int = 0) -> HeldUser:
        """The held form of a user's rows (every column of `recall.rows.HELD_COLUMNS`), read
        after their `stamp` was.

        Raises:
            ValueError: the rows' vectors are not all of one length.
        """
        listed = list(rows)
        if listed:
            matrix = np.stack([stored_vector(r[_EMBEDDING], np.float32) for r in listed])
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        matrix.flags.writeable = False
        listed = [(*r[:_EMBEDDING], matrix[i], *r[_EMBEDDING + 1 :]) for i, r in enumerate(listed)]
        by_hash = sorted(range(len(listed)), key=lambda i: listed[i][_HASH])
        by_hash.sort(key=lambda i: listed[i][_CREATED], reverse=True)  # stable: hash breaks ties
        tie = np.empty(len(listed), dtype=np.int64)
        tie[by_hash] = np.arange(len(listed))
        before, after = _neighbours(listed)
        texts = sum(len(r[_USER]) + len(r[_AI]) + len(r[_METADATA]) for r in listed)
        return cls(
            rows=tuple(listed),
            position={r[_ID]: i for i, r in enumerate(listed)},
            matrix=matrix,
            squares=np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64),
            eligible=np.array([r[_HOLDS] in (None, "statement") for r in listed], dtype=bool),
            tie=tie,
            before=before,
            after=after,
            nbytes=matrix.nbytes + texts + _ROW_BYTES * len(listed),
            stamp=stamp,
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
        keep = []
        for m, v in zip(ids, versions, strict=True):
            i = self.position.get(m)
            row = read.pop(m, None)
            if row is None and i is not None and self.rows[i][_VERSION] == v:
                row = self.rows[i]
            if row is not None:  # a row deleted between the two reads is left out
                keep.append(row)
        return HeldUser.of(keep + list(read.values()), stamp)

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

    def details(self, vector: Vector, limit: int, ids: Iterable[UUID], vectors: bool) -> list[Row]:
        """The rows `recall.search_details` returns (tuples of `recall.rows.DETAIL_COLUMNS`):
        the `limit` nearest memories that hold a statement (exact; ties to the newer memory,
        then by content hash) and those of `ids` that are held, each with its distance, its
        vector when `vectors`, and the turns before and after it with theirs, nearest first.

        Raises:
            ValueError: `vector` is not as long as the held vectors.
        """
        if not self.rows:
            return []
        distance = self.distances(vector)
        picked = {self.position[i] for i in ids if i in self.position}
        if limit > 0:
            pool = np.flatnonzero(self.eligible)
            nearest = pool[np.lexsort((self.tie[pool], distance[pool]))[:limit]]
            picked.update(nearest.tolist())
        order = sorted(picked, key=lambda i: (distance[i], self.tie[i]))
        return [self._detail(i, distance, vectors) for i in order]

    def _detail(self, i: int, distance: np.ndarray, vectors: bool) -> Row:
        r = self.rows[i]
        b, a = int(self.before[i]), int(self.after[i])
        return (
            r[_ID], r[_CONVERSATION], r[_USER], r[_AI], r[_CREATED], json.loads(r[_METADATA]),
            r[_KIND], float(distance[i]), r[_EMBEDDING] if vectors else None, r[_LENGTH],
            self.rows[b][_ID] if b >= 0 else None, float(distance[b]) if b >= 0 else None,
            self.rows[a][_ID] if a >= 0 else None, float(distance[a]) if a >= 0 else None,
        )  # fmt: skip


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
        self, conn: AsyncConnection[Any], user_id: str, *, again: bool = False
    ) -> HeldUser:
        """`user_id`'s memories as the database holds them now, read over `conn`: their stamp,
        and, only when it changed since the last sync, their row versions (the same call) and
        then the rows new or changed (every row the first time, or `again`). The rows are read
        after the stamp, so a write that lands between changes the next sync's stamp."""
        held = None if again else self._users.get(user_id)
        known = await held_versions(conn, user_id=user_id, stamp=held.stamp if held else None)
        if held is not None and known.ids is None:
            return held
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
        return fresh
