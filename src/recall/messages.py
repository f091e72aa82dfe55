"""Reading LangGraph state and config: the authenticated user, the latest turn, message text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

__all__ = [
    "is_error_response",
    "latest_human_text",
    "latest_turn",
    "message_text",
    "system_texts_of_latest_turn",
    "thread_id",
    "user_id_from_config",
    "user_id_from_context",
    "user_id_of",
]

_ERROR_PREFIXES = ("error:", "error -", "traceback (most recent call last)", "exception:")


def _configurable(config: object) -> Mapping[str, Any]:
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    return configurable if isinstance(configurable, Mapping) else {}


def user_id_from_config(config: Mapping[str, Any] | None) -> str | None:
    """The user id from `config["configurable"]["langgraph_auth_user"]`, or None.

    Accepts the LangGraph server's `ProxyUser` (`.identity`), a plain dict (`["identity"]`),
    any object with an `identity` attribute, and a bare string. Blank ids count as none.
    """
    user = _configurable(config).get("langgraph_auth_user")
    return _id(user) if isinstance(user, str) else _id_in(user, "identity")


def user_id_from_context(context: object) -> str | None:
    """The `user_id` of a LangGraph runtime context (`graph.invoke(..., context=...)`): a
    mapping's `"user_id"` or an object's `user_id` attribute (a dataclass, a pydantic model), or
    None. Blank ids count as none."""
    return _id_in(context, "user_id")


def _id_in(holder: object, name: str) -> str | None:
    """`holder[name]` of a mapping, else `holder.name` (None for a proxy or property that
    misbehaves), as an id."""
    if holder is None:
        return None
    if isinstance(holder, Mapping):
        return _id(holder.get(name))
    try:
        return _id(getattr(holder, name, None))
    except Exception:  # a proxy whose wrapped object misbehaves
        return None


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def user_id_of(config: Mapping[str, Any] | None, context: object = None) -> str | None:
    """Whose memory a run uses: the authenticated user (`user_id_from_config`), else the
    runtime context's `user_id` (`user_id_from_context`), else None."""
    return user_id_from_config(config) or user_id_from_context(context)


def thread_id(config: Mapping[str, Any] | None) -> str | None:
    """The LangGraph thread id (our conversation id), or None."""
    value = _configurable(config).get("thread_id")
    return str(value) if value is not None and str(value).strip() else None


def message_text(content: object) -> str:
    """The text of a message's content: a string, or the text parts of a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(p for p in parts if p)
    return ""


def _messages(state: object) -> list[BaseMessage]:
    if not isinstance(state, Mapping):
        return []
    messages = state.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        return []
    return [m for m in messages if isinstance(m, BaseMessage)]


def latest_human_text(state: object) -> str | None:
    """The text of the latest HumanMessage in `state["messages"]`, or None."""
    for message in reversed(_messages(state)):
        if isinstance(message, HumanMessage):
            text = message_text(message.content)
            return text if text.strip() else None
    return None


def is_error_response(message: AIMessage) -> bool:
    """Whether an AI message reports a failure rather than answering.

    An error response is an AIMessage whose `response_metadata` or `additional_kwargs` carries
    an `error`, whose `finish_reason` is `error`, or whose text starts with `Error:`,
    `Error -`, `Exception:` or a Python traceback (case-insensitive). docs/nodes.md documents it.
    """
    meta = message.response_metadata or {}
    if meta.get("error") or meta.get("finish_reason") == "error":
        return True
    if (message.additional_kwargs or {}).get("error"):
        return True
    text = message_text(message.content).lstrip().lower()
    return text.startswith(_ERROR_PREFIXES)


def latest_turn(state: object) -> tuple[HumanMessage, AIMessage] | None:
    """The latest HumanMessage and the last AI reply after it (tool calls skipped), or None."""
    messages = _messages(state)
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            human = messages[i]
            replies = [
                m
                for m in messages[i + 1 :]
                if isinstance(m, AIMessage) and message_text(m.content).strip()
            ]
            if not replies:
                return None
            assert isinstance(human, HumanMessage)
            return human, replies[-1]
    return None


def system_texts_of_latest_turn(state: object) -> list[str]:
    """The texts of the SystemMessages after the latest HumanMessage (system-generated content
    of this turn; a system prompt placed before the conversation is not among them)."""
    messages = _messages(state)
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            texts = (
                message_text(m.content) for m in messages[i + 1 :] if isinstance(m, SystemMessage)
            )
            return [t for t in texts if t.strip()]
    return []
