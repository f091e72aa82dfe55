"""Repeats: a turn that repeats a stored memory of the user almost word for word is counted on
that memory instead of being stored again (issue 37, decision 0029)."""

from __future__ import annotations

from datetime import UTC, datetime

import structlog

from recall.db.memories import count_repeat
from recall.embeddings import Vector
from recall.memory import Memory, Turn, embedding_text
from recall.search.provenance import near_duplicate
from recall.search.ranking import row_memory
from recall.store.search import Search

__all__ = ["Repeats"]

log = structlog.stdlib.get_logger(__name__)

NEAREST = 10  # stored memories a new turn is compared with, the nearest first (near-variants of
# one text, "... (1)", "... (2)", can hold the first places)


class Repeats(Search):
    """Finds the stored memory a new turn repeats (the search plan of `Search` finds its
    nearest), and counts the repeat on it."""

    async def _repeat_of(self, turn: Turn, vector: Vector) -> Memory | None:
        """The stored memory `turn` repeats, with the repeat counted, or None (store it).

        A repeat is a memory of the same user and kind within `settings.dedup_threshold`
        (cosine) whose text `turn`'s repeats almost word for word
        (`recall.search.provenance.near_duplicate`): its metadata counts it (`repeats`) and
        keeps when it was last seen. The same turn again (same conversation and texts, the
        same content hash: a retry) is not a repeat; the insert returns it as it is.
        """
        rows = await self._vector_search(
            turn.user_id, vector, NEAREST, 1.0 - self.settings.dedup_threshold
        )
        text = turn.text
        for row in rows:
            same_turn = (
                row.conversation_id == turn.conversation_id
                and row.user_message == turn.user_message
                and row.ai_response == turn.ai_response
            )
            if row.kind != turn.kind or same_turn:
                continue
            if not near_duplicate(text, embedding_text(row.user_message, row.ai_response)):
                continue
            seen = turn.created_at or datetime.now(UTC)
            async with self._conn("add_turn", user=turn.user_id, fence=(turn.user_id,)) as conn:
                counted = await count_repeat(conn, turn.user_id, row.id, seen)
            if counted is None:  # erased meanwhile: look no further, store the turn
                return None
            log.info("memory.add.repeat", memory_id=str(row.id))
            return row_memory(counted)
        return None
