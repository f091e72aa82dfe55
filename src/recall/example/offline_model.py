"""The example agent's offline chat model: it answers from the memories in its system prompt,
as the companion graph's offline responder does, so `make run` needs no API key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from recall.example.responder import OFFLINE_NAME, offline_reply
from recall.messages import message_text

__all__ = ["MEMORY_LINE", "OfflineChatModel"]

MEMORY_LINE = "- The user said: "
"""How `recall.agents.render_memories` starts each memory's line (the default template)."""


class OfflineChatModel(BaseChatModel):
    """A stand-in chat model: "Noted." when its system prompt holds no memory, else each
    memory's user text on a line of its own after "You told me:" (`offline_reply`). It reads
    the lines `RecallMiddleware`'s default template writes, never calls a tool, and names its
    messages `OFFLINE_NAME`. Set RECALL_CHAT_MODEL for real answers."""

    @property
    def _llm_type(self) -> str:
        return "recall-offline"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        remembered = [
            {"user_message": line.removeprefix(MEMORY_LINE)}
            for m in messages
            if isinstance(m, SystemMessage)
            for line in message_text(m.content).splitlines()
            if line.startswith(MEMORY_LINE)
        ]
        reply = AIMessage(offline_reply(None, remembered), name=OFFLINE_NAME)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:
        """The model as it is: it calls no tool."""
        del tools, kwargs
        return self
