"""The example memory-enabled graph: START fans out to three nodes that join into `respond`.

START -> inject_user_context -+
START -> detect_activity -----+-> respond -> store_memories -> END
START -> retrieve_memories ---+
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from recall.example.responder import create_respond_node
from recall.messages import latest_human_text, user_id_from_config
from recall.nodes import create_retrieve_memories_node, create_store_memories_node

__all__ = ["CompanionState", "build_graph", "detect_activity", "inject_user_context"]


class CompanionState(TypedDict, total=False):
    """State of the example graph. Each START node writes its own key, so none needs a reducer."""

    messages: Annotated[list[AnyMessage], add_messages]
    retrieved_memories: list[dict[str, Any]]
    user_context: dict[str, Any]
    activity: str


async def inject_user_context(state: CompanionState, config: RunnableConfig) -> dict[str, Any]:
    """Put who the user is into state (the auth user; None when unauthenticated)."""
    user_id = user_id_from_config(config)
    return {"user_context": {"user_id": user_id, "authenticated": user_id is not None}}


async def detect_activity(state: CompanionState, config: RunnableConfig) -> dict[str, Any]:
    """A cheap label of what the user is doing: question, greeting or chat."""
    text = (latest_human_text(state) or "").strip().lower()
    if text.endswith("?"):
        activity = "question"
    elif text.split(" ", 1)[0].strip("!,.") in {"hi", "hello", "hey", "bonjour"}:
        activity = "greeting"
    else:
        activity = "chat"
    return {"activity": activity}


def build_graph(
    *,
    retrieve: Any = None,
    respond: Any = None,
    store: Any = None,
    inject: Any = None,
    detect: Any = None,
    checkpointer: Any = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the companion graph; every node can be replaced (tests, your own model).

    Args:
        retrieve: the retrieval node; `create_retrieve_memories_node()` when None.
        respond: the reply node; `create_respond_node()` (RECALL_CHAT_MODEL or offline).
        store: the writer node; `create_store_memories_node()` when None.
        inject: replaces `inject_user_context`.
        detect: replaces `detect_activity`.
        checkpointer: for in-process use (`recall chat`); the LangGraph server brings its own.
    """
    builder = StateGraph(CompanionState)
    builder.add_node("inject_user_context", inject or inject_user_context)
    builder.add_node("detect_activity", detect or detect_activity)
    builder.add_node("retrieve_memories", retrieve or create_retrieve_memories_node())
    builder.add_node("respond", respond or create_respond_node())
    builder.add_node("store_memories", store or create_store_memories_node())
    starts = ["inject_user_context", "detect_activity", "retrieve_memories"]
    for name in starts:
        builder.add_edge(START, name)
    builder.add_edge(starts, "respond")
    builder.add_edge("respond", "store_memories")
    builder.add_edge("store_memories", END)
    return builder.compile(checkpointer=checkpointer, name="companion")
