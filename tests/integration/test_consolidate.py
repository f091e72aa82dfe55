"""Memory creation with LangChain's fake chat models returning fixed answers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from structlog.testing import capture_logs

from recall.creation.consolidate import ConsolidationScheduler, Consolidator
from recall.creation.extraction import (
    ExtractionError,
    RunnableExtractor,
    RunnableSummarizer,
    parse_memory_objects,
)
from recall.db.sql import query
from recall.nodes.context import create_chat_summary_node, create_recent_memories_node
from recall.store import MemoryStore

DOG = {
    "title": "Dog named Max",
    "summary": "The user adopted a beagle named Max in May.",
    "entities": ["Max", "beagle"],
    "key_phrases": ["adopted dog"],
}
JOB = {
    "title": "Nursing job",
    "summary": "The user works night shifts as a nurse in Lyon.",
    "entities": ["Lyon"],
    "key_phrases": ["night shifts"],
}


def fake(*answers: Any) -> FakeListChatModel:
    return FakeListChatModel(
        responses=[a if isinstance(a, str) else json.dumps(a) for a in answers]
    )


async def add_turns(
    store: MemoryStore, user: str, conversation: str, n: int, start: int = 0
) -> None:
    for i in range(start, start + n):
        await store.add_turn(
            user, f"message number {i} here", f"reply {i}", conversation_id=conversation
        )


async def summaries(store: MemoryStore, user: str) -> list[Any]:
    return [m for m in await store.recent(user, 100) if m.kind == "summary"]


async def tracker(store: MemoryStore, user: str, conversation: str) -> Any:
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(
            query("progress_get"), {"user_id": user, "conversation_id": conversation}
        )
        return await cur.fetchone()


def test_parsing_one_object_an_array_fences_and_errors() -> None:
    assert [m.title for m in parse_memory_objects(json.dumps(DOG))] == ["Dog named Max"]
    both = parse_memory_objects(AIMessage("```json\n" + json.dumps([DOG, JOB]) + "\n```"))
    assert [m.title for m in both] == ["Dog named Max", "Nursing job"]
    assert parse_memory_objects("[]") == []
    assert parse_memory_objects({**DOG, "entities": "Max"})[0].entities == ["Max"]
    for bad in ["not json {", json.dumps({"title": "no summary"}), json.dumps([1, 2]),
                json.dumps({**DOG, "title": "   "})]:  # fmt: skip
        with pytest.raises(ExtractionError):
            parse_memory_objects(bad)


async def test_a_chunk_becomes_searchable_memories_once(store: MemoryStore, user: str) -> None:
    await add_turns(store, user, "c1", 4)
    worker = Consolidator(store, RunnableExtractor(fake([DOG, JOB])), chunk_size=4)
    result = await worker.run(user, "c1")
    assert (result.chunks, result.created, result.error) == (1, 2, None)
    stored = await summaries(store, user)
    assert {m.metadata["title"] for m in stored} == {"Dog named Max", "Nursing job"}
    assert all(m.ai_response == "" and m.conversation_id == "c1" for m in stored)

    # found by keyword search (title, entities, key phrases, text) and by vector search
    assert (await store.keyword_search(user, "beagle"))[0].kind == "summary"
    assert (await store.keyword_search(user, "night shifts"))[0].metadata["title"] == "Nursing job"
    semantic = await store.search(
        user, "Dog named Max beagle", similarity_threshold=0.0, limit=1, mode="semantic"
    )
    assert semantic[0].metadata["title"] == "Dog named Max"

    # nothing new: the model is not asked again, nothing is stored twice
    again = await worker.run(user, "c1", force=True)
    assert (again.chunks, again.created) == (0, 0)
    row = await tracker(store, user, "c1")
    last = await store.recent(user, 100)
    assert row is not None and row[2] is not None
    assert len([m for m in last if m.kind == "turn"]) == 4


async def test_partial_chunks_wait_unless_forced(store: MemoryStore, user: str) -> None:
    await add_turns(store, user, "c1", 3)
    worker = Consolidator(store, RunnableExtractor(fake(DOG)), chunk_size=4)
    assert (await worker.run(user, "c1")).chunks == 0
    assert await tracker(store, user, "c1") is None
    assert (await worker.run(user, "c1", force=True)).chunks == 1


@pytest.mark.parametrize("answer", ["this is not JSON", json.dumps({"title": "only a title"})])
async def test_a_malformed_answer_stores_nothing_and_keeps_the_tracker(
    store: MemoryStore, user: str, answer: str
) -> None:
    await add_turns(store, user, "c1", 2)
    worker = Consolidator(store, RunnableExtractor(fake(answer, DOG)), chunk_size=2)
    with capture_logs() as logs:
        result = await worker.run(user, "c1")
    assert result.error is not None and result.chunks == 0
    assert await summaries(store, user) == []
    assert await tracker(store, user, "c1") is None
    assert any(e["event"] == "memory.consolidate.error" for e in logs)
    # retried next time: the same chunk, now answered well
    assert (await worker.run(user, "c1")).created == 1


async def test_a_timeout_stores_nothing(store: MemoryStore, user: str) -> None:
    async def slow(_prompt: Any) -> str:
        await asyncio.sleep(30)
        return json.dumps(DOG)

    await add_turns(store, user, "c1", 2)
    worker = Consolidator(
        store, RunnableExtractor(RunnableLambda(slow)), chunk_size=2, timeout_s=0.2
    )
    result = await worker.run(user, "c1")
    assert result.error is not None and "Timeout" in result.error
    assert await summaries(store, user) == [] and await tracker(store, user, "c1") is None


async def test_duplicates_and_near_duplicates(store: MemoryStore, user: str) -> None:
    near = {**DOG, "summary": "The user adopted a beagle named Max in May!"}
    worker = Consolidator(store, RunnableExtractor(fake(DOG, DOG, near)), chunk_size=1)
    await add_turns(store, user, "c1", 3)
    result = await worker.run(user, "c1")
    assert result.chunks == 3
    stored = await summaries(store, user)
    assert len(stored) == 1  # identical once, the near-duplicate updated it
    assert stored[0].user_message.endswith("in May!")
    assert result.created == 1 and result.updated + result.identical == 2


async def test_rolling_summary_chain_and_nodes(store: MemoryStore, user: str) -> None:
    summarizer = RunnableSummarizer(fake("Summary one: dog Max.", "Summary two: Max and Lyon."))
    worker = Consolidator(
        store, RunnableExtractor(fake(DOG, JOB)), summarizer=summarizer, chunk_size=2
    )
    await add_turns(store, user, "c1", 4)
    result = await worker.run(user, "c1")
    assert result.chunks == 2 and result.summary_updated
    assert await Consolidator.summary(store, user, "c1") == "Summary two: Max and Lyon."
    config: RunnableConfig = {
        "configurable": {"thread_id": "c1", "langgraph_auth_user": {"identity": user}}
    }
    node = create_chat_summary_node(store)
    assert await node({}, config) == {"chat_summary": "Summary two: Max and Lyon."}
    recent = create_recent_memories_node(store, n=1)
    out = await recent({}, config)
    assert out["recent_memories"][0].startswith("Nursing job")


async def test_recent_memories_stateless_fallback(store: MemoryStore) -> None:
    node = create_recent_memories_node(store, n=2)
    state = {"messages": [HumanMessage("one"), AIMessage("two"), HumanMessage("three")]}
    out = await node(state, {"configurable": {}})
    assert out == {"recent_memories": ["Assistant: two", "User: three"]}
    # before any memory is written, a conversation shows its stored turns
    config: RunnableConfig = {
        "configurable": {"thread_id": "fresh", "langgraph_auth_user": {"identity": "nobody-x"}}
    }
    assert (await node(state, config)) == {"recent_memories": ["Assistant: two", "User: three"]}


async def test_scheduler_runs_in_the_background_debounced(store: MemoryStore, user: str) -> None:
    calls = 0

    async def counting(prompt: Any) -> str:
        nonlocal calls
        calls += 1
        return json.dumps(DOG)

    worker = Consolidator(store, RunnableExtractor(RunnableLambda(counting)), chunk_size=3)
    scheduler = ConsolidationScheduler(worker, debounce_s=0.05)
    await add_turns(store, user, "c1", 3)
    for _ in range(5):
        scheduler.notify(user, "c1")  # one burst: one run
    scheduler.notify(user, None)  # no conversation: ignored
    await scheduler.wait()
    assert calls == 1
    assert len(await summaries(store, user)) == 1
    await scheduler.close()


async def test_forget_user_erases_summaries_and_trackers(store: MemoryStore, user: str) -> None:
    worker = Consolidator(
        store, RunnableExtractor(fake(DOG)), summarizer=RunnableSummarizer(fake("S")), chunk_size=1
    )
    await add_turns(store, user, "c1", 1)
    await worker.run(user, "c1")
    await store.forget_user(user)
    assert await tracker(store, user, "c1") is None
    assert await Consolidator.summary(store, user, "c1") is None
