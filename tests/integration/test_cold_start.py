"""A retrieval that meets a model still loading waits for it, outside its search timeout, and
says so; it does not silently return nothing."""

from __future__ import annotations

import time

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from structlog.testing import capture_logs

from recall.config import Settings
from recall.nodes import create_retrieve_memories_node
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings


class SlowLoadingEmbeddings(FakeEmbeddings):
    """The fake model, with a first use that takes `load_s` (like a model being exported)."""

    def __init__(self, dimensions: int, load_s: float) -> None:
        super().__init__(dimensions)
        self.load_s = load_s
        self.loaded = False

    def _vector(self, text: str) -> list[float]:
        if not self.loaded:
            time.sleep(self.load_s)
            self.loaded = True
        return super()._vector(text)


async def test_a_cold_model_is_waited_for_and_logged(
    store: MemoryStore, settings: Settings, user: str
) -> None:
    await store.add_turn(user, "my sister Ana lives in Lisbon", "Lisbon is lovely.")
    slow = SlowLoadingEmbeddings(64, load_s=0.6)
    config: RunnableConfig = {"configurable": {"langgraph_auth_user": {"identity": user}}}
    question = {"messages": [HumanMessage("where does my sister Ana live")]}
    async with MemoryStore.connect(settings, embeddings=slow) as cold:
        assert not cold.embedder.ready
        node = create_retrieve_memories_node(
            cold, mode="semantic", similarity_threshold=0.1, search_timeout_ms=300
        )
        with capture_logs() as logs:
            first = await node(question, config)
            second = await node(question, config)
    # the load took twice the search timeout, and the memory still came back
    assert [m["user_message"] for m in first["retrieved_memories"]] == [
        "my sister Ana lives in Lisbon"
    ]
    assert second == first
    cold_events = [e for e in logs if e["event"] == "memory.retrieve.cold_start"]
    assert len(cold_events) == 1 and cold_events[0]["log_level"] == "warning"
    assert cold_events[0]["waited_ms"] >= 600
    assert not [e for e in logs if e["event"] == "memory.retrieve.timeout"]
