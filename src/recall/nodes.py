"""LangGraph nodes: `retrieve_memories` (at START) and `store_memories` (after the reply).

Both work with no set-up (a process-wide store from the environment) and are also made by
factories that take a store, limits and timeouts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import structlog
from langchain_core.runnables import RunnableConfig

from recall.config import Settings
from recall.consolidate import ConsolidationScheduler
from recall.errors import EmbeddingError, InvalidInputError, StoreError
from recall.memory import Memory
from recall.messages import (
    is_error_response,
    latest_human_text,
    latest_turn,
    message_text,
    thread_id,
    user_id_from_config,
)
from recall.metrics import METRICS, Outcome, RetrievalMetrics
from recall.outbox import Outbox
from recall.rerank import Reranker, rerank_memories
from recall.retrieval import Mode
from recall.runtime import StoreProvider, provider_for
from recall.store import MemoryStore
from recall.writer import TurnWriter

__all__ = [
    "MAX_MEMORY_TEXT",
    "RetrievedMemory",
    "create_retrieve_memories_node",
    "create_store_memories_node",
    "retrieve_memories",
    "store_memories",
    "to_state_dict",
]

log = structlog.stdlib.get_logger(__name__)

MAX_MEMORY_TEXT = 500

Node = Callable[[Any, RunnableConfig], Awaitable[dict[str, Any]]]


class RetrievedMemory(TypedDict):
    """A memory as it goes into graph state: small, JSON-serializable."""

    id: str
    user_message: str
    ai_response: str
    similarity: float


def to_state_dict(memory: Memory) -> RetrievedMemory:
    """The seed's state-safe dict: texts cut to 500 characters, similarity to 3 decimals."""
    return {
        "id": memory.id,
        "user_message": memory.user_message[:MAX_MEMORY_TEXT],
        "ai_response": memory.ai_response[:MAX_MEMORY_TEXT],
        "similarity": round(memory.similarity or 0.0, 3),
    }


def _error_kind(exc: BaseException) -> Outcome:
    if isinstance(exc, EmbeddingError):
        return "embedding"
    if isinstance(exc, StoreError):
        return "database"
    if isinstance(exc, InvalidInputError):
        return "invalid_input"
    return "unexpected"


def create_retrieve_memories_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    limit: int = 3,
    similarity_threshold: float = 0.5,
    mode: Mode | None = None,
    search_timeout_ms: int | None = None,
    reranker: Reranker | None = None,
    enable_vector_search: bool = True,
    enable_rerank: bool | None = None,
    vector_search_top_k: int = 25,
    rerank_timeout_ms: int = 10000,
    settings: Settings | None = None,
    metrics: RetrievalMetrics | None = None,
) -> Node:
    """Make a `retrieve_memories` node.

    Args:
        store: a store, an async callable returning one, or None for the process-wide store.
        limit: memories returned at most (the seed's 3).
        similarity_threshold: the floor (the seed's 0.5): on the cosine in semantic mode, on
            the calibrated relevance in hybrid mode, unused in keyword mode.
        mode: "semantic" (the seed's), "keyword" or "hybrid"; `Settings.retrieval_mode`
            ("hybrid") when None. See docs/decisions/0005-hybrid-retrieval.md.
        search_timeout_ms: give up after this long; `Settings.search_timeout_ms` when None.
        reranker: a second stage (seed 001), e.g. `ChatModelReranker(model)`.
        enable_vector_search: stage 1 searches (True) or takes the user's most recent
            `vector_search_top_k` memories (False, the seed's pre-filter switch).
        enable_rerank: re-rank stage 1's top `vector_search_top_k`; default: on when a
            reranker is given. On a re-ranker error or timeout the stage-1 order is kept.
        vector_search_top_k: stage-1 candidates handed to the re-ranker (the seed's 25).
        rerank_timeout_ms: the re-ranker's own time limit.
        settings: where defaults come from; `Settings.from_env()` when None.
        metrics: where each retrieval is recorded; the process-wide `recall.metrics.METRICS`
            when None (docs/operations.md).

    Returns:
        `async def node(state, config) -> {"retrieved_memories": [...]}`. It never raises:
        no user, no HumanMessage, bad state, a database or model failure and a timeout all
        return an empty list (and are logged).
    """
    provider = provider_for(store)
    cfg = settings or Settings.from_env()
    recorder = metrics if metrics is not None else METRICS
    if not cfg.alert_on_failures:
        recorder.alerts_enabled = False  # the setting is process-wide, like the registry
    timeout_ms = search_timeout_ms if search_timeout_ms is not None else cfg.search_timeout_ms
    timeout_s = timeout_ms / 1000
    search_mode: Mode = mode or cfg.retrieval_mode  # type: ignore[assignment]
    rerank_on = (reranker is not None) if enable_rerank is None else enable_rerank
    if rerank_on and reranker is None:
        raise ValueError("enable_rerank=True needs a reranker")
    stage1 = max(limit, vector_search_top_k) if rerank_on else limit

    async def candidates(user_id: str, query: str) -> list[Memory]:
        memory_store = await provider()
        if not enable_vector_search:
            return await memory_store.recent(user_id, stage1)
        return await memory_store.search(
            user_id,
            query,
            limit=stage1,
            similarity_threshold=similarity_threshold,
            mode=search_mode,
        )

    async def retrieve_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Retrieve the user's memories most relevant to their latest message."""
        user_id = user_id_from_config(config)
        with structlog.contextvars.bound_contextvars(
            user_id=user_id, thread_id=thread_id(config), node="retrieve_memories"
        ):
            found, outcome, elapsed_ms = await retrieve(state, user_id)
        if cfg.track_retrieval_latency or outcome not in ("ok", "empty"):
            recorder.record(outcome, elapsed_ms, [m["similarity"] for m in found])
        return {"retrieved_memories": found}

    async def retrieve(
        state: Any, user_id: str | None
    ) -> tuple[list[RetrievedMemory], Outcome, float]:
        started = time.perf_counter()

        def elapsed() -> float:
            return round((time.perf_counter() - started) * 1000, 2)

        try:
            if user_id is None:
                log.warning("memory.retrieve.skip", reason="no_user")
                return [], "no_user", elapsed()
            query = latest_human_text(state)
            if query is None:
                log.info("memory.retrieve.skip", reason="no_message")
                return [], "no_message", elapsed()
            log.debug(
                "memory.retrieve.start",
                mode=search_mode,
                **({"query": query} if cfg.log_search_queries else {}),
            )
            async with asyncio.timeout(timeout_s):
                memories = await candidates(user_id, query)
            if rerank_on and reranker is not None:
                memories = await rerank_memories(
                    reranker, query, memories, timeout_s=rerank_timeout_ms / 1000
                )
            found = [to_state_dict(m) for m in memories[:limit]]
            extra: dict[str, Any] = {}
            if cfg.track_retrieval_latency:
                extra["latency_ms"] = elapsed()
            if cfg.log_similarity_scores:
                extra["similarities"] = [m["similarity"] for m in found]
            log.info("memory.retrieve.done", count=len(found), mode=search_mode, **extra)
            return found, ("ok" if found else "empty"), elapsed()
        except TimeoutError:
            log.error("memory.retrieve.timeout", timeout_ms=timeout_ms)
            return [], "timeout", elapsed()
        except Exception as exc:  # no failure of memory ever fails the turn
            kind = _error_kind(exc)
            log.error("memory.retrieve.error", kind=kind, error=str(exc))
            return [], kind, elapsed()

    return retrieve_memories


def create_store_memories_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    writer: TurnWriter | None = None,
    settings: Settings | None = None,
    queue_path: Path | None = None,
    wait_s: float = 2.0,
    consolidation: ConsolidationScheduler | None = None,
) -> Node:
    """Make a `store_memories` node: stores the latest user message with the AI reply to it.

    Content filtering (the seed's): a user message shorter than `min_message_length` is
    skipped; system messages are never stored (only HumanMessage/AIMessage pairs are);
    an error response (see `recall.messages.is_error_response`) is skipped when
    `filter_error_responses` is on; texts are cut to `max_message_length` by the store.
    The conversation id is the thread id; the user comes from the auth config.

    Args:
        store: a store, an async callable returning one, or None for the process-wide store.
        writer: a ready `TurnWriter` (then `store`, `queue_path` and `wait_s` are unused).
        settings: filtering settings; `Settings.from_env()` when None.
        queue_path: the durable queue file; `settings.queue_path` when None.
        wait_s: how long the node waits for the database before handing the turn off.
        consolidation: notified after each turn, to write memories in the background
            (docs/memory-creation.md); the node never waits for it.

    Returns:
        `async def node(state, config) -> {}`; it never raises and never waits past `wait_s`
        (plus the local queue write).
    """
    cfg = settings or Settings.from_env()
    if writer is None:
        path = queue_path or cfg.queue_path
        writer = TurnWriter(provider_for(store), Outbox(path), wait_s=wait_s)
    turn_writer = writer
    started_drain = False

    async def store_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Store the latest user/AI turn pair of this thread."""
        with structlog.contextvars.bound_contextvars(
            user_id=user_id_from_config(config), thread_id=thread_id(config), node="store_memories"
        ):
            await write(state, config)
        return {}

    async def write(state: Any, config: RunnableConfig) -> None:
        nonlocal started_drain
        try:
            if not started_drain:  # turns an earlier process could not write
                started_drain = True
                turn_writer.start()
            user_id = user_id_from_config(config)
            if user_id is None:
                log.warning("memory.write.skip", reason="no_user")
                return
            if isinstance(state, Mapping) and state.get("__error__"):
                log.info("memory.write.skip", reason="error_response")
                return
            pair = latest_turn(state)
            if pair is None:
                log.info("memory.write.skip", reason="no_pair")
                return
            human, ai = pair
            user_text = message_text(human.content)
            if len(user_text.strip()) < cfg.min_message_length:
                log.info("memory.write.skip", reason="too_short")
                return
            if cfg.filter_error_responses and is_error_response(ai):
                log.info("memory.write.skip", reason="error_response")
                return
            outcome = await turn_writer.submit(
                user_id,
                user_text,
                message_text(ai.content),
                conversation_id=thread_id(config),
                created_at=datetime.now(UTC),
            )
            log.info("memory.write.done", outcome=outcome)
            if consolidation is not None:
                consolidation.notify(user_id, thread_id(config))
        except InvalidInputError as exc:
            log.warning("memory.write.skip", reason="invalid", error=str(exc))
        except Exception as exc:  # the reply is already made; never fail the turn here
            log.error("memory.write.error", kind=_error_kind(exc), error=str(exc))

    return store_memories


_default_retrieve: Node | None = None
_default_store: Node | None = None


async def retrieve_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
    """The seed's node with its defaults (limit 3, threshold 0.5) on the process-wide store."""
    global _default_retrieve
    if _default_retrieve is None:
        try:
            _default_retrieve = create_retrieve_memories_node()
        except Exception as exc:  # e.g. an invalid RECALL_* variable: still never fail the turn
            log.error("memory.retrieve.error", kind="config", error=str(exc))
            return {"retrieved_memories": []}
    return await _default_retrieve(state, config)


async def store_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
    """The writer node with its defaults on the process-wide store."""
    global _default_store
    if _default_store is None:
        try:
            _default_store = create_store_memories_node()
        except Exception as exc:
            log.error("memory.write.error", kind="config", error=str(exc))
            return {}
    return await _default_store(state, config)
