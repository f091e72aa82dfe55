"""Memory wherever agents are built (issue 55), on a real database with the default model: the
nodes in sync and async graphs (`invoke`, `stream`, `ainvoke`, `astream`), `RecallMiddleware` in
`create_agent` agents, and the functional API. In each, a fact told in one thread reaches the
model in another, another user's agent never sees it, and each turn is stored once.

A sync run goes through `asyncio.to_thread` here, so the test's own loop stays free: in that
thread no loop runs, as in a script. `test_a_sync_script_that_ends_at_once_loses_no_turn` runs
a real script.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from structlog.testing import capture_logs

from recall import RecallMiddleware, retrieve_memories, store_memories
from recall.config import Settings
from recall.errors import StoreError
from recall.example.functional import build_companion, build_sync_companion
from recall.memory import LIBRARY_KEY
from recall.nodes import (
    blocking,
    create_chat_summary_node,
    create_keyword_search_node,
    create_recent_memories_node,
    create_retrieve_memories_node,
    create_store_memories_node,
)
from recall.outbox import Outbox
from recall.store import MemoryStore
from tests.fakes import FailingStore, RecordingChatModel, provider

pytestmark = pytest.mark.model

FACT = "I adopted a dog named Max"
QUESTION = "What is my dog's name?"
HOWS = ["invoke", "stream", "ainvoke", "astream"]


def config(user: str | None, thread: str) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread}
    if user is not None:
        configurable["langgraph_auth_user"] = {"identity": user}
    return {"configurable": configurable}


async def run(graph: Any, how: str, payload: Any, cfg: RunnableConfig, **kw: Any) -> Any:
    """The graph's final value, run the way `how` names."""
    if how == "invoke":
        return await asyncio.to_thread(graph.invoke, payload, cfg, **kw)
    if how == "stream":
        chunks = await asyncio.to_thread(
            lambda: list(graph.stream(payload, cfg, stream_mode="values", **kw))
        )
        return chunks[-1]
    if how == "ainvoke":
        return await graph.ainvoke(payload, cfg, **kw)
    return [c async for c in graph.astream(payload, cfg, stream_mode="values", **kw)][-1]


async def stored(url: str, user: str) -> list[tuple[str, dict[str, Any]]]:
    """Each stored memory of `user`: its user text and metadata."""
    async with MemoryStore.connect(Settings(database_url=url)) as store:
        return [(m.user_message, m.metadata) for m in await store.recent(user, 50)]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    retrieved_memories: list[dict[str, Any]]


def graph_with(handed: list[list[str]]) -> Any:
    """README's two lines in a graph of one's own: the default nodes, and a reply node that
    records the memories it is handed."""

    def reply(state: State) -> dict[str, Any]:
        handed.append([m["user_message"] for m in state.get("retrieved_memories", [])])
        return {"messages": [AIMessage("Noted.")]}

    b = StateGraph(State)
    b.add_node("retrieve_memories", retrieve_memories)
    b.add_node("reply", reply)
    b.add_node("store_memories", store_memories)
    b.add_edge(START, "retrieve_memories")
    b.add_edge("retrieve_memories", "reply")
    b.add_edge("reply", "store_memories")
    b.add_edge("store_memories", END)
    return b.compile()


@pytest.mark.parametrize("how", HOWS)
async def test_the_nodes_remember_across_threads_in_sync_and_async_graphs(
    process_database: str, how: str
) -> None:
    handed: list[list[str]] = []
    graph = graph_with(handed)
    await run(graph, how, {"messages": [("user", FACT)]}, config("alice", "t1"))
    out = await run(graph, how, {"messages": [("user", QUESTION)]}, config("alice", "t2"))
    assert handed[-1][:1] == [FACT]
    assert out["retrieved_memories"][0]["user_message"] == FACT
    await run(graph, how, {"messages": [("user", QUESTION)]}, config("bob", "t3"))
    assert handed[-1] == []
    # written before the run returned, once each, the question's turn with its provenance
    turns = await stored(process_database, "alice")
    assert sorted(t for t, _ in turns) == sorted([FACT, QUESTION])
    asked = next(meta for text, meta in turns if text == QUESTION)
    assert asked[LIBRARY_KEY]["sources"] == [out["retrieved_memories"][0]["id"]]


async def test_a_node_given_a_store_serves_a_sync_graph_on_the_stores_loop(
    store: MemoryStore, user: str
) -> None:
    await store.add_turn(user, "pears and apples grow here", "ok")
    node = create_retrieve_memories_node(store, similarity_threshold=0.0)
    asked = {"messages": [HumanMessage("pears and apples")]}
    out = await asyncio.to_thread(node.invoke, asked, config(user, "t"))
    assert [m["user_message"] for m in out["retrieved_memories"]] == ["pears and apples grow here"]
    # awaiting the node itself is the async side, as the plain functions were
    assert (await node(asked, config(user, "t"))) == out


async def test_the_context_and_keyword_nodes_run_in_sync_graphs_too(process_database: str) -> None:
    handed: list[list[str]] = []
    await run(graph_with(handed), "invoke", {"messages": [("user", FACT)]}, config("alice", "t1"))
    cfg = config("alice", "t1")
    recent = await asyncio.to_thread(create_recent_memories_node().invoke, {}, cfg)
    assert recent == {"recent_memories": [f"{FACT}\nNoted."]}
    searched = await asyncio.to_thread(
        create_keyword_search_node().invoke, {"memory_keywords": "dog; Max"}, cfg
    )
    assert FACT in searched["memory_search_output"]
    summary = await asyncio.to_thread(create_chat_summary_node().invoke, {}, cfg)
    assert summary == {"chat_summary": ""}  # none written yet


async def test_a_sync_call_never_fails_a_turn(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    asked = {"messages": [HumanMessage("pears?")], "retrieved_memories": []}
    down = create_retrieve_memories_node(provider(FailingStore(StoreError("database down"))))
    assert await asyncio.to_thread(down.invoke, asked, config(user, "t")) == {
        "retrieved_memories": []
    }
    # a store whose loop does not run (one opened under an asyncio.run that has ended)
    home, stopped = store.loop, asyncio.new_event_loop()
    try:
        store.loop = stopped
        with capture_logs() as logs:
            node = create_retrieve_memories_node(store)
            writer = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3")
            turn = {**asked, "messages": [*asked["messages"], AIMessage("Noted.")]}
            assert await asyncio.to_thread(node.invoke, asked, config(user, "t")) == {
                "retrieved_memories": []
            }
            assert await asyncio.to_thread(writer.invoke, turn, config(user, "t")) == {}
    finally:
        store.loop = home
        stopped.close()
    failed = [(e["event"], e["kind"]) for e in logs if e["log_level"] == "error"]
    assert failed == [("memory.retrieve.error", "sync"), ("memory.write.error", "sync")]


async def test_invoke_on_the_stores_own_loop_gives_up_instead_of_hanging(
    store: MemoryStore, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`graph.invoke` called from code running on the loop the node's store was opened on (a
    notebook cell, say): a step of two nodes runs them in worker threads, whose calls to that
    loop would wait for ever on the thread that waits for them."""
    monkeypatch.setattr(blocking, "ANSWER_S", 0.5)
    await store.add_turn(user, "pears and apples grow here", "ok")
    b = StateGraph(State)
    b.add_node("retrieve_memories", create_retrieve_memories_node(store, similarity_threshold=0))
    b.add_node("other", lambda state: {})
    b.add_edge(START, "retrieve_memories")
    b.add_edge(START, "other")
    graph: Any = b.compile()
    with capture_logs() as logs:
        out = graph.invoke({"messages": [("user", "pears")]}, config(user, "t"))  # blocks
    assert out["retrieved_memories"] == []
    assert [(e["event"], e["kind"]) for e in logs if e["log_level"] == "error"] == [
        ("memory.retrieve.error", "sync")
    ]


async def test_the_middleware_never_fails_a_turn(tmp_path: Path) -> None:
    model = RecordingChatModel()
    middleware = RecallMiddleware(
        provider(FailingStore(StoreError("database down"))), queue_path=tmp_path / "q.sqlite3"
    )
    agent = create_agent(model, system_prompt="You are a companion.", middleware=[middleware])
    for how in ("invoke", "ainvoke"):
        with capture_logs() as logs:
            out = await run(agent, how, {"messages": [("user", FACT)]}, config("eve", how))
        assert out["messages"][-1].content == "Noted."
        assert model.system_texts()[-1] == "You are a companion."
        events = [e["event"] for e in logs]
        assert "memory.retrieve.error" in events and "memory.write.error" in events
    # its writers (one on this loop, one on recall's own for invoke) would retry the queued
    # turns against the failing store for the rest of the session, logging into other tests
    for loop, writer in list(middleware._writing.writers.items()):
        if blocking.is_portal(loop):
            await asyncio.to_thread(blocking.run_blocking, writer.close)
        else:
            await writer.close()


def agent_with(model: RecordingChatModel, middleware: RecallMiddleware | None = None) -> Any:
    return create_agent(
        model,
        system_prompt="You are a companion.",
        middleware=[middleware or RecallMiddleware()],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("how", HOWS)
async def test_the_middleware_hands_the_model_a_fact_from_another_thread(
    process_database: str, how: str
) -> None:
    model = RecordingChatModel()
    agent = agent_with(model)
    await run(agent, how, {"messages": [("user", FACT)]}, config("alice", "t1"))
    assert model.system_texts()[-1] == "You are a companion."  # nothing remembered yet
    out = await run(agent, how, {"messages": [("user", QUESTION)]}, config("alice", "t2"))
    prompt = model.system_texts()[-1]
    assert prompt.startswith("You are a companion.\n\nWhat you remember of this user")
    assert f"- The user said: {FACT}\n" in prompt
    assert out["retrieved_memories"][0]["user_message"] == FACT
    await run(agent, how, {"messages": [("user", QUESTION)]}, config("bob", "t3"))
    assert "Max" not in model.system_texts()[-1]
    turns = await stored(process_database, "alice")
    assert sorted(t for t, _ in turns) == sorted([FACT, QUESTION])
    asked = next(meta for text, meta in turns if text == QUESTION)
    assert asked[LIBRARY_KEY]["sources"] == [out["retrieved_memories"][0]["id"]]


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_the_middleware_retrieves_once_a_turn_and_its_tool_reads_the_context_user(
    process_database: str, how: str
) -> None:
    model = RecordingChatModel()
    agent = agent_with(model, RecallMiddleware(search_tool=True))
    # the user comes from the run's context here, not from the auth config
    await run(agent, how, {"messages": [("user", FACT)]}, config(None, "t1"),
              context={"user_id": "carol"})  # fmt: skip
    model.script = [
        AIMessage("", tool_calls=[{"name": "memory_search", "args": {"query": "dog"}, "id": "c1"}]),
        AIMessage("Your dog is Max."),
    ]
    with capture_logs() as logs:
        out = await run(agent, how, {"messages": [("user", QUESTION)]}, config(None, "t2"),
                        context={"user_id": "carol"})  # fmt: skip
    searches = [e for e in logs if e["event"] == "memory.retrieve.done"]
    assert len(searches) == 1 and searches[0]["count"] >= 1
    assert len(model.prompts) == 3  # the first turn's call, then two calls in this turn
    assert all(f"- The user said: {FACT}" in text for text in model.system_texts()[1:])
    [found] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert FACT in str(found.content)
    # someone else's context finds nothing of carol's, by the middleware or by the tool
    model.script = [
        AIMessage("", tool_calls=[{"name": "memory_search", "args": {"query": "dog"}, "id": "c2"}]),
    ]
    out = await run(agent, how, {"messages": [("user", QUESTION)]}, config(None, "t3"),
                    context={"user_id": "dave"})  # fmt: skip
    assert "Max" not in model.system_texts()[-1]
    [found] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "Max" not in str(found.content)


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_without_a_user_the_middleware_does_nothing_and_says_so_once(
    process_database: str, how: str
) -> None:
    model = RecordingChatModel()
    agent = agent_with(model)
    with capture_logs() as logs:
        for thread in ("t1", "t2"):
            await run(agent, how, {"messages": [("user", FACT)]}, config(None, thread))
    assert [e["event"] for e in logs].count("memory.middleware.no_user") == 1
    assert model.system_texts() == ["You are a companion."] * 2
    async with MemoryStore.connect(Settings(database_url=process_database)) as store:
        assert (await store.stats())["memories"] == 0


async def test_a_changed_template_carries_the_memories(process_database: str) -> None:
    model = RecordingChatModel()
    agent = agent_with(model, RecallMiddleware(template="Known facts:\n{memories}\nEnd."))
    await agent.ainvoke({"messages": [("user", FACT)]}, config("erin", "t1"))
    await agent.ainvoke({"messages": [("user", QUESTION)]}, config("erin", "t2"))
    assert model.system_texts()[-1] == (
        f"You are a companion.\n\nKnown facts:\n- The user said: {FACT}\n  You replied: Noted.\n"
        "End."
    )


def test_a_template_without_a_place_for_the_memories_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\{memories\}"):
        RecallMiddleware(template="Known facts:")


@pytest.mark.parametrize("how", HOWS)
async def test_the_functional_api_remembers(process_database: str, how: str) -> None:
    handed: list[list[str]] = []

    def respond(messages: Any, memories: Any) -> AIMessage:
        handed.append([m["user_message"] for m in memories])
        return AIMessage("Noted.")

    build = build_sync_companion if how in ("invoke", "stream") else build_companion
    companion = build(respond, checkpointer=InMemorySaver())
    await run(companion, how, FACT, config("alice", "t1"))
    await run(companion, how, QUESTION, config("alice", "t2"))
    assert handed[-1][:1] == [FACT]
    await run(companion, how, QUESTION, config("bob", "t3"))
    assert handed[-1] == []
    assert sorted(t for t, _ in await stored(process_database, "alice")) == sorted([FACT, QUESTION])


SCRIPT = """
from typing import Annotated, Any, TypedDict
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from recall import retrieve_memories
from recall.nodes import create_store_memories_node

class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    retrieved_memories: list[dict[str, Any]]

b = StateGraph(State)
b.add_node("retrieve_memories", retrieve_memories)
b.add_node("reply", lambda state: {"messages": [AIMessage("Lovely name!")]})
b.add_node("store_memories", create_store_memories_node(wait_s=WAIT_S))
b.add_edge(START, "retrieve_memories")
b.add_edge("retrieve_memories", "reply")
b.add_edge("reply", "store_memories")
g = b.compile()
g.invoke({"messages": [("user", "I adopted a dog named Max")]},
         {"configurable": {"thread_id": "t1", "langgraph_auth_user": {"identity": "dana"}}})
"""


@pytest.mark.parametrize("wait_s", [2.0, 0.0])
async def test_a_sync_script_that_ends_at_once_loses_no_turn(
    process_database: str, wait_s: float, tmp_path: Path
) -> None:
    """With the writer's wait (2 s) the turn is written before `invoke` returns; with none,
    `invoke` returns with the write under way, and the exit hook finishes it, its queue entry
    removed (an `atexit` hook could not: worker threads take no work by then)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", f"WAIT_S = {wait_s}\n" + textwrap.dedent(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert [t for t, _ in await stored(process_database, "dana")] == [FACT]
    outbox = Outbox(tmp_path / "outbox.sqlite3")
    assert await outbox.count() == 0
    outbox.close()
