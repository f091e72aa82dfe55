"""The writer node: `store_memories` stores each user/AI turn pair after the reply, through the
durable `TurnWriter`, and never fails the turn. It is a `MemoryNode`: sync graphs and async ones
alike. A sync graph's turns are written on recall's own loop (`recall.nodes.blocking`), where
the writer's queue goes on draining between calls and is flushed at interpreter exit."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from langchain_core.runnables import RunnableConfig

from recall.config import Settings, process_settings
from recall.creation.consolidate import ConsolidationScheduler
from recall.errors import InvalidInputError
from recall.messages import (
    is_error_response,
    latest_turn,
    message_text,
    system_texts_of_latest_turn,
    thread_id,
    user_id_from_config,
)
from recall.metrics import outcome_of
from recall.nodes import blocking
from recall.nodes.memory_node import MemoryNode
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.search.provenance import provenance_of
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, home_loop, provider_for

__all__ = [
    "Writing",
    "create_store_memories_node",
    "store_memories",
    "store_node",
    "turn_of",
    "write_safely",
    "write_turn",
    "writing_for",
]

log = structlog.stdlib.get_logger(__name__)


def create_store_memories_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    writer: TurnWriter | None = None,
    settings: Settings | None = None,
    queue_path: Path | None = None,
    wait_s: float = 2.0,
    consolidation: ConsolidationScheduler | None = None,
) -> MemoryNode:
    """Make a `store_memories` node (a `MemoryNode`: sync and async graphs alike): stores the
    latest user message with the AI reply to it.

    Content filtering: a user message shorter than `min_message_length` is skipped; system
    messages are not stored while `filter_system_messages` is on (the default); with it off,
    each non-empty SystemMessage after the latest HumanMessage (system-generated content of
    this turn) is stored too, as a memory of kind "note" with an empty reply and metadata
    `{"source": "system_message"}`; with the turn go the ids of the memories retrieved for
    it (state's `retrieved_memories`) and which of them the reply quotes
    (`recall.search.provenance`, docs/retrieval.md); an error response (see
    `recall.messages.is_error_response`) is skipped when `filter_error_responses` is on;
    texts are cut to `max_message_length` by the store. The conversation id is the thread
    id; the user comes from the auth config.

    Args:
        store: a store, an async callable returning one, or None for the process-wide store.
        writer: a ready `TurnWriter` (then `store`, `queue_path` and `wait_s` are unused); it
            must then be used on one event loop only. None: a writer for each loop the node
            runs on, over one queue file.
        settings: filtering settings; `process_settings()` when None.
        queue_path: the durable queue file; `settings.queue_path` when None.
        wait_s: how long the node waits for the database before handing the turn off.
        consolidation: notified after each turn, to write memories in the background
            (docs/memory-creation.md); the node never waits for it.

    Returns:
        A node `(state, config) -> {}`, run by `invoke` or `ainvoke` (and awaitable as
        `await node(state, config)`); it never raises and never waits past `wait_s` (plus the
        local queue write).
    """
    how = writing_for(store, writer=writer, settings=settings, queue_path=queue_path,
                      wait_s=wait_s, consolidation=consolidation)  # fmt: skip

    async def store_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Store the latest user/AI turn pair of this thread."""
        return await store_node(how, state, config)

    return MemoryNode(
        store_memories,
        name="store_memories",
        fallback={},
        home=how.home,
        event="memory.write.error",
    )


def writing_for(
    store: MemoryStore | StoreProvider | None = None,
    *,
    writer: TurnWriter | None = None,
    settings: Settings | None = None,
    queue_path: Path | None = None,
    wait_s: float = 2.0,
    consolidation: ConsolidationScheduler | None = None,
) -> Writing:
    """What a writer (the node, or `RecallMiddleware`) is made with, resolved once
    (`create_store_memories_node`'s arguments)."""
    cfg = settings or process_settings()
    provider = provider_for(store)
    path = queue_path or cfg.queue_path

    def make() -> TurnWriter:
        return TurnWriter(provider, Outbox(path), wait_s=wait_s, settings=cfg)

    return Writing(cfg, consolidation, make, home_loop(provider), given=writer)


@dataclass(slots=True)
class Writing:
    """What a writer node was made with: its settings, the writer it was given or how to make
    one, and the writer of each event loop it ran on (a writer's tasks belong to one loop),
    each started on its first turn (it drains what an earlier process could not write)."""

    settings: Settings
    consolidation: ConsolidationScheduler | None
    make: Callable[[], TurnWriter]
    home: asyncio.AbstractEventLoop | None = None
    given: TurnWriter | None = None
    started: weakref.WeakSet[TurnWriter] = field(default_factory=weakref.WeakSet)
    writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnWriter] = field(
        default_factory=weakref.WeakKeyDictionary
    )

    def writer(self) -> TurnWriter:
        """The writer of the running loop, started on first use; on recall's own loop (a sync
        graph's), flushed at interpreter exit."""
        loop = asyncio.get_running_loop()
        writer = self.given or self.writers.get(loop)
        if writer is None:
            for ended in [lp for lp in self.writers if lp.is_closed()]:  # its tasks are gone
                self.writers.pop(ended).outbox.close()
            writer = self.writers[loop] = self.make()
        if writer not in self.started:  # turns an earlier process could not write
            self.started.add(writer)
            writer.start()
        if blocking.is_portal(loop):
            blocking.at_exit(writer, writer.finish)
        return writer


async def store_node(how: Writing, state: Any, config: RunnableConfig) -> dict[str, Any]:
    """The writer node's body: the latest turn pair of `state` to this loop's writer; never
    raises."""
    user_id, thread = user_id_from_config(config), thread_id(config)
    with structlog.contextvars.bound_contextvars(
        user_id=user_id, thread_id=thread, node="store_memories"
    ):
        await write_safely(how, state, user_id, thread)
    return {}


async def write_safely(how: Writing, state: Any, user_id: str | None, thread: str | None) -> None:
    """`write_turn`, its failures logged: the reply is already made, never fail the turn."""
    try:
        await write_turn(how, state, user_id, thread)
    except InvalidInputError as exc:
        log.warning("memory.write.skip", reason="invalid", error=str(exc))
    except Exception as exc:
        log.error("memory.write.error", kind=outcome_of(exc), error=str(exc))


def turn_of(state: Any, settings: Settings) -> tuple[str, str] | None:
    """The latest user message and the AI's reply to it, or None when this turn is not stored
    (none, an error response, a message too short), the reason logged."""
    if isinstance(state, Mapping) and state.get("__error__"):
        log.info("memory.write.skip", reason="error_response")
        return None
    pair = latest_turn(state)
    if pair is None:
        log.info("memory.write.skip", reason="no_pair")
        return None
    human, ai = pair
    user_text = message_text(human.content)
    if len(user_text.strip()) < settings.min_message_length:
        log.info("memory.write.skip", reason="too_short")
        return None
    if settings.filter_error_responses and is_error_response(ai):
        log.info("memory.write.skip", reason="error_response")
        return None
    return user_text, message_text(ai.content)


async def write_turn(how: Writing, state: Any, user_id: str | None, thread: str | None) -> None:
    """Submit the latest turn pair of `user_id` in conversation `thread` (with the provenance
    of the memories retrieved for it) and, with `filter_system_messages` off, this turn's
    system messages as notes.

    Raises:
        InvalidInputError: the turn can never be stored; anything the writer raised.
    """
    if user_id is None:
        log.warning("memory.write.skip", reason="no_user")
        return
    turn = turn_of(state, how.settings)
    if turn is None:
        return
    user_text, reply = turn
    now = datetime.now(UTC)
    writer = how.writer()
    outcome = await writer.submit(
        user_id,
        user_text,
        reply,
        conversation_id=thread,
        created_at=now,
        provenance=provenance_of(user_text, reply, _retrieved(state)),
    )
    log.info("memory.write.done", outcome=outcome)
    if not how.settings.filter_system_messages:
        for text in system_texts_of_latest_turn(state):
            outcome = await writer.submit(
                user_id,
                text,
                "",
                conversation_id=thread,
                created_at=now,
                metadata={"source": "system_message"},
                kind="note",
            )
            log.info("memory.write.done", outcome=outcome, source="system_message")
    if how.consolidation is not None:
        how.consolidation.notify(user_id, thread)


def _retrieved(state: Any) -> list[Mapping[str, Any]]:
    """The memories the retrieval node put into state for this turn (none when absent or not
    a list)."""
    found = state.get("retrieved_memories") if isinstance(state, Mapping) else None
    return [m for m in found if isinstance(m, Mapping)] if isinstance(found, list) else []


_default_store: MemoryNode | None = None


async def _store_with_defaults(state: Any, config: RunnableConfig) -> dict[str, Any]:
    global _default_store
    if _default_store is None:
        try:
            _default_store = create_store_memories_node()
        except Exception as exc:
            log.error("memory.write.error", kind="config", error=str(exc))
            return {}
    return await _default_store(state, config)


store_memories = MemoryNode(
    _store_with_defaults, name="store_memories", fallback={}, event="memory.write.error"
)
"""The writer node with its defaults on the process-wide store, in sync and async graphs."""
