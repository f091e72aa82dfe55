"""LLM-written memories: the memory objects a model returns, how
its answer is parsed, and the two model roles (memory writer, rolling summarizer)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field, ValidationError, field_validator

from recall.errors import RecallError
from recall.messages import message_text

__all__ = [
    "DEFAULT_MEMORY_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "ExtractionError",
    "MemoryExtractor",
    "MemoryObject",
    "RunnableExtractor",
    "RunnableSummarizer",
    "Summarizer",
    "parse_memory_objects",
]

DEFAULT_MEMORY_PROMPT = (
    "You write long-term memories of a conversation between a user and an AI assistant. Read "
    "the conversation chunk below and return JSON only: an array of memory objects, one per "
    'distinct topic, each with "title" (a few words), "summary" (the facts worth '
    'remembering about the user, self-contained, with names and dates), "entities" (people, '
    'places, things named) and "key_phrases" (short search phrases).\n\nChunk:\n{chunk}'
)

DEFAULT_SUMMARY_PROMPT = (
    "Update the running summary of a conversation with its newest memories. Keep every durable "
    "fact about the user, drop small talk, stay under 200 words, and answer with the summary "
    "text only.\n\nCurrent summary:\n{summary}\n\nNew memories:\n{memories}"
)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


class ExtractionError(RecallError):
    """The model's answer could not be turned into memory objects."""


class MemoryObject(BaseModel):
    """One memory written by a model: a title, summary, entities and key phrases."""

    title: str = Field(min_length=1, max_length=300)
    summary: str = Field(min_length=1, max_length=4000)
    entities: list[str] = Field(default_factory=list, max_length=50)
    key_phrases: list[str] = Field(default_factory=list, max_length=50)

    @field_validator("title", "summary")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.replace("\x00", "").strip()
        if not value:
            raise ValueError("must not be blank")
        return value

    @field_validator("entities", "key_phrases", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("must be a list of strings")
        return [str(v).replace("\x00", "").strip() for v in value if str(v).strip()]

    @property
    def text(self) -> str:
        """The memory's stored text."""
        return f"{self.title}: {self.summary}"

    @property
    def embedding_text(self) -> str:
        """What is embedded: title, summary, entities and key phrases together."""
        parts = [self.text]
        if self.entities:
            parts.append("Entities: " + ", ".join(self.entities))
        if self.key_phrases:
            parts.append("Key phrases: " + ", ".join(self.key_phrases))
        return "\n".join(parts)

    def metadata(self) -> dict[str, Any]:
        """Metadata stored with the memory; the *_text keys feed the weighted full-text index."""
        return {
            "title": self.title,
            "entities": self.entities,
            "key_phrases": self.key_phrases,
            "entities_text": " ".join(self.entities),
            "key_phrases_text": " ".join(self.key_phrases),
        }


def parse_memory_objects(answer: Any) -> list[MemoryObject]:
    """Memory objects from a model's answer: a message, a JSON string (code fences allowed),
    a dict, or a list of them. One object or an array.

    Raises:
        ExtractionError: not JSON, not objects, or an object misses a field.
    """
    if isinstance(answer, BaseMessage):
        answer = message_text(answer.content)
    if isinstance(answer, str):
        try:
            answer = json.loads(_FENCE.sub("", answer.strip()))
        except json.JSONDecodeError as exc:
            raise ExtractionError(f"the model's answer is not JSON: {exc.msg}") from exc
    if isinstance(answer, BaseModel):
        answer = answer.model_dump()
    items = answer if isinstance(answer, list) else [answer]
    if not items:
        return []
    try:
        return [MemoryObject.model_validate(item) for item in items]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ExtractionError(f"a memory object is malformed ({where}: {first['msg']})") from exc


@runtime_checkable
class MemoryExtractor(Protocol):
    """Turns a chunk of conversation text into memory objects."""

    async def extract(self, chunk: str) -> list[MemoryObject]:
        """Return the memories worth keeping from `chunk` (may be empty)."""
        ...


@runtime_checkable
class Summarizer(Protocol):
    """Folds new memories into a conversation's rolling summary."""

    async def summarize(self, summary: str, memories: Sequence[MemoryObject]) -> str:
        """Return the updated summary."""
        ...


class RunnableExtractor:
    """A memory writer from any LangChain runnable: a chat model, a prompt | model chain, or a
    compiled LangGraph sub-graph (workflow-based generation).

    Args:
        runnable: called with the prompt text (chat models) or, with `input_key`, with
            `{input_key: chunk}` (chains and graphs); its output (message, JSON text, dict or
            list, or a mapping holding one under `output_key`) is parsed by
            `parse_memory_objects`.
        prompt: the prompt template with `{chunk}`, when the runnable takes text.
        input_key: pass `{input_key: chunk}` instead of a prompt.
        output_key: read the answer from this key of a mapping output.
    """

    def __init__(
        self,
        runnable: Runnable[Any, Any],
        *,
        prompt: str = DEFAULT_MEMORY_PROMPT,
        input_key: str | None = None,
        output_key: str | None = None,
    ) -> None:
        self._runnable = runnable
        self._prompt = prompt
        self._input_key = input_key
        self._output_key = output_key

    async def extract(self, chunk: str) -> list[MemoryObject]:
        """Ask the runnable and parse its answer."""
        request: Any = (
            {self._input_key: chunk} if self._input_key else self._prompt.format(chunk=chunk)
        )
        answer = await self._runnable.ainvoke(request)
        if self._output_key is not None and isinstance(answer, dict):
            answer = answer.get(self._output_key)
        return parse_memory_objects(answer)


class RunnableSummarizer:
    """A rolling summarizer from a chat model (or any runnable that answers text)."""

    def __init__(self, runnable: Runnable[Any, Any], *, prompt: str = DEFAULT_SUMMARY_PROMPT):
        self._runnable = runnable
        self._prompt = prompt

    async def summarize(self, summary: str, memories: Sequence[MemoryObject]) -> str:
        """Ask for the updated summary; an empty answer is an error."""
        listing = "\n".join(f"- {m.text}" for m in memories)
        answer = await self._runnable.ainvoke(
            self._prompt.format(summary=summary or "(none yet)", memories=listing)
        )
        text = message_text(answer.content) if isinstance(answer, BaseMessage) else str(answer)
        text = text.replace("\x00", "").strip()
        if not text:
            raise ExtractionError("the summarizer returned an empty summary")
        return text
