"""Erasure: one memory, or everything of a user across tables, indexes and writer queues."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from recall.db.memories import delete_memory, forget_user_rows
from recall.db.userindex import drop_user_index, index_name
from recall.memory import clean_id
from recall.outbox import Outbox
from recall.store.base import StoreBase
from recall.store.checks import memory_key

__all__ = ["Erasure"]

log = structlog.stdlib.get_logger(__name__)


class Erasure(StoreBase):
    """`MemoryStore.delete` and `forget_user`."""

    async def delete(self, user_id: str, memory_id: str) -> bool:
        """Delete one of the user's memories; return whether it existed.

        Raises:
            InvalidInputError, StoreError.
        """
        uid, mid = memory_key(user_id, memory_id)
        if mid is None:
            return False
        async with self._conn("delete", user=uid, fence=(uid,)) as conn:
            deleted = await delete_memory(conn, uid, mid)
        self._plans.pop(uid, None)
        return deleted

    async def forget_user(self, user_id: str, *, outboxes: Sequence[Outbox] = ()) -> int:
        """Erase everything of the user: memories (turns, notes, model-written), bookkeeping,
        tracker, rolling summaries, their own HNSW index, and turns still waiting in the given
        writer queues (`TurnWriter.outbox`).

        Returns:
            How many memories were deleted (queued turns included).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        task = self._index_tasks.pop(uid, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        async with self._conn("forget_user", user=uid) as conn:
            forgotten = await forget_user_rows(conn, uid)
        # an index may exist without its row when a build raced the erasure: drop by name
        name = forgotten.hnsw_index or index_name(uid)
        async with self._conn("forget_user", owner=True, fence=(uid,)) as conn:
            await drop_user_index(conn, name)
        self._plans.pop(uid, None)
        count = forgotten.memories
        for outbox in outboxes:
            count += await outbox.forget(uid)
        log.info("memory.forget.done", count=count)
        return count
