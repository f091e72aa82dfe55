"""Conversation context nodes: RecentMemory (the conversation's latest memories) and
FullChatSummary (its rolling summary)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from recall.limits import RECENT_LIMIT
from recall.messages import message_text, thread_id, user_id_from_config
from recall.nodes.memory_node import MemoryNode
from recall.nodes.text import memory_text
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, home_loop, provider_for

__all__ = ["create_chat_summary_node", "create_recent_memories_node"]

log = structlog.stdlib.get_logger(__name__)


def _stateless(state: Any, n: int) -> list[str]:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not isinstance(messages, list):
        return []
    lines = []
    for m in messages:
        if isinstance(m, HumanMessage | AIMessage):
            text = message_text(m.content).strip()
            if text:
                lines.append(f"{'User' if isinstance(m, HumanMessage) else 'Assistant'}: {text}")
    return lines[-n:]


def create_recent_memories_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    n: int = RECENT_LIMIT,
    output_key: str = "recent_memories",
) -> MemoryNode:
    """Make a RecentMemory node (a `MemoryNode`: sync and async graphs alike): the last `n`
    memories of this conversation, newest first.

    With a thread id (the discussion id) it returns the conversation's model-written
    memories, or its stored turns while none exist yet. Without one (stateless), or when the
    store fails (logged), it falls back to the last `n` turns of `state["messages"]`.
    Output: `{output_key: [text, ...]}`.
    """
    provider = provider_for(store)

    async def recent_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The conversation's most recent memories."""
        conversation, user_id = thread_id(config), user_id_from_config(config)
        if conversation is None or user_id is None:
            return {output_key: _stateless(state, n)}
        try:
            memory_store = await provider()
            memories = await memory_store.conversations.conversation_recent(
                user_id, conversation, n
            )
            if memories:
                return {output_key: [memory_text(m) for m in memories]}
        except Exception as exc:
            log.error("memory.recent.error", kind=type(exc).__name__, error=str(exc))
        return {output_key: _stateless(state, n)}

    return MemoryNode(
        recent_memories,
        name="recent_memories",
        fallback={output_key: []},
        home=home_loop(provider),
        event="memory.recent.error",
    )


def create_chat_summary_node(
    store: MemoryStore | StoreProvider | None = None, *, output_key: str = "chat_summary"
) -> MemoryNode:
    """Make a FullChatSummary node (a `MemoryNode`: sync and async graphs alike): the
    conversation's rolling summary ("" when there is none yet, no thread, no user, or the
    store fails)."""
    provider = provider_for(store)

    async def chat_summary(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The rolling summary of this conversation."""
        conversation, user_id = thread_id(config), user_id_from_config(config)
        if conversation is None or user_id is None:
            return {output_key: ""}
        try:
            memory_store = await provider()
            summary = await memory_store.conversations.chat_summary(user_id, conversation)
        except Exception as exc:
            log.error("memory.summary.error", kind=type(exc).__name__, error=str(exc))
            return {output_key: ""}
        return {output_key: summary or ""}

    return MemoryNode(
        chat_summary,
        name="chat_summary",
        fallback={output_key: ""},
        home=home_loop(provider),
        event="memory.summary.error",
    )
