"""The `notes` example graph: LangMem's memory tools and `runtime.store` on `RecallStore`.

It needs no chat model, so it runs offline: "remember <text>" saves a note with LangMem's
`manage_memory` tool, "forget everything" deletes the user's notes through `runtime.store`,
and anything else is a search with LangMem's `search_memory` tool, answered with the notes it
found.

Every note lives under `(<user id>, "notes")`, and the user id is the one the LangGraph server
authenticated (`langgraph_auth_user_id`, a key the server sets on every run and a client cannot
set). That is what keeps users apart: a template on a key the client sends, such as LangMem's
usual `{langgraph_user_id}`, would let anyone read anyone's notes (docs/security.md).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, PutOp
from langmem import create_manage_memory_tool, create_search_memory_tool

from recall.messages import latest_human_text

__all__ = ["NAMESPACE", "build_notes_graph", "notes_namespace"]

NAMESPACE = ("{langgraph_auth_user_id}", "notes")
NO_USER = "I can keep notes only for a signed-in user."
NOTHING_FOUND = "I have no notes on that yet."


def notes_namespace(config: RunnableConfig) -> tuple[str, str] | None:
    """`(user id, "notes")` for the authenticated user of this run, or None."""
    user = (config.get("configurable") or {}).get("langgraph_auth_user_id")
    return (user, "notes") if isinstance(user, str) and user.strip() else None


def build_notes_graph(store: BaseStore | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the notes graph.

    Args:
        store: the store for in-process use; the LangGraph server passes its own (langgraph.json's
            `store`) and this stays None.
    """
    manage = create_manage_memory_tool(NAMESPACE, actions_permitted=("create",))
    search = create_search_memory_tool(NAMESPACE)

    async def answer(state: MessagesState, runtime: Runtime[None]) -> dict[str, Any]:
        config = get_config()
        text = (latest_human_text(state) or "").strip()
        namespace = notes_namespace(config)
        if namespace is None or runtime.store is None:
            return {"messages": [AIMessage(NO_USER)]}
        if text.lower().startswith("remember "):
            await manage.ainvoke({"action": "create", "content": text[9:].strip()}, config)
            return {"messages": [AIMessage("Noted.")]}
        if text.lower() == "forget everything":
            forgotten = 0
            while items := await runtime.store.asearch(namespace, limit=1000):
                await runtime.store.abatch([PutOp(namespace, item.key, None) for item in items])
                forgotten += len(items)
            return {"messages": [AIMessage(f"Forgotten: {forgotten} notes.")]}
        found = json.loads(await search.ainvoke({"query": text, "limit": 3}, config))
        # only what the manage tool wrote carries "content": other items in the namespace (put
        # through the /store API) are not notes, whatever their score. The 0.3 floor was set on
        # MiniLM's cosines; bge-small's run higher, so it keeps more (issue 29 gates this).
        notes = [
            str(hit["value"]["content"])
            for hit in found
            if (hit.get("score") or 0) > 0.3
            and isinstance(hit.get("value"), dict)
            and isinstance(hit["value"].get("content"), str)
        ]
        reply = "\n".join(f"- {note}" for note in notes) if notes else NOTHING_FOUND
        return {"messages": [AIMessage(reply)]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(name="notes", store=store)
