"""Reading one user's memories without a query: the newest ones, and one by id."""

from __future__ import annotations

from recall.db.memories import get_memory, recent_memories
from recall.memory import Memory, clean_id
from recall.search.ranking import row_memory
from recall.store.base import StoreBase
from recall.store.checks import check_limit, memory_key

__all__ = ["Reads"]


class Reads(StoreBase):
    """`MemoryStore.recent` and `get`."""

    async def recent(self, user_id: str, n: int = 5) -> list[Memory]:
        """The user's `n` most recent memories, newest first (similarity None).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        n = check_limit(n, "n")
        async with self._conn("recent", read=True, user=uid) as conn:
            rows = await recent_memories(conn, uid, n)
        return [row_memory(r) for r in rows]

    async def get(self, user_id: str, memory_id: str) -> Memory | None:
        """One of the user's memories by id, or None (also for another user's id).

        Raises:
            InvalidInputError, StoreError.
        """
        uid, mid = memory_key(user_id, memory_id)
        if mid is None:
            return None
        async with self._conn("get", read=True, user=uid) as conn:
            row = await get_memory(conn, uid, mid)
        return None if row is None else row_memory(row)
