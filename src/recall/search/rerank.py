"""Optional second stage: re-rank the first stage's candidates.

Any object with `async def rerank(query, memories) -> scores` works (`Reranker`);
`ChatModelReranker` asks a LangChain chat model for structured relevance scores. On an error or
a timeout the first-stage order is kept and the failure is logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

import structlog
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from recall.memory import Memory

__all__ = ["ChatModelReranker", "Reranker", "rerank_memories"]

log = structlog.stdlib.get_logger(__name__)


@runtime_checkable
class Reranker(Protocol):
    """Scores memories for a query: one float per memory, higher is more relevant."""

    async def rerank(self, query: str, memories: Sequence[Memory]) -> Sequence[float]:
        """Return one relevance score per memory, in the memories' order."""
        ...


class _Score(BaseModel):
    index: int = Field(description="the number of the memory in the list")
    relevance: float = Field(ge=0.0, le=1.0, description="0 = unrelated, 1 = answers it")


class _Scores(BaseModel):
    scores: list[_Score]


_PROMPT = (
    "Rate how relevant each numbered memory is to the user's message, from 0 (unrelated) to 1 "
    "(directly answers or informs it). Give every memory a score.\n\nUser's message: {query}\n\n"
    "Memories:\n{memories}"
)


class ChatModelReranker:
    """Re-ranks with a chat model's structured output (`with_structured_output`).

    Args:
        model: a LangChain chat model that supports structured output.
        max_chars: each memory is cut to this many characters in the prompt.
    """

    def __init__(self, model: BaseChatModel, *, max_chars: int = 500) -> None:
        self._model = model.with_structured_output(_Scores)
        self._max_chars = max_chars

    async def rerank(self, query: str, memories: Sequence[Memory]) -> Sequence[float]:
        """Ask the model for a score per memory; memories it skips score 0."""
        cut = self._max_chars
        listing = "\n".join(
            f"{i}. user: {m.user_message[:cut]} | ai: {m.ai_response[:cut]}"
            for i, m in enumerate(memories)
        )
        answer = await self._model.ainvoke(_PROMPT.format(query=query, memories=listing))
        if not isinstance(answer, _Scores):
            raise TypeError(f"the model returned {type(answer).__name__}, not scores")
        scores = [0.0] * len(memories)
        for s in answer.scores:
            if 0 <= s.index < len(memories):
                scores[s.index] = s.relevance
        return scores


async def rerank_memories(
    reranker: Reranker, query: str, memories: list[Memory], *, timeout_s: float
) -> list[Memory]:
    """Memories in the re-ranker's order (stable for ties), each with the re-ranker's score as
    its `score`; the input (order and scores) on any failure."""
    if len(memories) < 2:
        return memories
    try:
        async with asyncio.timeout(timeout_s):
            scores = list(await reranker.rerank(query, memories))
        if len(scores) != len(memories):
            raise ValueError(f"{len(scores)} scores for {len(memories)} memories")
    except TimeoutError:
        log.warning("memory.rerank.timeout", timeout_ms=round(timeout_s * 1000))
        return memories
    except Exception as exc:
        log.warning("memory.rerank.error", kind=type(exc).__name__, error=str(exc))
        return memories
    order = sorted(range(len(memories)), key=lambda i: (-float(scores[i]), i))
    return [replace(memories[i], score=float(scores[i])) for i in order]
