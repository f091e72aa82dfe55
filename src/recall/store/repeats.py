"""Repeats: a turn that repeats a stored memory of the user almost word for word is counted on
that memory instead of being stored again (issue 37, decision 0029)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import structlog

from recall.db.memories import add_turn, count_repeat
from recall.embeddings import Vector
from recall.errors import StoreError
from recall.memory import Memory, Turn, content_hash, embedding_text
from recall.rows import MemoryRow
from recall.search.provenance import near_duplicate
from recall.search.ranking import row_memory
from recall.store.core import StoreCore

__all__ = ["NEAREST", "Repeats"]

log = structlog.stdlib.get_logger(__name__)

NEAREST = 10
"""Stored memories a new turn is compared with, the nearest first (near-variants of one text,
"... (1)", "... (2)", can hold the first places)."""


def _same_turn(turn: Turn, row: MemoryRow) -> bool:
    """Whether `row` (one of the user's memories) is `turn` itself: it has its content hash."""
    own = content_hash(
        turn.user_id, row.conversation_id, row.user_message, row.ai_response, row.kind
    )
    return own == turn.content_hash


class Repeats:
    """Stores a turn, or finds the stored memory it repeats and counts the repeat on it.

    Args:
        core: the state the store's parts share.
    """

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    async def write_or_near(
        self, turn: Turn, vector: Vector
    ) -> tuple[UUID, datetime, bool] | list[MemoryRow]:
        """Store `turn` unless one of the user's memories of its kind is within
        `settings.dedup_threshold` (cosine): `recall.add_turn` (migration 0019), one round trip.

        Returns:
            The stored turn's id, date and whether this call inserted it (false: the same turn
            was stored before, a retry); or, with nothing stored, the user's `NEAREST` memories
            of its kind that near, nearest first, for `repeat_among`.

        Raises:
            StoreError: the database failed, or the row was deleted while it was stored.
        """
        async with self.core.conn("add_turn", fence=(turn.user_id,)) as conn:
            rows = await add_turn(
                conn,
                turn,
                vector,
                self.core.embedder.name,
                max_distance=1.0 - self.core.settings.dedup_threshold,
                nearest=NEAREST,
                candidates=self.core.settings.hnsw_ef_search,
            )
        if not rows:  # deleted between its two statements: store it again next time
            raise StoreError("add_turn: the turn was deleted while it was being stored")
        if rows[0].inserted is not None:
            return (rows[0].id, rows[0].created_at, rows[0].inserted)
        return [
            MemoryRow(
                id=r.id,
                conversation_id=r.conversation_id,
                user_message=r.user_message or "",
                ai_response=r.ai_response or "",
                created_at=r.created_at,
                metadata=r.metadata or {},
                kind=r.kind or turn.kind,
                distance=None,
                bm25=None,
            )
            for r in rows
        ]

    async def repeat_among(self, turn: Turn, rows: list[MemoryRow]) -> Memory | None:
        """The memory among `rows` (the user's nearest of `turn`'s kind) that `turn` repeats,
        with the repeat counted, or None (store it).

        A repeat is one whose text `turn`'s repeats almost word for word
        (`recall.search.provenance.near_duplicate`): its metadata counts it (`repeats`) and
        keeps when it was last seen. The same turn again (a retry, the same content hash) is
        returned as it is, uncounted: `recall.add_turn` finds it by its hash, except when a
        concurrent attempt commits it between that lookup and the nearness search, which then
        finds it here.
        """
        # the full texts, not the own words that are embedded (decision 0038): a turn counted
        # instead of stored loses its texts, so only one that says all the stored one says,
        # quotes included, is a repeat
        text = embedding_text(turn.user_message, turn.ai_response)
        for row in rows:
            if _same_turn(turn, row):
                log.debug("memory.add.raced", memory_id=str(row.id))
                return row_memory(row)
        for row in rows:
            if row.kind != turn.kind:
                continue
            if not near_duplicate(text, embedding_text(row.user_message, row.ai_response)):
                continue
            seen = turn.created_at or datetime.now(UTC)
            async with self.core.conn("add_turn", user=turn.user_id, fence=(turn.user_id,)) as conn:
                counted = await count_repeat(conn, turn.user_id, row.id, seen)
            if counted is None:  # erased meanwhile: look no further, store the turn
                return None
            log.info("memory.add.repeat", memory_id=str(row.id))
            return row_memory(counted)
        return None
