"""The retrieval node: `retrieve_memories` runs at START and puts the user's most relevant
memories into state.

It works with no set-up (a process-wide store from the environment) and is also made by a
factory that takes a store, limits and timeouts. Either way it is a `MemoryNode`: it runs in
sync graphs (`invoke`, `stream`) and async ones (`ainvoke`, `astream`) alike.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, TypedDict

import structlog
from langchain_core.runnables import RunnableConfig

from recall.config import RetrievalMode, Settings, process_settings
from recall.memory import Memory
from recall.messages import (
    latest_human_text,
    thread_id,
    user_id_from_config,
)
from recall.metrics import METRICS, Outcome, RetrievalMetrics, outcome_of
from recall.nodes.memory_node import MemoryNode
from recall.search.rerank import Reranker, rerank_memories
from recall.store.memory_store import MemoryStore
from recall.store.shared import StoreProvider, home_loop, provider_for

__all__ = [
    "MAX_MEMORY_TEXT",
    "Retrieval",
    "RetrievedMemory",
    "create_retrieve_memories_node",
    "first_stage",
    "ready_store",
    "retrieve",
    "retrieve_for",
    "retrieve_memories",
    "retrieve_node",
    "retrieve_recorded",
    "to_state_dict",
]

log = structlog.stdlib.get_logger(__name__)

MAX_MEMORY_TEXT = 500
# the first retrieval of a process may have to load the model (an ONNX export when the cache
# is empty): it waits this long at most for it
COLD_START_TIMEOUT_S = 120.0

EMPTY: dict[str, Any] = {"retrieved_memories": []}
"""What the node returns when it finds nothing, or fails."""


class RetrievedMemory(TypedDict):
    """A memory as it goes into graph state: small, JSON-serializable.

    `similarity` is the cosine between the query and the memory; `score` is what the list is
    ordered by: the cosine in semantic mode, BM25 in keyword mode, the calibrated relevance
    (0-1) in hybrid mode, the re-ranker's score when one re-ranked, None when nothing ranked
    (`enable_vector_search=False`).
    """

    id: str
    user_message: str
    ai_response: str
    similarity: float
    score: float | None


def to_state_dict(memory: Memory) -> RetrievedMemory:
    """A memory as a state-safe dict: texts cut to 500 characters, similarity and score to 3
    decimals."""
    return {
        "id": memory.id,
        "user_message": memory.user_message[:MAX_MEMORY_TEXT],
        "ai_response": memory.ai_response[:MAX_MEMORY_TEXT],
        "similarity": round(memory.similarity or 0.0, 3),
        "score": None if memory.score is None else round(memory.score, 3),
    }


# over 60 lines: its docstring (every argument) is most of it; the body is a few lines
def create_retrieve_memories_node(
    store: MemoryStore | StoreProvider | None = None,
    *,
    limit: int | None = None,
    similarity_threshold: float | None = None,
    mode: RetrievalMode | None = None,
    search_timeout_ms: int | None = None,
    reranker: Reranker | None = None,
    enable_vector_search: bool = True,
    enable_rerank: bool | None = None,
    vector_search_top_k: int = 25,
    rerank_timeout_ms: int = 10000,
    settings: Settings | None = None,
    metrics: RetrievalMetrics | None = None,
) -> MemoryNode:
    """Make a `retrieve_memories` node (a `MemoryNode`: sync and async graphs alike).

    Args:
        store: a store, an async callable returning one, or None for the process-wide store.
        limit: memories returned at most; None: the serving store's `Settings.max_memories` (3).
        similarity_threshold: the floor (None: the store's, 0.5): on the cosine in semantic
            mode, on the gated score in hybrid mode, not at all in keyword mode.
        mode: "semantic", "keyword" or "hybrid"; None: the serving store's `Settings.mode`
            ("hybrid"): what the caller left out, the store decides, not the environment.
        search_timeout_ms: give up after this long; `Settings.search_timeout_ms` when None.
        reranker: a second stage, e.g. `ChatModelReranker(model)`.
        enable_vector_search: stage 1 searches (True) or takes the user's most recent
            `vector_search_top_k` memories (False: no pre-filter).
        enable_rerank: re-rank stage 1's top `vector_search_top_k`; default: on when a
            reranker is given. On a re-ranker error or timeout the stage-1 order is kept.
        vector_search_top_k: stage-1 candidates handed to the re-ranker (25).
        rerank_timeout_ms: the re-ranker's own time limit.
        settings: the node's own (timeout, logging, metrics); `process_settings()` when None.
        metrics: where each retrieval is recorded; None: `recall.metrics.METRICS`.

    Returns:
        A node `(state, config) -> {"retrieved_memories": [...]}`, run by `invoke` or
        `ainvoke` (and awaitable as `await node(state, config)`). It never raises: no user,
        no HumanMessage, bad state, a database or model failure and a timeout all return an
        empty list (and are logged). A retrieval that finds the default model not yet loaded
        waits for it (up to `COLD_START_TIMEOUT_S`) before its search timeout starts, and logs
        `memory.retrieve.cold_start`: a cold start is slow, never silently empty.
    """
    rerank_on = (reranker is not None) if enable_rerank is None else enable_rerank
    if rerank_on and reranker is None:
        raise ValueError("enable_rerank=True needs a reranker")
    cfg = settings or process_settings()
    timeout_ms = search_timeout_ms if search_timeout_ms is not None else cfg.search_timeout_ms
    how = Retrieval(provider=provider_for(store), settings=cfg,
                    metrics=metrics if metrics is not None else METRICS, limit=limit,
                    similarity_threshold=similarity_threshold, mode=mode, timeout_ms=timeout_ms,
                    reranker=reranker if rerank_on else None, vector_search=enable_vector_search,
                    top_k=vector_search_top_k, rerank_timeout_ms=rerank_timeout_ms)  # fmt: skip

    async def retrieve_memories(state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Retrieve the user's memories most relevant to their latest message."""
        return await retrieve_node(how, state, config)

    return MemoryNode(retrieve_memories, name="retrieve_memories", fallback=EMPTY,
                      home=home_loop(how.provider), event="memory.retrieve.error")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What a retrieve node was made with (`create_retrieve_memories_node`'s arguments, its
    settings and timeout resolved; limit, threshold and mode left to the store when None).
    `reranker` is None when the node does not re-rank."""

    provider: StoreProvider
    settings: Settings
    metrics: RetrievalMetrics
    limit: int | None
    similarity_threshold: float | None
    mode: RetrievalMode | None
    timeout_ms: int
    reranker: Reranker | None
    vector_search: bool
    top_k: int
    rerank_timeout_ms: int


async def retrieve_node(how: Retrieval, state: Any, config: RunnableConfig) -> dict[str, Any]:
    """The retrieve node's body: the user's memories for their latest message into state."""
    user_id = user_id_from_config(config)
    with structlog.contextvars.bound_contextvars(
        user_id=user_id, thread_id=thread_id(config), node="retrieve_memories"
    ):
        return {"retrieved_memories": await retrieve_recorded(how, state, user_id)}


async def retrieve_recorded(
    how: Retrieval, state: Any, user_id: str | None
) -> list[RetrievedMemory]:
    """`retrieve`, the retrieval recorded in `how.metrics` (the node's and the middleware's)."""
    found, outcome, elapsed_ms = await retrieve(how, state, user_id)
    if how.settings.track_retrieval_latency or outcome not in ("ok", "empty"):
        how.metrics.record(
            outcome,
            elapsed_ms,
            [m["similarity"] for m in found],
            alerts=how.settings.alert_on_failures,
        )
    return found


async def retrieve(
    how: Retrieval, state: Any, user_id: str | None
) -> tuple[list[RetrievedMemory], Outcome, float]:
    """The memories for the latest human message of `state`, the outcome and the time taken
    (ms). Never raises: a failure or a timeout is an outcome with no memories."""
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
            mode=how.mode,
            **({"query": query} if how.settings.log_search_queries else {}),
        )
        memories, mode = await retrieve_for(how, user_id, query)
        found = [to_state_dict(m) for m in memories]
        extra: dict[str, Any] = {}
        if how.settings.track_retrieval_latency:
            extra["latency_ms"] = elapsed()
        if how.settings.log_similarity_scores:
            extra["similarities"] = [m["similarity"] for m in found]
        log.info("memory.retrieve.done", count=len(found), mode=mode, **extra)
        return found, ("ok" if found else "empty"), elapsed()
    except TimeoutError:
        log.error("memory.retrieve.timeout", timeout_ms=how.timeout_ms)
        return [], "timeout", elapsed()
    except Exception as exc:  # no failure of memory ever fails the turn
        kind = outcome_of(exc)
        log.error("memory.retrieve.error", kind=kind, error=str(exc))
        return [], kind, elapsed()


async def retrieve_for(
    how: Retrieval, user_id: str, query: str
) -> tuple[list[Memory], RetrievalMode | None]:
    """The memories for `query`, within the search timeout, re-ranked when the node re-ranks,
    and the mode the store searched in (None: the most recent memories, no search).

    Raises:
        TimeoutError, and whatever the store or the re-ranker raised.
    """
    loop = asyncio.get_running_loop()
    memory_store, deadline = await ready_store(how, loop.time() + how.timeout_ms / 1000)
    async with asyncio.timeout_at(deadline):
        memories, mode, most = await first_stage(how, memory_store, user_id, query)
    if how.reranker is not None:
        memories = await rerank_memories(
            how.reranker, query, memories, timeout_s=how.rerank_timeout_ms / 1000
        )
    return memories[:most], mode


async def first_stage(
    how: Retrieval, memory_store: MemoryStore, user_id: str, query: str
) -> tuple[list[Memory], RetrievalMode | None, int]:
    """The store's answer for `query` (`MemoryStore.find`: what passes, and the mode and limit
    it resolved), or the user's most recent memories without vector search; with a re-ranker,
    `top_k` candidates at least for it. Returns the memories, the mode and the most to keep."""
    most: int | None = None  # the most to keep: None, all the store returns
    if how.vector_search and how.reranker is None:
        limit = how.limit  # as the node was given it, or None: the store resolves its own
    else:
        # a count is needed before the store is asked (more candidates for the re-ranker, or
        # the most recent memories): the store resolves the limit the node was not given
        most = memory_store.search_limit(how.limit)
        limit = max(most, how.top_k) if how.reranker is not None else most
        if not how.vector_search:
            return await memory_store.recent(user_id, limit), None, most
    result = await memory_store.find(
        user_id,
        query,
        limit=limit,
        similarity_threshold=how.similarity_threshold,
        mode=how.mode,
    )
    return result.memories, result.mode, result.limit if most is None else most


async def ready_store(how: Retrieval, deadline: float) -> tuple[MemoryStore, float]:
    """The store, with its model loaded, and the search's deadline. Opening the store counts
    against the search timeout; a model still loading (the default model's first use in a
    process, with an ONNX export when the cache is empty) is waited for, up to
    `COLD_START_TIMEOUT_S`, outside it (the deadline moves by the wait), and logged as
    `memory.retrieve.cold_start`."""
    async with asyncio.timeout_at(deadline):
        memory_store = await how.provider()
    embedder = getattr(memory_store, "embedder", None)  # a stand-in store may have none
    if embedder is not None and not embedder.ready:
        started = time.perf_counter()
        async with asyncio.timeout(COLD_START_TIMEOUT_S):
            await embedder.load()
        deadline += time.perf_counter() - started
        log.warning(
            "memory.retrieve.cold_start",
            waited_ms=round((time.perf_counter() - started) * 1000, 2),
            hint="the model loaded on this request: `recall db start` or the server's "
            "start-up loads it ahead",
        )
    return memory_store, deadline


_default_retrieve: MemoryNode | None = None


async def _retrieve_with_defaults(state: Any, config: RunnableConfig) -> dict[str, Any]:
    global _default_retrieve
    if _default_retrieve is None:
        try:
            _default_retrieve = create_retrieve_memories_node()
        except Exception as exc:  # e.g. an invalid RECALL_* variable: still never fail the turn
            log.error("memory.retrieve.error", kind="config", error=str(exc))
            return {"retrieved_memories": []}
    return await _default_retrieve(state, config)


retrieve_memories = MemoryNode(
    _retrieve_with_defaults,
    name="retrieve_memories",
    fallback=EMPTY,
    event="memory.retrieve.error",
)
"""The retrieval node with the defaults of `Settings` (limit 3, threshold 0.5 unless the
environment says otherwise) on the process-wide store, in sync and async graphs."""
