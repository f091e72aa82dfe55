"""Agent-facing search: the seed's VectorMemorySearch node and the `memory_search` tool."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import structlog
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from recall.keywords import NO_DISCUSSION_MESSAGE, NO_RESULTS_MESSAGE, RESULT_SEPARATOR
from recall.memory import Memory
from recall.messages import thread_id, user_id_from_config
from recall.retrieval import Mode
from recall.runtime import StoreProvider, provider_for
from recall.store import MemoryStore

__all__ = [
    "create_keyword_search_node",
    "create_memory_search_tool",
    "format_memory",
    "memory_text",
]

log = structlog.stdlib.get_logger(__name__)


def memory_text(memory: Memory) -> str:
    """A memory as one text: the turn's two sides, or a note's or summary's text."""
    if memory.ai_response:
        return f"{memory.user_message}\n{memory.ai_response}"
    return memory.user_message


def create_keyword_search_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    input_key: str | None = "memory_keywords",
    template: str | None = None,
    output_key: str = "memory_search_output",
    limit: int = 5,
) -> Any:
    """Make a VectorMemorySearch node (seed 000): keyword search in this conversation.

    The input is `state[input_key]`, or `template.format_map(state)` when a template is given
    (e.g. "{topics}; {user_name}"): keywords separated by `;`, at most 60 used. The search is
    limited to the current user's memories of this thread (the seed's discussion id), ORs the
    keywords and ranks by BM25. The output string, written to `state[output_key]`, joins the
    memories' texts with "\\n\\n---\\n\\n"; without a thread id it is the seed's
    "Cannot perform VectorMemorySearch without a discussionId.", and with no match (or no user,
    or a failure, which is logged) "No relevant memories found in the vector database for the
    given keywords.".
    """
    provider = provider_for(store)

    async def vector_memory_search(state: Any, config: RunnableConfig) -> dict[str, Any]:
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

    return vector_memory_search


def format_memory(index: int, memory: Memory) -> str:
    """One search result as the agent reads it: rank, date, conversation, score, text."""
    where = memory.metadata.get("source") or memory.conversation_id or "no conversation"
    score = "" if memory.score is None else f" · score {memory.score:.2f}"
    header = f"[{index}] {memory.created_at:%Y-%m-%d} · {where}{score}"
    if memory.kind == "turn":
        return f"{header}\nUser: {memory.user_message}\nAssistant: {memory.ai_response}"
    return f"{header}\n{memory.user_message}"


def create_memory_search_tool(
    store: MemoryStore | StoreProvider | None = None,
    *,
    mode: Mode = "hybrid",
    max_results_cap: int = 50,
) -> BaseTool:
    """Make the `memory_search(query, max_results=10)` tool (seed 002) for an agent.

    The tool searches the memories of the user in `config["configurable"]
    ["langgraph_auth_user"]`; the model's arguments hold only the query and a count, so the
    model can never choose whose memories it reads. Results show date, conversation (or note
    file) and score. No threshold: the agent asked, it gets the best matches.
    """
    provider = provider_for(store)

    async def memory_search(query: str, max_results: int = 10, *, config: RunnableConfig) -> str:
        started = time.perf_counter()
        user_id = user_id_from_config(config)
        if user_id is None:
            return "Memory search is unavailable: no authenticated user."
        count = max(1, min(int(max_results), max_results_cap))
        try:
            found = await (await provider()).search(
                user_id, query, limit=count, similarity_threshold=0.0, mode=mode
            )
        except Exception as exc:
            log.error("memory.tool.error", kind=type(exc).__name__, error=str(exc))
            return "Memory search failed; try again later."
        log.info(
            "memory.tool.done",
            count=len(found),
            latency_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        if not found:
            return f"No memories found for {query!r}."
        return "\n\n".join(format_memory(i, m) for i, m in enumerate(found, start=1))

    return StructuredTool.from_function(
        coroutine=memory_search,
        name="memory_search",
        description=(
            "Search your long-term memory of this user: past conversations and notes. Use it "
            "when the user refers to something from before, or when facts about them would "
            "help. Returns the best matches with their date."
        ),
    )
