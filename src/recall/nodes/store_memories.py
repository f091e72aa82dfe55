"""The writer node: `store_memories` stores each user/AI turn pair after the reply, through the
durable `TurnWriter`, and never fails the turn."""

from __future__ import annotations

from collections.abc import Mapping
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
from recall.store import MemoryStore
from recall.store.shared import StoreProvider, provider_for

__all__ = ["create_store_memories_node", "store_memories"]

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
    turn_writer = writer
    started_drain = False

    async def store_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Store the latest user/AI turn pair of this thread."""
        with structlog.contextvars.bound_contextvars(
            user_id=user_id_from_config(config), thread_id=thread_id(config), node="store_memories"
        ):
            await write(state, config)
        return {}

    async def write(state: Any, config: RunnableConfig) -> None:
        nonlocal started_drain
        try:
            if not started_drain:  # turns an earlier process could not write
                started_drain = True
                turn_writer.start()
            user_id = user_id_from_config(config)
            if user_id is None:
                log.warning("memory.write.skip", reason="no_user")
                return
            if isinstance(state, Mapping) and state.get("__error__"):
                log.info("memory.write.skip", reason="error_response")
                return
            pair = latest_turn(state)
            if pair is None:
                log.info("memory.write.skip", reason="no_pair")
                return
            human, ai = pair
            user_text = message_text(human.content)
            if len(user_text.strip()) < cfg.min_message_length:
                log.info("memory.write.skip", reason="too_short")
                return
            if cfg.filter_error_responses and is_error_response(ai):
                log.info("memory.write.skip", reason="error_response")
                return
            now = datetime.now(UTC)
            reply = message_text(ai.content)
            outcome = await turn_writer.submit(
                user_id,
                user_text,
                reply,
                conversation_id=thread_id(config),
                created_at=now,
                provenance=provenance_of(user_text, reply, _retrieved(state)),
            )
            log.info("memory.write.done", outcome=outcome)
            if not cfg.filter_system_messages:
                for text in system_texts_of_latest_turn(state):
                    outcome = await turn_writer.submit(
                        user_id,
                        text,
                        "",
                        conversation_id=thread_id(config),
                        created_at=now,
                        metadata={"source": "system_message"},
                        kind="note",
                    )
                    log.info("memory.write.done", outcome=outcome, source="system_message")
            if consolidation is not None:
                consolidation.notify(user_id, thread_id(config))
        except InvalidInputError as exc:
            log.warning("memory.write.skip", reason="invalid", error=str(exc))
        except Exception as exc:  # the reply is already made; never fail the turn here
            log.error("memory.write.error", kind=outcome_of(exc), error=str(exc))

    return store_memories


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
