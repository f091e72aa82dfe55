"""Reading one user's memories without a query: the newest ones, one by id, and all of them
(an export)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

import structlog

from recall.db.memories import (
    get_memory,
    memories_by_ids,
    memories_page,
    recent_memories,
    restatements_of,
    user_summaries,
)
from recall.errors import InvalidInputError
from recall.memory import KINDS, Memory, clean_id
from recall.rows import ConversationSummary
from recall.search.provenance import Provenance
from recall.search.ranking import row_memory
from recall.store.checks import check_limit, memory_key
from recall.store.core import StoreCore

__all__ = ["MemoryLinks", "Reads"]

MAX_RESTATEMENTS = 100  # restatements listed at most, oldest first

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class MemoryLinks:
    """A memory's provenance (`MemoryStore.links`).

    Attributes:
        memory: the memory.
        sources: the memories retrieved for its turn that are still stored, oldest first
            (its metadata lists which its reply quoted).
        restatements: the memories whose reply quoted it, oldest first (at most 100).
        erased: the ids its provenance records that are no longer stored (deleting a memory
            leaves its id in the provenance of the turns it was retrieved for), in the
            provenance's order.
    """

    memory: Memory
    sources: list[Memory]
    restatements: list[Memory]
    erased: list[str] = field(default_factory=list)


class Reads:
    """`MemoryStore.recent`, `page`, `export`, `get`, `links` and `summaries`.

    Args:
        core: the state the store's parts share.
    """

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def recent(self, user_id: str, n: int) -> list[Memory]:
        """The user's `n` most recent memories, newest first (similarity None).

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        n = check_limit(n, "n")
        async with self.core.conn("recent", read=True, user=uid) as conn:
            rows = await recent_memories(conn, uid, n)
        return [row_memory(r) for r in rows]

    async def page(
        self,
        user_id: str,
        limit: int,
        before: Memory | tuple[datetime, str] | None,
        *,
        kind: str | None = None,
    ) -> list[Memory]:
        """One page of the user's memories, newest first: the `limit` written before `before`
        (the last memory of the previous page, or its (created_at, id); None: the first page),
        only those of `kind` ("turn", "note" or "summary") when it is set.

        Raises:
            InvalidInputError: a bad user id, limit or cursor.
            StoreError: the database failed.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        limit = check_limit(limit)
        if kind is not None and kind not in KINDS:
            raise InvalidInputError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        cursor: tuple[datetime, UUID] | None = None
        if before is not None:
            at, mid = (before.created_at, before.id) if isinstance(before, Memory) else before
            try:
                cursor = (at, UUID(str(mid)))
            except ValueError as exc:
                raise InvalidInputError(
                    f"the page cursor's id is not a memory id: {mid!r}"
                ) from exc
            if not isinstance(at, datetime) or at.tzinfo is None:
                raise InvalidInputError("the page cursor's time must be a timezone-aware datetime")
        async with self.core.conn("page", read=True, user=uid) as conn:
            rows = await memories_page(conn, uid, limit, cursor, kind)
        return [row_memory(r) for r in rows]

    async def export(self, user_id: str, *, page_size: int) -> AsyncIterator[Memory]:
        """Every memory of the user, newest first, read from the primary (a replica may not
        have the latest yet) one page of `page_size` at a time, each on its own connection.
        A memory written during the export may be left out; none is read twice.

        Raises:
            InvalidInputError: a bad user id or page size.
            StoreError: the database failed.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        page_size = check_limit(page_size, "page_size")
        cursor: tuple[datetime, UUID] | None = None
        count = 0
        while True:
            async with self.core.conn("export", user=uid) as conn:
                rows = await memories_page(conn, uid, page_size, cursor)
            for row in rows:
                yield row_memory(row)
            count += len(rows)
            if len(rows) < page_size:
                break
            cursor = (rows[-1].created_at, rows[-1].id)
        log.info("memory.export.done", count=count)

    async def summaries(self, user_id: str, limit: int) -> list[ConversationSummary]:
        """The rolling summaries of the user's conversations (`recall.creation`), newest first.

        Raises:
            InvalidInputError, StoreError.
        """
        uid = clean_id(user_id, "user_id")
        assert uid is not None
        limit = check_limit(limit)
        async with self.core.conn("summaries", read=True, user=uid) as conn:
            return await user_summaries(conn, uid, limit)

    async def get(self, user_id: str, memory_id: str) -> Memory | None:
        """One of the user's memories by id, or None (also for another user's id).

        Raises:
            InvalidInputError, StoreError.
        """
        uid, mid = memory_key(user_id, memory_id)
        if mid is None:
            return None
        async with self.core.conn("get", read=True, user=uid) as conn:
            row = await get_memory(conn, uid, mid)
        return None if row is None else row_memory(row)

    async def links(self, user_id: str, memory_id: str) -> MemoryLinks | None:
        """One of the user's memories with its sources and restatements
        (`recall.search.provenance`), or None (also for another user's id).

        Raises:
            InvalidInputError, StoreError.
        """
        uid, mid = memory_key(user_id, memory_id)
        if mid is None:
            return None
        async with self.core.conn("links", read=True, user=uid) as conn:
            row = await get_memory(conn, uid, mid)
            if row is None:
                return None
            provenance = Provenance.of(row.metadata)
            ids = [UUID(i) for i in provenance.sources] if provenance is not None else []
            sources = await memories_by_ids(conn, uid, ids) if ids else []
            restating = await restatements_of(conn, uid, mid, MAX_RESTATEMENTS)
        stored = {str(r.id) for r in sources}
        return MemoryLinks(
            memory=row_memory(row),
            sources=[row_memory(r) for r in sources],
            restatements=[row_memory(r) for r in restating],
            erased=[i for i in provenance.sources if i not in stored] if provenance else [],
        )
