"""The functional API with memory: an `@entrypoint` whose `@task`s retrieve the user's memories
before the reply and store the turn after it, with the same nodes a graph adds
(`retrieve_memories`, `store_memories`), in an async entrypoint and a sync one.

Each task's result is checkpointed with the run, so a resumed run neither searches again nor
stores the turn twice. The user and thread come from the run's config, as in a graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.config import get_config
from langgraph.func import entrypoint, task
from langgraph.pregel import Pregel

from recall.example.responder import OFFLINE_NAME, offline_reply
from recall.messages import message_text
from recall.nodes import RetrievedMemory, retrieve_memories, store_memories

__all__ = ["Respond", "build_companion", "build_sync_companion", "offline_respond"]

Respond = Callable[[Sequence[BaseMessage], Sequence[RetrievedMemory]], AIMessage]
"""How the entrypoint answers: the conversation and this turn's memories in, the reply out."""


def offline_respond(
    messages: Sequence[BaseMessage], memories: Sequence[RetrievedMemory]
) -> AIMessage:
    """The offline stand-in: it quotes the memories it is handed (`offline_reply`)."""
    del messages
    return AIMessage(offline_reply(None, [dict(m) for m in memories]), name=OFFLINE_NAME)


def build_companion(
    respond: Respond = offline_respond, *, checkpointer: Any = None
) -> Pregel[Any, Any, Any, Any]:
    """An async entrypoint (`ainvoke`, `astream`): a message in, the reply's text out; the
    conversation is what the checkpointer saves for the thread."""

    @task
    async def recall_memories(messages: list[BaseMessage]) -> list[RetrievedMemory]:
        found = await retrieve_memories.ainvoke({"messages": messages}, get_config())
        memories: list[RetrievedMemory] = found["retrieved_memories"]
        return memories

    @task
    async def remember_turn(messages: list[BaseMessage], memories: list[RetrievedMemory]) -> None:
        await store_memories.ainvoke(
            {"messages": messages, "retrieved_memories": memories}, get_config()
        )

    @entrypoint(checkpointer=checkpointer)
    async def companion(message: str, *, previous: Any = None) -> Any:
        messages = [*(previous or []), HumanMessage(message)]
        memories = await recall_memories(messages)
        messages.append(respond(messages, memories))
        await remember_turn(messages, memories)
        return entrypoint.final(value=message_text(messages[-1].content), save=messages)

    return companion


def build_sync_companion(
    respond: Respond = offline_respond, *, checkpointer: Any = None
) -> Pregel[Any, Any, Any, Any]:
    """`build_companion` as a sync entrypoint (`invoke`, `stream`)."""

    @task
    def recall_memories(messages: list[BaseMessage]) -> list[RetrievedMemory]:
        found = retrieve_memories.invoke({"messages": messages}, get_config())
        memories: list[RetrievedMemory] = found["retrieved_memories"]
        return memories

    @task
    def remember_turn(messages: list[BaseMessage], memories: list[RetrievedMemory]) -> None:
        store_memories.invoke({"messages": messages, "retrieved_memories": memories}, get_config())

    @entrypoint(checkpointer=checkpointer)
    def companion(message: str, *, previous: Any = None) -> Any:
        messages = [*(previous or []), HumanMessage(message)]
        memories = recall_memories(messages).result()
        messages.append(respond(messages, memories))
        remember_turn(messages, memories).result()
        return entrypoint.final(value=message_text(messages[-1].content), save=messages)

    return companion
