"""retrieve_memories and store_memories on a real database, with the fake embedder."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from structlog.testing import capture_logs

from recall.config import Settings
from recall.errors import EmbeddingError, InvalidInputError, StoreError
from recall.example.graph import build_graph
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.nodes.turn_writer import TurnWriter
from recall.outbox import Outbox
from recall.store import MemoryStore
from recall.store.results import SearchResult
from recall.store.shared import provider_for
from recall.testing import FakeEmbeddings
from tests.conftest import Databases
from tests.fakes import FailingStore, provider


def cfg(user: object, thread: str = "thread-1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "langgraph_auth_user": user}}


def ask(text: Any) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


async def test_finds_memories_as_state_safe_dicts(store: MemoryStore, user: str) -> None:
    long_text = "dogs " * 300
    await store.add_turn(user, "my dog is called Max " + long_text, "good dog " + long_text)
    node = create_retrieve_memories_node(store, similarity_threshold=0.0)
    out = await node(ask("dog called Max"), cfg({"identity": user}))
    [memory] = out["retrieved_memories"]
    assert set(memory) == {"id", "user_message", "ai_response", "similarity", "score"}
    assert len(memory["user_message"]) == 500 and len(memory["ai_response"]) == 500
    assert memory["similarity"] == round(memory["similarity"], 3)
    json.dumps(out)  # JSON-serializable, so the server can checkpoint it


async def test_limit_threshold_and_order(store: MemoryStore, user: str) -> None:
    for i in range(5):
        await store.add_turn(user, f"pears and apples {i}", "ok")
    node = create_retrieve_memories_node(store, limit=2, similarity_threshold=0.0)
    out = (await node(ask("pears and apples"), cfg(user)))["retrieved_memories"]
    assert len(out) == 2
    assert out[0]["similarity"] >= out[1]["similarity"]
    # the hybrid default ranks by the score the dicts show
    ranked = await create_retrieve_memories_node(store, limit=5, similarity_threshold=0.0)(
        ask("pears and apples"), cfg(user)
    )
    scores = [m["score"] for m in ranked["retrieved_memories"]]
    assert len(scores) == 5 and all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)
    strict = create_retrieve_memories_node(store, similarity_threshold=1.0)
    assert (await strict(ask("nothing like it"), cfg(user)))["retrieved_memories"] == []


async def test_the_node_passes_its_limit_and_the_store_resolves_the_rest(
    store: MemoryStore, user: str
) -> None:
    """Issue 48: the node read the store's `settings.max_memories` itself; it passes the limit
    it was given, or None, and where it needs a count before asking (more candidates for a
    re-ranker, the most recent memories) the store resolves it (`search_limit`)."""
    for i in range(6):
        await store.add_turn(user, f"pears and apples {i}", "ok")
    asked: list[tuple[str, int | None]] = []

    class Recording:  # no `settings`: what the store decides, the node reads through it
        async def find(self, user_id: str, text: str, **kwargs: Any) -> SearchResult:
            asked.append(("find", kwargs["limit"]))
            return await store.find(user_id, text, **kwargs)

        async def recent(self, user_id: str, n: int) -> Any:
            asked.append(("recent", n))
            return await store.recent(user_id, n)

        def search_limit(self, limit: int | None = None) -> int:
            return store.search_limit(limit)

    class Same:
        async def rerank(self, query: str, memories: Any) -> list[float]:
            return [1.0] * len(memories)

    default = store.settings.max_memories
    made_with: list[tuple[dict[str, Any], tuple[str, int | None], int]] = [
        ({}, ("find", None), default),
        ({"limit": 2}, ("find", 2), 2),
        ({"reranker": Same(), "vector_search_top_k": 5}, ("find", max(default, 5)), default),
        ({"enable_vector_search": False}, ("recent", default), default),
    ]
    for made, expected, count in made_with:
        node = create_retrieve_memories_node(
            provider(Recording()), similarity_threshold=0.0, **made
        )
        out = await node(ask("pears and apples"), cfg(user))
        assert asked.pop() == expected, made
        assert len(out["retrieved_memories"]) == count, made


async def test_content_blocks_are_searched_by_their_text(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, "I play the cello on sundays", "lovely")
    node = create_retrieve_memories_node(store, similarity_threshold=0.3)
    blocks = [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "cello"}]
    out = await node(ask(blocks), cfg(user))
    assert [m["user_message"] for m in out["retrieved_memories"]] == ["I play the cello on sundays"]


async def test_no_user_logs_a_warning_and_returns_nothing(store: MemoryStore) -> None:
    node = create_retrieve_memories_node(store)
    for config in [{}, cfg(None), cfg({}), cfg({"identity": ""})]:
        with capture_logs() as logs:
            out = await node(ask("anything"), config)  # type: ignore[arg-type]
        assert out == {"retrieved_memories": []}
        assert {"event": "memory.retrieve.skip", "reason": "no_user", "log_level": "warning"} in [
            {k: e[k] for k in ("event", "reason", "log_level") if k in e} for e in logs
        ]


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"messages": []},
        {"messages": [SystemMessage("system only"), AIMessage("ai only")]},
        {"messages": "not a list"},
        None,
        42,
    ],
)
async def test_no_human_message_or_bad_state_returns_nothing(
    store: MemoryStore, state: Any
) -> None:
    node = create_retrieve_memories_node(store)
    assert await node(state, cfg("someone")) == {"retrieved_memories": []}


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (StoreError("connection refused"), "database"),
        (EmbeddingError("model crashed"), "embedding"),
        (RuntimeError("bug"), "unexpected"),
    ],
)
async def test_failures_are_logged_and_return_nothing(failure: BaseException, kind: str) -> None:
    node = create_retrieve_memories_node(provider(FailingStore(failure)))
    with capture_logs() as logs:
        out = await node(ask("hello"), cfg("u"))
    assert out == {"retrieved_memories": []}
    errors = [e for e in logs if e["event"] == "memory.retrieve.error"]
    assert errors and errors[0]["kind"] == kind and errors[0]["log_level"] == "error"


async def test_a_store_that_cannot_open_returns_nothing() -> None:
    async def broken() -> MemoryStore:
        raise StoreError("cannot connect")

    node = create_retrieve_memories_node(broken)
    assert await node(ask("hello"), cfg("u")) == {"retrieved_memories": []}


async def test_timeout_returns_nothing() -> None:
    node = create_retrieve_memories_node(provider(FailingStore(delay=60)), search_timeout_ms=50)
    with capture_logs() as logs:
        out = await node(ask("hello"), cfg("u"))
    assert out == {"retrieved_memories": []}
    assert any(e["event"] == "memory.retrieve.timeout" for e in logs)


async def test_the_three_start_nodes_run_concurrently(store: MemoryStore, user: str) -> None:
    """Each START node waits at a barrier that only opens when all three are inside it, so
    the graph can only finish if they overlap; the order of events shows it too."""
    barrier = asyncio.Barrier(3)
    events: list[str] = []

    class BarrierStore:
        settings = store.settings  # what the node leaves to the store

        async def find(self, *args: Any, **kwargs: Any) -> SearchResult:
            events.append("retrieve:in")
            await barrier.wait()
            events.append("retrieve:out")
            return await store.find(*args, **kwargs)

    def sibling(name: str) -> Any:
        async def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
            events.append(f"{name}:in")
            await barrier.wait()
            events.append(f"{name}:out")
            return {}

        return node

    async def respond(state: Any, config: RunnableConfig) -> dict[str, Any]:
        events.append("respond")
        return {"messages": [AIMessage("ok")]}

    async def no_store(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {}

    graph = build_graph(
        retrieve=create_retrieve_memories_node(provider(BarrierStore())),
        inject=sibling("inject"),
        detect=sibling("detect"),
        respond=respond,
        store=no_store,
    )
    async with asyncio.timeout(30):
        await graph.ainvoke(ask("hello there"), cfg(user))
    ins = [i for i, e in enumerate(events) if e.endswith(":in")]
    outs = [i for i, e in enumerate(events) if e.endswith(":out")]
    assert len(ins) == 3 and len(outs) == 3
    assert max(ins) < min(outs)  # all three were inside before any left
    assert events[-1] == "respond"


# --- the writer ---------------------------------------------------------------------------


def writer_node(store: MemoryStore, tmp_path: Path, **settings: Any) -> Any:
    return create_store_memories_node(
        store, settings=Settings(**settings), queue_path=tmp_path / "outbox.sqlite3"
    )


async def test_stores_the_latest_pair_with_thread_and_user(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    node = writer_node(store, tmp_path)
    state = {
        "messages": [
            HumanMessage("first question here"),
            AIMessage("first answer"),
            HumanMessage("I adopted a dog named Max"),
            AIMessage("What a great name!"),
        ]
    }
    assert await node(state, cfg({"identity": user}, thread="thread-9")) == {}
    [memory] = await store.recent(user)
    assert (memory.user_message, memory.ai_response) == (
        "I adopted a dog named Max",
        "What a great name!",
    )
    assert memory.conversation_id == "thread-9"


async def test_running_the_same_turn_twice_stores_it_once(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    node = writer_node(store, tmp_path)
    state = {"messages": [HumanMessage("remember my birthday is May 3"), AIMessage("Noted!")]}
    for _ in range(3):
        await node(state, cfg(user))
    assert len(await store.recent(user, 10)) == 1


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([HumanMessage("hi"), AIMessage("hello!")], "too_short"),
        ([HumanMessage("tell me a joke"), AIMessage("Error: model overloaded")], "error_response"),
        ([HumanMessage("no reply to this yet")], "no_pair"),
        ([SystemMessage("you are helpful"), AIMessage("ok")], "no_pair"),
    ],
)
async def test_content_filtering(
    store: MemoryStore, user: str, tmp_path: Path, messages: list[Any], reason: str
) -> None:
    node = writer_node(store, tmp_path)
    with capture_logs() as logs:
        await node({"messages": messages}, cfg(user))
    assert await store.recent(user) == []
    assert {"event": "memory.write.skip", "reason": reason} in [
        {k: e.get(k) for k in ("event", "reason")} for e in logs
    ]


async def test_error_responses_are_kept_when_the_filter_is_off(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    node = writer_node(store, tmp_path, filter_error_responses=False)
    await node({"messages": [HumanMessage("tell me a joke"), AIMessage("Error: x")]}, cfg(user))
    assert len(await store.recent(user)) == 1


async def test_long_texts_are_cut(store: MemoryStore, user: str, tmp_path: Path) -> None:
    node = writer_node(store, tmp_path)
    await node({"messages": [HumanMessage("a" * 5000), AIMessage("b" * 5000)]}, cfg(user))
    [memory] = await store.recent(user)
    assert len(memory.user_message) == 2000 and len(memory.ai_response) == 2000


async def test_writer_never_fails_the_turn(tmp_path: Path) -> None:
    async def down() -> MemoryStore:
        raise StoreError("database down")

    writer = TurnWriter(down, Outbox(tmp_path / "q.sqlite3"), wait_s=0.2, retry_initial_s=60)
    node = create_store_memories_node(writer=writer)
    state = {"messages": [HumanMessage("please remember this"), AIMessage("I will")]}
    with capture_logs() as logs:
        assert await node(state, cfg("u")) == {}
    assert any(e["event"] == "memory.write.queued" for e in logs)
    assert await writer.outbox.count() == 1  # waiting on disk, not lost
    await writer.close()


async def test_the_writer_checks_a_turn_with_the_stores_limits(
    databases: Databases, tmp_path: Path
) -> None:
    """Issue 31: the writer checked a turn against fixed limits before queueing it, the store
    against its own; a turn the store would refuse was queued, then set aside later."""
    url = await databases.create()
    own = Settings(database_url=url, max_metadata_bytes=64, max_message_length=10)
    async with MemoryStore.connect(own, embeddings=FakeEmbeddings(64)) as store:
        writer = TurnWriter(provider_for(store), Outbox(tmp_path / "q.sqlite3"), wait_s=5.0)
        now = datetime.now(UTC)
        with pytest.raises(InvalidInputError, match="metadata"):
            await writer.submit(
                "u", "hi", "ok", conversation_id=None, created_at=now, metadata={"x": "y" * 100}
            )
        assert await writer.outbox.count() == 0  # refused before it was queued
        outcome = await writer.submit("u", "a" * 50, "b" * 50, conversation_id=None, created_at=now)
        assert outcome == "stored"
        [memory] = await store.recent("u")
        assert (memory.user_message, memory.ai_response) == ("a" * 10, "b" * 10)
        await writer.close()
