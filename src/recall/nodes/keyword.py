"""The keyword-search node: `;`-separated keywords searched by BM25 in this conversation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from langchain_core.runnables import RunnableConfig

from recall.messages import thread_id, user_id_from_config
from recall.nodes.memory_node import MemoryNode
from recall.nodes.text import memory_text
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, home_loop, provider_for

__all__ = [
    "NO_DISCUSSION_MESSAGE",
    "NO_RESULTS_MESSAGE",
    "RESULT_SEPARATOR",
    "create_keyword_search_node",
]

# what the node says to the model (the seed's exact strings)
NO_DISCUSSION_MESSAGE = "Cannot perform VectorMemorySearch without a discussionId."
NO_RESULTS_MESSAGE = "No relevant memories found in the vector database for the given keywords."
RESULT_SEPARATOR = "\n\n---\n\n"

log = structlog.stdlib.get_logger(__name__)


def create_keyword_search_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    input_key: str | None = "memory_keywords",
    template: str | None = None,
    output_key: str = "memory_search_output",
    limit: int | None = None,
) -> MemoryNode:
    """Make a keyword-search node (VectorMemorySearch, a `MemoryNode`: sync and async graphs
    alike): BM25 search in this conversation.

    The input is `state[input_key]`, or `template.format_map(state)` when a template is given
    (e.g. "{topics}; {user_name}"): keywords separated by `;`, at most 60 used. The search is
    limited to the current user's memories of this thread (the discussion id), ORs the
    keywords and ranks by BM25. The output string, written to `state[output_key]`, joins the
    memories' texts with "\\n\\n---\\n\\n"; without a thread id it is
    "Cannot perform VectorMemorySearch without a discussionId.", and with no match (or no user,
    or a failure, which is logged) "No relevant memories found in the vector database for the
    given keywords.". `limit`: the most memories; None: the store's default
    (`MemoryStore.keyword_search`, `recall.limits.KEYWORD_LIMIT`).
    """
    provider = provider_for(store)

    async def keyword_memory_search(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Search this conversation's memories for the given keywords."""
        conversation = thread_id(config)
        if conversation is None:
            return {output_key: NO_DISCUSSION_MESSAGE}
        user_id = user_id_from_config(config)
        if user_id is None:
            log.warning("memory.keyword.skip", reason="no_user")
            return {output_key: NO_RESULTS_MESSAGE}
        try:
            values = state if isinstance(state, Mapping) else {}
            raw = template.format_map(values) if template else values.get(input_key or "", "")
            keywords = raw if isinstance(raw, str) else ""
            found = await (await provider()).keyword_search(
                user_id, keywords, limit=limit, conversation_id=conversation
            )
        except Exception as exc:
            log.error("memory.keyword.error", kind=type(exc).__name__, error=str(exc))
            found = []
        log.info("memory.keyword.done", count=len(found))
        if not found:
            return {output_key: NO_RESULTS_MESSAGE}
        return {output_key: RESULT_SEPARATOR.join(memory_text(m) for m in found)}

    return MemoryNode(
        keyword_memory_search,
        name="keyword_memory_search",
        fallback={output_key: NO_RESULTS_MESSAGE},
        home=home_loop(provider),
        event="memory.keyword.error",
    )
