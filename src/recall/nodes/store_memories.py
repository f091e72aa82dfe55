"""The writer node: `store_memories` stores each user/AI turn pair after the reply, through the
durable `TurnWriter`, and never fails the turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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
from recall.nodes.retrieve import Node
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.search.provenance import provenance_of
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, provider_for

__all__ = [
    "Writing",
    "create_store_memories_node",
    "store_memories",
    "store_node",
    "turn_of",
    "write_turn",
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
) -> Node:
    """Make a `store_memories` node: stores the latest user message with the AI reply to it.

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
        writer: a ready `TurnWriter` (then `store`, `queue_path` and `wait_s` are unused).
        settings: filtering settings; `process_settings()` when None.
        queue_path: the durable queue file; `settings.queue_path` when None.
        wait_s: how long the node waits for the database before handing the turn off.
        consolidation: notified after each turn, to write memories in the background
            (docs/memory-creation.md); the node never waits for it.

    Returns:
        `async def node(state, config) -> {}`; it never raises and never waits past `wait_s`
        (plus the local queue write).
    """
    cfg = settings or process_settings()
    if writer is None:
        path = queue_path or cfg.queue_path
        writer = TurnWriter(provider_for(store), Outbox(path), wait_s=wait_s, settings=cfg)
    how = Writing(writer, cfg, consolidation)

    async def store_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Store the latest user/AI turn pair of this thread."""
        return await store_node(how, state, config)

    return store_memories


@dataclass(slots=True)
class Writing:
    """What a writer node was made with, and whether it has started draining the turns an
    earlier process could not write (`started`, set by its first turn)."""

    writer: TurnWriter
    settings: Settings
    consolidation: ConsolidationScheduler | None
    started: bool = False


async def store_node(how: Writing, state: Any, config: RunnableConfig) -> dict[str, Any]:
    """The writer node's body: the latest turn pair of `state` to `how.writer`; never raises."""
    with structlog.contextvars.bound_contextvars(
        user_id=user_id_from_config(config), thread_id=thread_id(config), node="store_memories"
    ):
        try:
            if not how.started:  # turns an earlier process could not write
                how.started = True
                how.writer.start()
            await write_turn(how, state, config)
        except InvalidInputError as exc:
            log.warning("memory.write.skip", reason="invalid", error=str(exc))
        except Exception as exc:  # the reply is already made; never fail the turn here
            log.error("memory.write.error", kind=outcome_of(exc), error=str(exc))
    return {}


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


async def write_turn(how: Writing, state: Any, config: RunnableConfig) -> None:
    """Submit the latest turn pair (with the provenance of the memories retrieved for it) and,
    with `filter_system_messages` off, this turn's system messages as notes.

    Raises:
        InvalidInputError: the turn can never be stored; anything the writer raised.
    """
    user_id = user_id_from_config(config)
    if user_id is None:
        log.warning("memory.write.skip", reason="no_user")
        return
    turn = turn_of(state, how.settings)
    if turn is None:
        return
    user_text, reply = turn
    now = datetime.now(UTC)
    outcome = await how.writer.submit(
        user_id,
        user_text,
        reply,
        conversation_id=thread_id(config),
        created_at=now,
        provenance=provenance_of(user_text, reply, _retrieved(state)),
    )
    log.info("memory.write.done", outcome=outcome)
    if not how.settings.filter_system_messages:
        for text in system_texts_of_latest_turn(state):
            outcome = await how.writer.submit(
                user_id,
                text,
                "",
                conversation_id=thread_id(config),
                created_at=now,
                metadata={"source": "system_message"},
                kind="note",
            )
            log.info("memory.write.done", outcome=outcome, source="system_message")
    if how.consolidation is not None:
        how.consolidation.notify(user_id, thread_id(config))


def _retrieved(state: Any) -> list[Mapping[str, Any]]:
    """The memories the retrieval node put into state for this turn (none when absent or not
    a list)."""
    found = state.get("retrieved_memories") if isinstance(state, Mapping) else None
    return [m for m in found if isinstance(m, Mapping)] if isinstance(found, list) else []


_default_store: Node | None = None


async def store_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
    """The writer node with its defaults on the process-wide store."""
    global _default_store
    if _default_store is None:
        try:
            _default_store = create_store_memories_node()
        except Exception as exc:
            log.error("memory.write.error", kind="config", error=str(exc))
            return {}
    return await _default_store(state, config)
