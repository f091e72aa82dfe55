"""The `memory_search` tool: an agent searches the authenticated user's memories, from a sync
agent or an async one."""

from __future__ import annotations

import time

import structlog
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import get_runtime

from recall.config import RetrievalMode
from recall.messages import user_id_of
from recall.nodes.blocking import run_or
from recall.nodes.text import format_memory
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, home_loop, provider_for

__all__ = ["create_memory_search_tool"]

log = structlog.stdlib.get_logger(__name__)

FAILED = "Memory search failed; try again later."
"""What the tool answers when the search failed (logged)."""

DESCRIPTION = (
    "Search your long-term memory of this user: past conversations and notes. Use it "
    "when the user refers to something from before, or when facts about them would "
    "help. Returns the best matches with their date."
)
"""What the model reads of the tool."""


def create_memory_search_tool(
    store: MemoryStore | StoreProvider | None = None,
    *,
    mode: RetrievalMode | None = None,
    max_results_cap: int = 50,
) -> BaseTool:
    """Make the `memory_search(query, max_results=10)` tool for an agent.

    The tool searches the memories of the user in `config["configurable"]
    ["langgraph_auth_user"]`, else of the run's context `user_id` (`create_agent`'s
    `context=`); the model's arguments hold only the query and a count, so the model can never
    choose whose memories it reads. It runs in sync agents and async ones. Results show date,
    conversation (or note file) and score. No threshold: the agent asked, it gets the best matches.

    Args:
        store: a store, an async callable returning one, or None for the process-wide store.
        mode: "semantic", "keyword" or "hybrid"; the store's `Settings.mode` when None.
        max_results_cap: the most results the model may ask for.
    """
    provider = provider_for(store)
    home = home_loop(provider)

    async def search(query: str, max_results: int, user_id: str | None) -> str:
        count = max(1, min(int(max_results), max_results_cap))
        return await _search(provider, mode, query, count, user_id)

    async def memory_search(query: str, max_results: int = 10, *, config: RunnableConfig) -> str:
        return await search(query, max_results, user_id_of(config, _run_context()))

    def memory_search_sync(query: str, max_results: int = 10, *, config: RunnableConfig) -> str:
        user_id = user_id_of(config, _run_context())  # read here: the run's context is here
        return run_or(
            lambda: search(query, max_results, user_id),
            lambda: FAILED,
            event="memory.tool.error",
            loop=home,
        )

    return StructuredTool.from_function(
        func=memory_search_sync, coroutine=memory_search, name="memory_search",
        description=DESCRIPTION,
    )  # fmt: skip


async def _search(
    provider: StoreProvider, mode: RetrievalMode | None, query: str, count: int, user_id: str | None
) -> str:
    """The tool's answer: the user's best `count` memories for `query`, formatted."""
    started = time.perf_counter()
    if user_id is None:
        return "Memory search is unavailable: no authenticated user."
    try:
        # a search the agent asked for: asking is given, the gate reads no intent
        result = await (await provider()).find(
            user_id, query, limit=count, similarity_threshold=0.0, mode=mode, intent=False
        )
        found = result.memories
    except Exception as exc:
        log.error("memory.tool.error", kind=type(exc).__name__, error=str(exc))
        return FAILED
    log.info(
        "memory.tool.done",
        count=len(found),
        mode=result.mode,
        latency_ms=round((time.perf_counter() - started) * 1000, 2),
    )
    if not found:
        return f"No memories found for {query!r}."
    return "\n\n".join(format_memory(i, m) for i, m in enumerate(found, start=1))


def _run_context() -> object:
    """The context of the LangGraph run this tool call is part of, or None outside one."""
    try:
        return get_runtime().context
    except Exception:  # not inside a run, or a run without a runtime
        return None
