"""The `respond` node of the example graph: a real chat model, or a labelled offline stand-in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from recall.config import Settings, process_settings
from recall.messages import latest_human_text

__all__ = [
    "OFFLINE_LABEL",
    "OFFLINE_NAME",
    "create_respond_node",
    "memory_prompt",
    "offline_reply",
]

OFFLINE_LABEL = "(offline responder)"
OFFLINE_NAME = "recall-offline-responder"


def memory_prompt(memories: Sequence[dict[str, Any]]) -> str:
    """The system prompt that hands retrieved memories to the chat model."""
    if not memories:
        return "You are a helpful companion. You have no memories of this user yet."
    lines = [
        f"- ({m.get('similarity', 0):.2f}) user said: {m.get('user_message', '')!r}; "
        f"you replied: {m.get('ai_response', '')!r}"
        for m in memories
    ]
    return (
        "You are a helpful companion with a long-term memory. Relevant past exchanges with "
        "this user, most relevant first:\n" + "\n".join(lines)
    )


def offline_reply(question: str | None, memories: Sequence[dict[str, Any]]) -> str:
    """Answer from the retrieved memories alone: "Noted." when there are none, else each
    memory's user text on a line of its own after "You told me:". The message carries
    `OFFLINE_NAME` as its name, which `recall chat` shows as `OFFLINE_LABEL`: the label is not
    in the text.

    Short on purpose: the reply is stored with the turn and embedded with it, so boilerplate
    would dilute every memory's embedding, and a label in it made every unanswered question a
    memory of its own ("Which city am I in?" / "(offline responder) Noted: Which city am I
    in?" came first for the next question on cities: issue 45). A line a memory lets the
    writer tell which lines quote it and index the turn by the rest (decision 0038). Set
    RECALL_CHAT_MODEL for real answers.
    """
    del question  # what it asked is stored with the turn already
    if not memories:
        return "Noted."
    recalled = "\n".join(f"- {m.get('user_message', '')}" for m in memories)
    return f"You told me:\n{recalled}"


def create_respond_node(
    model: BaseChatModel | str | None = None, *, settings: Settings | None = None
) -> Any:
    """Make the `respond` node.

    Args:
        model: a chat model, a `provider:model` string for `init_chat_model`, or None for
            `settings.chat_model` (`RECALL_CHAT_MODEL`; unset: the offline responder).
        settings: `process_settings()` when None.
    """
    spec = model if model is not None else (settings or process_settings()).chat_model
    chat: BaseChatModel | None = None
    if isinstance(spec, str):
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found,unused-ignore]

        chat = init_chat_model(spec)
    elif spec is not None:
        chat = spec

    async def respond(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Answer the latest message with the retrieved memories in the prompt."""
        memories = state.get("retrieved_memories") or []
        if chat is None:
            text = offline_reply(latest_human_text(state), memories)
            return {"messages": [AIMessage(text, name=OFFLINE_NAME)]}
        history: list[BaseMessage] = list(state.get("messages") or [])
        reply = await chat.ainvoke([SystemMessage(memory_prompt(memories)), *history], config)
        return {"messages": [reply]}

    return respond
