"""Bulk import: turns checked and embedded batch by batch, each batch written with one COPY in
its own transaction, several batches in flight at once."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from recall.db.copying import copy_turns, import_clock
from recall.embeddings import Vector
from recall.errors import InvalidInputError, StoreError
from recall.memory import Turn
from recall.store.checks import imported_id
from recall.store.core import StoreCore

__all__ = ["Bulk", "ImportProgress"]

# a batch this large is checked in a worker thread (see Bulk._prepare_batch)
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


@dataclass(slots=True)
class ImportProgress:
    """How far an `add_turns` call is, in turns (all counted in the input's order).

    Attributes:
        prepared: checked and embedded, ready to be written.
        written: in committed batches.
        new: of the written, stored for the first time (the others were stored before).
    """

    prepared: int = 0
    written: int = 0
    new: int = 0


@dataclass(slots=True)
class _InFlight:
    """An import's batches being written, reported in the file's order (`Bulk.add_turns`)."""

    done: ImportProgress
    on_batch: Callable[[int], Awaitable[None] | None] | None
    on_progress: Callable[[ImportProgress], None] | None
    tasks: deque[asyncio.Task[tuple[list[str], int]]] = field(default_factory=deque)
    ids: list[str] = field(default_factory=list)

    def moved(self) -> None:
        """Report the progress."""
        if self.on_progress is not None:
            self.on_progress(self.done)

    async def settle(self, keep: int) -> None:
        """Wait for the oldest batches and report them until `keep` remain in flight."""
        try:
            while len(self.tasks) > keep:
                batch_ids, new = await self.tasks[0]
                self.tasks.popleft()
                self.ids.extend(batch_ids)
                self.done.written, self.done.new = len(self.ids), self.done.new + new
                self.moved()
                if self.on_batch is not None and (res := self.on_batch(len(self.ids))) is not None:
                    await res
        except BaseException:
            # the others are left to commit or roll back whole, then the first error goes up
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.tasks.clear()
            raise


class Bulk:
    """`MemoryStore.add_turns`.

    Args:
        core: the state the store's parts share.
    """

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    # over 60 lines by its docstring alone (the import's contract: batches, order, failures);
    # the work is `_InFlight`, `_prepare_batch` and `_write_batch`
    async def add_turns(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        batch_size: int,
        on_batch: Callable[[int], Awaitable[None] | None] | None = None,
        writers: int,
        progress: ImportProgress | None = None,
        on_progress: Callable[[ImportProgress], None] | None = None,
    ) -> list[str]:
        """Bulk-store turns (dicts with `add_turn`'s argument names); return their ids in order.

        Each batch is embedded and written with one binary COPY in one transaction: stored
        whole or not at all, and re-running an import stores nothing twice. A dict may carry a
        precomputed `embedding` (floats) and the `id` its memory had (a line of `recall
        export`): a new memory keeps it, and its texts are refused rather than cut when over
        the limit for their kind. The next batch is checked and embedded while the server
        writes the ones before it, up to `writers` at once, each on its own connection (the
        server's work per batch then runs on several cores). Turns without a date are dated in
        the file's order whatever order the batches commit in.

        Args:
            turns: the turns; consumed lazily, batch by batch.
            batch_size: turns per transaction.
            on_batch: called after each batch with the turns stored, in the file's order.
            writers: batches written at once (1 writes one after the other).
            progress: filled as the import goes (turns prepared, written, new); fresh if None.
            on_progress: called with `progress` after each batch is prepared and written.

        Raises:
            InvalidInputError: a turn is unusable (or `batch_size`/`writers` < 1); the message
                gives its position. Batches before it are stored, nothing of its batch is.
            EmbeddingError, StoreError: as in `add_turn`, for the failing batch. Batches before
                it are stored; with `writers` > 1, the one being written beside it may be too
                (it is waited for, so it is stored whole or not at all). Re-running the import
                stores the rest and nothing twice.
        """
        if batch_size < 1 or writers < 1:
            sizes = f"{batch_size} and {writers}"
            raise InvalidInputError(f"batch_size and writers must be >= 1, not {sizes}")
        writers = min(writers, self.core.pool.max_size)  # more would only queue for a connection
        batches = _InFlight(progress if progress is not None else ImportProgress(), on_batch,
                            on_progress)  # fmt: skip
        clock = None
        seen = 0
        for chunk in _chunks(turns, batch_size):
            try:
                prepared = await self._prepare_batch(chunk, offset=seen)
                if clock is None:
                    clock = await self._import_clock()
            except BaseException:
                await batches.settle(0)  # the batches before this one still land (or fail)
                raise
            batches.done.prepared += len(chunk)
            batches.moved()
            await batches.settle(writers - 1)
            batches.tasks.append(asyncio.create_task(self._write_batch(*prepared, clock, seen)))
            seen += len(chunk)
        await batches.settle(0)
        return batches.ids

    async def _import_clock(self) -> datetime:
        async with self.core.conn("add_turns") as conn:
            clock = await import_clock(conn)
        if clock is None:
            raise StoreError("add_turns: the server returned no time")
        return clock

    async def _prepare_batch(
        self, items: list[Mapping[str, Any]], *, offset: int
    ) -> tuple[list[Turn], list[Vector], list[UUID | None]]:
        """Check a batch's turns, ids and vectors, and embed the turns that came without one."""
        if len(items) >= _THREAD_BATCH:  # CPU work off the event loop, so a write can go on
            turns, vectors, ids = await asyncio.to_thread(self._check_batch, items, offset)
        else:
            turns, vectors, ids = self._check_batch(items, offset)
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            computed = await self.core.embedder.embed_documents([turns[i].text for i in missing])
            for i, vec in zip(missing, computed, strict=True):
                vectors[i] = vec
        return turns, [v for v in vectors if v is not None], ids

    def _check_batch(
        self, items: list[Mapping[str, Any]], offset: int
    ) -> tuple[list[Turn], list[Vector | None], list[UUID | None]]:
        known = {"user_id", "user_message", "ai_response", "conversation_id", "created_at"}
        turns: list[Turn] = []
        vectors: list[Vector | None] = []
        ids: list[UUID | None] = []
        for pos, item in enumerate(items, start=offset):
            if not isinstance(item, Mapping):
                raise InvalidInputError(f"turn #{pos} must be a mapping, not {type(item).__name__}")
            try:
                given_id = imported_id(item.get("id"))
                turns.append(
                    self.core.turn(
                        **{k: item.get(k) for k in known},
                        metadata=item.get("metadata"),
                        kind=item.get("kind") or "turn",
                        cut=given_id is None,  # a kept id keeps its text (and content hash)
                    )
                )
                ids.append(given_id)
            except InvalidInputError as exc:
                raise InvalidInputError(f"turn #{pos}: {exc}") from exc
            given = item.get("embedding")
            vectors.append(None if given is None else self.core.embedder.check_vector(given))
        return turns, vectors, ids

    async def _write_batch(
        self,
        turns: list[Turn],
        vectors: list[Vector],
        given: list[UUID | None],
        clock: datetime,
        first: int,
    ) -> tuple[list[str], int]:
        users = {t.user_id for t in turns}
        async with self.core.conn("add_turns", all_users=True, fence=users) as conn:
            ids, new = await copy_turns(
                conn, turns, vectors, self.core.embedder.name, clock=clock, first=first, ids=given
            )
        for user_id, count in Counter(t.user_id for t in turns).items():
            self.core.note_added(user_id, count)
        return ids, new
