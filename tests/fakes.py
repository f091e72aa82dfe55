"""Stand-ins shared by the node tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from recall.config import Settings
from recall.memory import Memory
from recall.search.verdict import Verdict
from recall.store.results import SearchResult


class FailingStore:
    """A store whose search fails with `exc` (or succeeds with nothing) after `delay` s; its
    settings (what the node leaves to the store) are the defaults."""

    def __init__(self, exc: BaseException | None = None, delay: float = 0.0) -> None:
        self.exc = exc
        self.delay = delay
        self.settings = Settings()

    async def search(self, *args: Any, **kwargs: Any) -> list[Memory]:
        return (await self.find(*args, **kwargs)).memories

    async def find(self, *args: Any, **kwargs: Any) -> SearchResult:
        await asyncio.sleep(self.delay)
        if self.exc is not None:
            raise self.exc
        return SearchResult(self.settings.max_memories, Verdict(self.settings.mode, 0.5), ())


def provider(obj: Any) -> Any:
    """A store provider for any object (recall.store.shared.provider_for wraps only MemoryStore)."""

    async def get() -> Any:
        return obj

    return get


class RecordingChatModel(BaseChatModel):
    """A chat model that records every prompt it is given and answers from `script` in turn
    (then "Noted."): an agent's model whose prompts a test can read."""

    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    script: list[AIMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        reply = self.script.pop(0) if self.script else AIMessage("Noted.")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingChatModel:
        del tools, kwargs
        return self

    def system_texts(self) -> list[str]:
        """The system prompt of each call, in order ("" for a call without one)."""
        return [
            next((str(m.content) for m in prompt if isinstance(m, SystemMessage)), "")
            for prompt in self.prompts
        ]
