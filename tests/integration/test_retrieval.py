"""Keyword, hybrid and re-ranked retrieval, the VectorMemorySearch node and the agent tool."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel
from structlog.testing import capture_logs

from recall.config import RetrievalMode
from recall.creation.markdown_notes import read_notes
from recall.errors import InvalidInputError
from recall.limits import KEYWORD_LIMIT, RECENT_LIMIT
from recall.memory import Memory
from recall.nodes import create_recent_memories_node, create_retrieve_memories_node
from recall.nodes.keyword import (
    NO_DISCUSSION_MESSAGE,
    NO_RESULTS_MESSAGE,
    RESULT_SEPARATOR,
    create_keyword_search_node,
)
from recall.nodes.tool import create_memory_search_tool
from recall.search.rerank import rerank_memories
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings


def cfg(user: str | None, thread: str | None = "thread-1") -> RunnableConfig:
    configurable: dict[str, Any] = {}
    if thread is not None:
        configurable["thread_id"] = thread
    if user is not None:
        configurable["langgraph_auth_user"] = {"identity": user}
    return {"configurable": configurable}


async def test_keyword_search_ranks_by_bm25_and_filters_conversations(
    store: MemoryStore, user: str
) -> None:
    await store.add_turn(user, "the vet said Max needs a vaccine", "ok", conversation_id="a")
    await store.add_turn(user, "Max Max Max loves the park and the vet", "ok", conversation_id="a")
    await store.add_turn(user, "groceries: milk and eggs", "ok", conversation_id="a")
    await store.add_turn(user, "the vet is closed on sunday", "ok", conversation_id="b")
    hits = await store.keyword_search(user, "vaccine; vet")
    assert hits[0].user_message == "the vet said Max needs a vaccine"  # the rare term wins
    assert {h.user_message for h in hits} == {
        "the vet said Max needs a vaccine",
        "Max Max Max loves the park and the vet",
        "the vet is closed on sunday",
    }
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    in_a = await store.keyword_search(user, "vet", conversation_id="a")
    assert {h.conversation_id for h in in_a} == {"a"}
    assert await store.keyword_search(user, "vaccine; vet", limit=1) == hits[:1]
    assert await store.keyword_search(user + "-other", "vet") == []


@pytest.mark.parametrize(
    "keywords",
    [
        "&|!:*()'\"\\",
        "vet <-> vaccine",
        "vet:* & !park",
        "'; DROP TABLE recall.memories; --",
        "1=1 OR user_id <> ''",
        ";".join(f"kw{i}" for i in range(100)),
        ";;;;",
        "",
        "\x00\ud800",
    ],
)
async def test_hostile_keywords_never_error_or_cross_users(
    store: MemoryStore, user: str, keywords: str
) -> None:
    await store.add_turn(user, "the vet said Max needs a vaccine", "ok")
    await store.add_turn(user + "-victim", "victim's vet secret", "ok")
    hits = await store.keyword_search(user, keywords)
    assert all(h.user_message == "the vet said Max needs a vaccine" for h in hits)
    assert len(await store.recent(user + "-victim")) == 1


async def test_keyword_search_argument_errors(store: MemoryStore) -> None:
    with pytest.raises(InvalidInputError):
        await store.keyword_search("", "vet")
    with pytest.raises(InvalidInputError):
        await store.keyword_search("u", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="mode"):
        await store.search("u", "vet", mode="fuzzy")  # type: ignore[arg-type]


async def test_hybrid_lets_a_keyword_only_hit_in(store: MemoryStore, user: str) -> None:
    """The fake embedder maps 'zorblax' texts far from the query's vector; only BM25 finds
    the one memory that names it, and hybrid must surface it."""
    for i in range(40):
        await store.add_turn(user, f"we talked about apples and pears {i}", "yes apples")
    target = await store.add_turn(user, "my cat is named Zorblax", "cute")
    semantic = await store.search(
        user, "apples Zorblax", limit=3, similarity_threshold=0.0, mode="semantic"
    )
    assert target.id not in [m.id for m in semantic]
    hybrid = await store.search(
        user, "apples Zorblax", limit=3, similarity_threshold=0.0, mode="hybrid"
    )
    assert target.id in [m.id for m in hybrid]
    found = next(m for m in hybrid if m.id == target.id)
    assert found.similarity is not None and found.score is not None  # cosine and relevance
    scores = [m.score for m in hybrid]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_hybrid_threshold_applies_to_relevance(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, "I adopted a dog named Rex", "nice")
    await store.add_turn(user, "the weather is grey today", "indeed")
    every = await store.search(user, "dog Rex", limit=10, similarity_threshold=0.0, mode="hybrid")
    kept = await store.search(user, "dog Rex", limit=10, similarity_threshold=0.5, mode="hybrid")
    assert len(every) == 2
    assert all(m.score is not None and m.score >= 0.5 for m in kept)
    assert kept and kept[0].user_message == "I adopted a dog named Rex"
    assert len(kept) < len(every)  # the unrelated one is below the calibrated floor


async def test_retrieve_node_modes(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, "my cat is named Zorblax", "cute")
    modes: tuple[RetrievalMode, ...] = ("semantic", "keyword", "hybrid")
    for mode in modes:
        node = create_retrieve_memories_node(store, mode=mode, similarity_threshold=0.0)
        out = await node({"messages": [HumanMessage("Zorblax")]}, cfg(user))
        assert [m["user_message"] for m in out["retrieved_memories"]] == ["my cat is named Zorblax"]


# --- re-ranking ---------------------------------------------------------------------------


class Reverse:
    async def rerank(self, query: str, memories: Sequence[Memory]) -> Sequence[float]:
        return [float(i) for i in range(len(memories))]  # last first


class Broken:
    def __init__(self, how: str) -> None:
        self.how = how

    async def rerank(self, query: str, memories: Sequence[Memory]) -> Sequence[float]:
        if self.how == "slow":
            await asyncio.sleep(30)
        if self.how == "count":
            return [1.0]
        raise RuntimeError("reranker down")


async def test_reranker_reorders_the_first_stage(store: MemoryStore, user: str) -> None:
    for i in range(5):
        await store.add_turn(user, f"pears number {i} in the basket", "ok")
    first = create_retrieve_memories_node(store, mode="semantic", similarity_threshold=0.0, limit=5)
    reranked = create_retrieve_memories_node(
        store, mode="semantic", similarity_threshold=0.0, limit=5, reranker=Reverse()
    )
    state = {"messages": [HumanMessage("pears in the basket")]}
    a = [m["id"] for m in (await first(state, cfg(user)))["retrieved_memories"]]
    after = (await reranked(state, cfg(user)))["retrieved_memories"]
    assert [m["id"] for m in after] == list(reversed(a))
    assert [m["score"] for m in after] == [4.0, 3.0, 2.0, 1.0, 0.0]  # the re-ranker's scores


@pytest.mark.parametrize("how", ["raise", "slow", "count"])
async def test_reranker_failure_keeps_the_first_stage_order(
    store: MemoryStore, user: str, how: str
) -> None:
    for i in range(3):
        await store.add_turn(user, f"plums number {i}", "ok")
    memories = await store.search(user, "plums", limit=3, similarity_threshold=0.0)
    with capture_logs() as logs:
        out = await rerank_memories(Broken(how), "plums", memories, timeout_s=0.1)
    assert out == memories
    assert any(e["event"] in ("memory.rerank.error", "memory.rerank.timeout") for e in logs)


# --- the VectorMemorySearch node ----------------------------------------------------------


async def test_keyword_node_seed_behaviour(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, "we planned a trip to Lisbon", "sounds fun", conversation_id="t1")
    await store.add_turn(user, "Lisbon has great tiles", "true", conversation_id="t1")
    await store.add_turn(user, "Lisbon again, other thread", "ok", conversation_id="t2")
    node = create_keyword_search_node(store)
    out = await node({"memory_keywords": "Lisbon; tiles"}, cfg(user, "t1"))
    parts = out["memory_search_output"].split(RESULT_SEPARATOR)
    assert parts[0] == "Lisbon has great tiles\ntrue"
    assert len(parts) == 2  # only this discussion's memories
    assert (await node({"memory_keywords": "Lisbon"}, cfg(user, None))) == {
        "memory_search_output": NO_DISCUSSION_MESSAGE
    }
    none = await node({"memory_keywords": "nothing; matches"}, cfg(user, "t1"))
    assert none == {"memory_search_output": NO_RESULTS_MESSAGE}
    templated = create_keyword_search_node(store, template="{topic}; tiles", output_key="ctx")
    out = await templated({"topic": "trip"}, cfg(user, "t1"))
    assert out["ctx"].count(RESULT_SEPARATOR) == 1
    limited = create_keyword_search_node(store, limit=1)
    out = await limited({"memory_keywords": "Lisbon"}, cfg(user, "t1"))
    assert RESULT_SEPARATOR not in out["memory_search_output"]


async def test_keyword_and_recent_defaults_are_the_one_constants(
    store: MemoryStore, user: str
) -> None:
    """Issue 48: the keyword limit and the recent count were written again by each caller;
    the store's and the nodes' are `recall.limits`'s."""
    for i in range(max(KEYWORD_LIMIT, RECENT_LIMIT) + 2):
        await store.add_turn(user, f"Lisbon note {i}", "ok", conversation_id="t1")
    assert len(await store.keyword_search(user, "Lisbon")) == KEYWORD_LIMIT
    out = await create_keyword_search_node(store)({"memory_keywords": "Lisbon"}, cfg(user, "t1"))
    assert out["memory_search_output"].count(RESULT_SEPARATOR) == KEYWORD_LIMIT - 1
    assert len(await store.recent(user)) == RECENT_LIMIT
    assert len(await store.conversations.conversation_recent(user, "t1")) == RECENT_LIMIT
    out = await create_recent_memories_node(store)({"messages": []}, cfg(user, "t1"))
    assert len(out["recent_memories"]) == RECENT_LIMIT


# --- the memory_search tool ---------------------------------------------------------------


async def test_tool_is_bound_to_the_authenticated_user(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, "my locker code is 4512", "noted", conversation_id="c9")
    await store.add_turn(user + "-eve", "eve's locker code is 9999", "noted")
    tool = create_memory_search_tool(store)
    out = await tool.ainvoke({"query": "locker code", "max_results": 5}, cfg(user))
    assert "4512" in out and "9999" not in out
    assert "c9" in out and "score" in out
    # whatever the model puts in the arguments, it cannot pick another user
    schema = tool.tool_call_schema
    assert isinstance(schema, type) and issubclass(schema, BaseModel)
    assert "user_id" not in schema.model_json_schema()["properties"]
    forged = await tool.ainvoke({"query": "locker code", "user_id": user + "-eve"}, cfg(user))
    assert "4512" in forged and "9999" not in forged
    forged_unauth = await tool.ainvoke({"query": "locker", "user_id": user + "-eve"}, cfg(None))
    assert "9999" not in forged_unauth
    unauth = await tool.ainvoke({"query": "locker code"}, cfg(None))
    assert "no authenticated user" in unauth


async def test_notes_are_imported_and_searchable(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text("# Facts\nPierce likes retro cartoons.\n\nSecond para.")
    (tmp_path / "memory" / "2026-02-15.md").write_text(
        "Set up ErsatzTV for Pierce.\nEndpoint on port 8409.\n\n\nOther note."
    )
    (tmp_path / "memory" / "2026-02-30.md").write_text("not a real date: skipped")
    (tmp_path / "memory" / "notes.md").write_text("not a daily file: skipped")
    notes = list(read_notes(tmp_path, user))
    assert len(notes) == 4
    ids = await store.add_turns(notes)
    assert await store.add_turns(read_notes(tmp_path, user)) == ids  # re-import: nothing new
    hits = await store.keyword_search(user, "ErsatzTV")
    # the file's day at noon UTC (recall.creation.markdown_notes), compared as an instant: the
    # day of the month it reads as is the server's time zone's (initdb takes the machine's), and at
    # UTC+13 (New Zealand in February) or +14 noon UTC is already the next day
    assert hits[0].kind == "note" and hits[0].created_at == datetime(2026, 2, 15, 12, tzinfo=UTC)
    assert hits[0].metadata["source"] == "memory/2026-02-15.md"
    tool = create_memory_search_tool(store, mode="keyword")
    out = await tool.ainvoke({"query": "ErsatzTV"}, cfg(user))
    assert "2026-02-15" in out and "memory/2026-02-15.md" in out


def test_fake_embedder_is_what_these_tests_assume() -> None:
    fake = FakeEmbeddings(64)
    assert fake.embed_query("Zorblax") != fake.embed_query("apples")
