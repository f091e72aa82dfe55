"""Events and metrics of each retrieval path; no query or memory text in logs by default."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
import structlog
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from structlog.testing import capture_logs

from recall.config import Settings
from recall.errors import EmbeddingError, StoreError
from recall.metrics import RetrievalMetrics
from recall.nodes import create_retrieve_memories_node
from recall.store import MemoryStore
from tests.fakes import FailingStore as Failing
from tests.fakes import provider

SECRET = "my secret diagnosis is xyzzy"


def cfg(user: str | None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": "t-obs"}
    if user:
        configurable["langgraph_auth_user"] = {"identity": user}
    return {"configurable": configurable}


async def run(node: Any, user: str | None, text: str = SECRET) -> list[MutableMapping[str, Any]]:
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        await node({"messages": [HumanMessage(text)]}, cfg(user))
    return logs


@pytest.mark.parametrize(
    ("make_store", "user", "event", "outcome"),
    [
        (None, "obs-user", "memory.retrieve.done", "ok"),
        (None, "obs-nobody", "memory.retrieve.done", "empty"),
        (None, None, "memory.retrieve.skip", "no_user"),
        (
            lambda: Failing(StoreError("database down")),
            "u",
            "memory.retrieve.error",
            "database",
        ),
        (
            lambda: Failing(EmbeddingError("model broke")),
            "u",
            "memory.retrieve.error",
            "embedding",
        ),
        (lambda: Failing(delay=5), "u", "memory.retrieve.timeout", "timeout"),
    ],
)
async def test_each_path_logs_its_event_and_records_its_outcome(
    store: MemoryStore, make_store: Any, user: str | None, event: str, outcome: str
) -> None:
    await store.add_turn("obs-user", SECRET, "I will keep that private")
    metrics = RetrievalMetrics()
    source = store if make_store is None else provider(make_store())
    node = create_retrieve_memories_node(
        source, mode="semantic", similarity_threshold=0.0, search_timeout_ms=100, metrics=metrics
    )
    logs = await run(node, user)
    mine = [e for e in logs if e["event"] == event]
    assert mine, logs
    assert mine[0]["node"] == "retrieve_memories" and mine[0]["thread_id"] == "t-obs"
    assert mine[0]["user_id"] == user
    assert metrics.totals() == {outcome: 1}
    for entry in logs:  # private by default: neither the query nor a memory's text
        assert "xyzzy" not in repr(entry)
    if outcome == "ok":
        assert mine[0]["count"] == 1 and mine[0]["similarities"] and "latency_ms" in mine[0]


async def test_query_text_is_logged_only_when_asked(store: MemoryStore) -> None:
    settings = Settings(log_search_queries=True, log_similarity_scores=False)
    node = create_retrieve_memories_node(store, settings=settings, metrics=RetrievalMetrics())
    with capture_logs(processors=[]) as logs:
        await node({"messages": [HumanMessage(SECRET)]}, cfg("obs-user"))
    start = [e for e in logs if e["event"] == "memory.retrieve.start"]
    assert start and start[0]["query"] == SECRET
    done = [e for e in logs if e["event"] == "memory.retrieve.done"]
    assert "similarities" not in done[0]


async def test_writer_events_carry_context(store: MemoryStore, tmp_path: Any) -> None:
    from langchain_core.messages import AIMessage

    from recall.nodes import create_store_memories_node

    node = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3")
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        await node({"messages": [HumanMessage(SECRET), AIMessage("ok")]}, cfg("obs-writer"))
    done = [e for e in logs if e["event"] == "memory.write.done"]
    assert done and done[0]["node"] == "store_memories" and done[0]["user_id"] == "obs-writer"
    assert all("xyzzy" not in repr(e) for e in logs)
