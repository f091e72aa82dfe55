"""Storing one turn: checked, embedded, written in one call that is idempotent per content. A
part of `MemoryStore` over its `StoreCore`; a repeated turn is counted by `Repeats`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

import structlog

from recall.db.memories import add_memory
from recall.errors import StoreError
from recall.memory import Memory, Turn
from recall.search.judging import judged
from recall.search.provenance import Provenance, with_provenance
from recall.store.core import StoreCore
from recall.store.repeats import Repeats

__all__ = ["Writes"]

log = structlog.stdlib.get_logger(__name__)


class Writes:
    """`MemoryStore.add_turn` and `add_checked_turn`.

    Args:
        core: the state the store's parts share.
        repeats: stores a turn in one call, or counts it on the memory it repeats.
    """

    def __init__(self, core: StoreCore, repeats: Repeats) -> None:
        self.core = core
        self.repeats = repeats

    async def add_turn(
        self,
        user_id: str,
        user_message: str,
        ai_response: str,
        *,
        conversation_id: str | None = None,
        created_at: Any = None,
        metadata: Mapping[str, Any] | None = None,
        kind: str,
        provenance: Provenance | Mapping[str, Any] | None = None,
    ) -> Memory:
        """Store one user/AI turn pair and return it; the same turn twice is stored once, and
        a turn that repeats a stored memory of the user almost word for word is counted on it
        and not stored again (`settings.link_repeated_turns`; the stored memory is returned).

        Texts are cleaned as `recall.memory.clean_text` documents (NUL removed, lone surrogates
        replaced, cut to `max_message_length`, a summary's to at least
        `recall.memory.MAX_SUMMARY_LENGTH`). `kind` "note" stores a text of its own (its
        `ai_response` may be empty), as notes import and the writer's system messages do.
        `provenance` (what the writer node retrieved for the turn, `recall.search.provenance`)
        is stored in its metadata under "recall", outside the `max_metadata_bytes` limit.

        Raises:
            InvalidInputError: a field is unusable; nothing is stored.
            EmbeddingError: the model failed; nothing is stored.
            StoreError: the database failed; nothing is stored.
        """
        turn = self.core.turn(
            user_id,
            user_message,
            ai_response,
            conversation_id=conversation_id,
            created_at=created_at,
            metadata=metadata,
            kind=kind,
        )
        if provenance is not None and not isinstance(provenance, Provenance):
            provenance = Provenance.from_dict(provenance)
        return await self.add_checked_turn(with_provenance(turn, provenance))

    async def add_checked_turn(self, turn: Turn) -> Memory:
        """Store a turn already checked with this store's limits and return it, as `add_turn`
        does after checking: `recall.memory.make_turn(...)` with `max_length` and
        `max_metadata_bytes` from `store.settings`. The writer node checks each turn so before
        queueing it and hands the checked turn here, so a turn is checked once on its way.

        Raises:
            EmbeddingError: the model failed; nothing is stored.
            StoreError: the database failed; nothing is stored.
        """
        [vector] = await self.core.embedder.embed_documents([turn.text])
        stored: tuple[UUID, datetime, bool] | None = None
        if self.core.settings.link_repeated_turns:
            # recall.add_turn (migration 0019): the repeat lookup and the insert in one call;
            # a second only when one of the user's memories is within the dedup threshold
            near = await self.repeats.write_or_near(turn, vector)
            if isinstance(near, tuple):
                stored = near
            else:
                repeated = await self.repeats.repeat_among(turn, near)
                if repeated is not None:
                    self.core.note_added(turn.user_id, 0)
                    return repeated
        if stored is None:
            # recall.add_memory sets the row-level security key itself (migration 0009): one
            # round trip, one transaction
            async with self.core.conn("add_turn", fence=(turn.user_id,)) as conn:
                row = await add_memory(conn, turn, vector, self.core.embedder.name)
            if row is None:  # deleted between its two statements: store it again next time
                raise StoreError("add_turn: the turn was deleted while it was being stored")
            stored = (row.memory_id, row.memory_created_at, row.inserted)
        memory_id, created_at, inserted = stored
        self.core.note_added(turn.user_id, int(inserted))
        log.debug("memory.add.done", inserted=inserted)
        return Memory(
            id=str(memory_id),
            user_message=turn.user_message,
            ai_response=turn.ai_response,
            similarity=None,
            conversation_id=turn.conversation_id,
            created_at=created_at,
            metadata=judged(turn.metadata, turn.user_message, turn.ai_response, turn.kind),
            kind=turn.kind,
        )
