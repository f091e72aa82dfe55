"""LangMem on RecallStore: its memory tools, its store manager (with a scripted chat model, so
no network) and the notes example graph, each against a real database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langmem import (
    create_manage_memory_tool,
    create_memory_store_manager,
    create_search_memory_tool,
)

from recall import RecallStore
from recall.example.notes_graph import NO_USER, NOTHING_FOUND, build_notes_graph
from tests.conftest import Databases
from tests.fakes import RecordingChatModel

pytestmark = pytest.mark.model  # the project's default offline embedder, as a user gets it


@pytest.fixture(scope="module")
async def store(databases: Databases) -> AsyncIterator[RecallStore]:
    url = await databases.create("recall_langmem")
    async with RecallStore.connect(url, index={"fields": ["$"]}) as s:
        yield s


def _config(user: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user, "langgraph_auth_user_id": user}}


async def test_manage_tool_creates_updates_and_deletes(store: RecallStore) -> None:
    manage = create_manage_memory_tool(("memories", "{langgraph_user_id}"), store=store)
    await manage.ainvoke({"action": "create", "content": "Likes green tea"}, _config("u-manage"))
    [item] = await store.asearch(("memories", "u-manage"))
    assert item.value == {"content": "Likes green tea"}

    changed = {"action": "update", "id": item.key, "content": "Likes black tea now"}
    await manage.ainvoke(changed, _config("u-manage"))
    [updated] = await store.asearch(("memories", "u-manage"))
    assert updated.key == item.key and updated.value == {"content": "Likes black tea now"}
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at

    await manage.ainvoke({"action": "delete", "id": item.key}, _config("u-manage"))
    assert await store.asearch(("memories", "u-manage")) == []


async def test_tools_work_from_sync_code_in_a_worker_thread(store: RecallStore) -> None:
    manage = create_manage_memory_tool(("memories", "{langgraph_user_id}"), store=store)
    search = create_search_memory_tool(("memories", "{langgraph_user_id}"), store=store)
    config = _config("u-sync")
    await asyncio.to_thread(
        manage.invoke, {"action": "create", "content": "Plays the cello"}, config
    )
    found = await asyncio.to_thread(search.invoke, {"query": "musical instrument"}, config)
    assert json.loads(found)[0]["value"] == {"content": "Plays the cello"}


async def test_search_tool_ranks_by_meaning_within_the_users_namespace(store: RecallStore) -> None:
    manage = create_manage_memory_tool(("memories", "{langgraph_user_id}"), store=store)
    search = create_search_memory_tool(("memories", "{langgraph_user_id}"), store=store)
    for fact in ["Allergic to peanuts", "Works as a nurse", "Has a cat called Miso"]:
        await manage.ainvoke({"action": "create", "content": fact}, _config("u-search"))
    await manage.ainvoke({"action": "create", "content": "Is a nurse too"}, _config("u-other"))

    hits = json.loads(await search.ainvoke({"query": "What is my job?"}, _config("u-search")))
    assert hits[0]["value"]["content"] == "Works as a nurse"
    assert all(h["namespace"] == ["memories", "u-search"] for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1


async def test_memory_store_manager_writes_what_the_model_extracts(store: RecallStore) -> None:
    model = RecordingChatModel(
        script=[
            AIMessage(
                "",
                tool_calls=[{"name": "Memory", "args": {"content": "Dog is named Max"}, "id": "1"}],
            )
        ]
    )
    manager = create_memory_store_manager(
        model, namespace=("memories", "{langgraph_user_id}"), store=store
    )
    said = {"messages": [{"role": "user", "content": "I adopted a dog named Max"}]}
    written = await manager.ainvoke(said, _config("u-manager"))
    assert [w["value"]["content"] for w in written] == [{"content": "Dog is named Max"}]
    assert len(model.prompts) == 1  # the scripted reply only
    [hit] = await store.asearch(("memories", "u-manager"), query="pet's name")
    assert hit.value["content"] == {"content": "Dog is named Max"} and hit.score is not None


async def test_notes_graph_keeps_users_apart(store: RecallStore) -> None:
    graph = build_notes_graph(store)

    async def say(user: str | None, text: str) -> str:
        config: RunnableConfig = {"configurable": {"langgraph_auth_user_id": user} if user else {}}
        out = await graph.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
        return str(out["messages"][-1].content)

    assert await say("n-alice", "remember my locker code is 4417") == "Noted."
    assert "4417" in await say("n-alice", "what is my locker code?")
    assert await say("n-bob", "what is my locker code?") == NOTHING_FOUND
    assert await say(None, "remember nothing") == NO_USER
    assert await say("n-alice", "forget everything") == "Forgotten: 1 notes."
    assert await say("n-alice", "what is my locker code?") == NOTHING_FOUND
