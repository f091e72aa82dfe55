"""The example `create_agent` assistant (`agent` in langgraph.json): LangChain's agent loop with
`RecallMiddleware`, which hands the model the user's memories once a turn and stores each turn,
and the `memory_search` tool on the same user's memories."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from recall.agents import RecallMiddleware
from recall.config import Settings, process_settings
from recall.example.offline_model import OfflineChatModel

__all__ = ["SYSTEM_PROMPT", "build_agent"]

SYSTEM_PROMPT = "You are a helpful companion with a long-term memory of this user."


def build_agent(
    model: BaseChatModel | str | None = None,
    *,
    middleware: RecallMiddleware | None = None,
    settings: Settings | None = None,
    checkpointer: Any = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the example agent.

    Args:
        model: a chat model, a `provider:model` string, or None for `settings.chat_model`
            (`RECALL_CHAT_MODEL`; unset: `OfflineChatModel`).
        middleware: the memory middleware; `RecallMiddleware(search_tool=True)` when None.
        settings: `process_settings()` when None.
        checkpointer: for in-process use; the LangGraph server brings its own.
    """
    spec = model if model is not None else (settings or process_settings()).chat_model
    chat = init_chat_model(spec) if isinstance(spec, str) else spec or OfflineChatModel()
    memory = middleware or RecallMiddleware(search_tool=True)
    return create_agent(
        chat,
        system_prompt=SYSTEM_PROMPT,
        middleware=[memory],
        checkpointer=checkpointer,
        name="agent",
    )
