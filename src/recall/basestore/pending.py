"""A `RecallStore`'s pending vectors joining their HNSW graphs (migration 0028, decision 0052).

A run of puts (up to `PENDING_MAX` vectors) into a namespace whose index leaves pending vectors
out writes its vectors pending: the put does not wait for a graph insert, and the indexed
searches compare pending vectors exactly. `PendingVectors` clears the flag in the background in
small batches, each its own transaction, which inserts the rows into their graphs. It is woken
after each batch that wrote pending vectors, and once when the store first reads its indexes
(vectors that a process that stopped left pending). Several processes may join at once: each
batch skips the rows another holds.
"""

from __future__ import annotations

import asyncio

import structlog
from psycopg_pool import AsyncConnectionPool

from recall.db.storeindex import join_graphs

__all__ = ["JOIN_BATCH", "PENDING_MAX", "PendingVectors"]

log = structlog.stdlib.get_logger(__name__)

PENDING_MAX = 64
"""The most vectors a run of puts writes pending: a larger one (a bulk load) inserts them into
the graphs as it writes them, which costs the database half as much as writing then joining
(one row version a vector, not two) and leaves the searches nothing to compare exactly."""

JOIN_BATCH = 8
"""Vectors joined a transaction: a put replacing one of them waits for that batch at most (a
graph insert is a few milliseconds at `ef_construction` 200: some tens of milliseconds)."""


class PendingVectors:
    """Joins the pending vectors to their graphs, one run at a time.

    Args:
        pool: the store's pool (autocommit connections: each batch commits on its own).
    """

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False
        self._swept = False

    def leftovers(self) -> None:
        """Wake once in this store's life, for what a process that stopped left pending."""
        if not self._swept:
            self._swept = True
            self.wake()

    def wake(self) -> None:
        """Start a run unless one is under way; one under way goes round once more (what was
        committed after its last batch is joined too)."""
        if self._closed:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._again = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="recall-graphs")

    async def _run(self) -> None:
        joined = 0
        try:
            while True:
                async with self._pool.connection() as conn:
                    while (count := await join_graphs(conn, JOIN_BATCH)) > 0:
                        joined += count
                if not self._again:
                    break
                self._again = False
        except Exception as exc:  # a later wake (the next put, or reopening) tries again
            log.warning("store.graphs.join_failed", kind=type(exc).__name__, error=str(exc))
        if joined:
            log.info("store.graphs.joined", vectors=joined)

    async def wait(self) -> None:
        """Wait until no run is under way."""
        while self._task is not None and not self._task.done():
            await asyncio.gather(self._task, return_exceptions=True)

    async def close(self) -> None:
        """Start nothing new and stop the run under way (what it left stays pending: searches
        still find it, and the next store to open joins it)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        await self.wait()
