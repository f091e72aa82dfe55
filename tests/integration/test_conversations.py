"""The store's methods for memory creation and the context nodes (a conversation's newest
memories, unprocessed turns, chunks, rolling summary, pending conversations), and the
defaults that search and consolidation take from the store's Settings."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from langchain_core.language_models import FakeListChatModel

from recall.config import Settings
from recall.creation.consolidate import Consolidator
from recall.creation.extraction import RunnableExtractor
from recall.errors import InvalidInputError
from recall.memory import make_turn
from recall.rows import PendingConversation
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

DOG = {"title": "Dog named Max", "summary": "The user adopted a beagle named Max in May."}


async def _turns(store: MemoryStore, user: str, conversation: str, n: int) -> None:
    for i in range(n):
        await store.add_turn(
            user, f"message {i} about dogs", f"reply {i}", conversation_id=conversation
        )


@pytest.fixture
async def tuned(settings: Settings) -> AsyncIterator[MemoryStore]:
    """A store on the session database whose Settings differ from every built-in default."""
    changed = settings.replace(
        mode="keyword",
        max_memories=2,
        similarity_threshold=0.99,
        consolidation_chunk_size=2,
        dedup_threshold=1.0,
    )
    async with MemoryStore.connect(changed, embeddings=FakeEmbeddings(64)) as store:
        yield store


async def test_conversation_recent_prefers_model_written_memories(
    store: MemoryStore, user: str
) -> None:
    await _turns(store, user, "c1", 3)
    await _turns(store, user, "c2", 1)
    turns = await store.conversations.conversation_recent(user, "c1", 2)
    assert [m.user_message for m in turns] == ["message 2 about dogs", "message 1 about dogs"]
    assert all(m.kind == "turn" and m.conversation_id == "c1" for m in turns)

    pending = await store.conversations.pending_turns(user, "c1", 10)
    memory = make_turn(user, "likes dogs", "", conversation_id="c1", kind="summary")
    [vector] = await store.embedder.embed_documents([memory.text])
    await store.conversations.store_chunk(
        user, "c1", [memory], [vector], through=pending[-1], dedup_threshold=0.95
    )
    [summary] = await store.conversations.conversation_recent(user, "c1", 2)
    assert (summary.kind, summary.user_message) == ("summary", "likes dogs")
    assert len(await store.conversations.conversation_recent(user, "c1", 5, kinds=("turn",))) == 3
    assert await store.conversations.conversation_recent(user, "no-such-conversation") == []
    with pytest.raises(InvalidInputError, match="kinds"):
        await store.conversations.conversation_recent(user, "c1", kinds=("secret",))


async def test_a_chunk_moves_the_tracker_even_with_no_memories(
    store: MemoryStore, user: str
) -> None:
    await _turns(store, user, "c1", 3)
    pending = await store.conversations.pending_turns(user, "c1", 2)
    assert [t.user_message for t in pending] == ["message 0 about dogs", "message 1 about dogs"]
    assert await store.conversations.pending_conversations(user) == [
        PendingConversation(user, "c1", 3)
    ]

    stored = await store.conversations.store_chunk(
        user, "c1", [], [], through=pending[-1], dedup_threshold=0.95
    )
    assert (stored.created, stored.updated, stored.identical) == (0, 0, 0)
    assert stored.last_memory_id is None
    [left] = await store.conversations.pending_turns(user, "c1", 10)
    assert left.user_message == "message 2 about dogs"
    assert await store.conversations.pending_conversations(user, "c1") == [
        PendingConversation(user, "c1", 1)
    ]
    assert await store.conversations.pending_conversations(user, "other") == []


async def test_a_chunk_of_another_conversation_is_refused_whole(
    store: MemoryStore, user: str
) -> None:
    await _turns(store, user, "c1", 1)
    [through] = await store.conversations.pending_turns(user, "c1", 10)
    good = make_turn(user, "likes dogs", "", conversation_id="c1", kind="summary")
    stray = make_turn(user, "likes cats", "", conversation_id="c2", kind="summary")
    vectors = await store.embedder.embed_documents([good.text, stray.text])
    with pytest.raises(InvalidInputError, match="this conversation"):
        await store.conversations.store_chunk(
            user, "c1", [good, stray], vectors, through=through, dedup_threshold=0.95
        )
    with pytest.raises(InvalidInputError, match="vectors"):
        await store.conversations.store_chunk(
            user, "c1", [good], vectors, through=through, dedup_threshold=0.95
        )
    assert await store.conversations.pending_turns(user, "c1", 10) == [through]  # nothing stored
    assert await store.conversations.conversation_recent(user, "c1", kinds=("summary",)) == []


async def test_the_rolling_summary_round_trip(store: MemoryStore, user: str) -> None:
    assert await store.conversations.chat_summary(user, "c1") is None
    memory = await store.add_turn(user, "hello", "hi", conversation_id="c1")
    await store.conversations.set_chat_summary(
        user, "c1", "They said hello.", last_memory_id=memory.id
    )
    await store.conversations.set_chat_summary(
        user, "c1", "They said hello twice.", last_memory_id=memory.id
    )
    assert await store.conversations.chat_summary(user, "c1") == "They said hello twice."
    assert (
        await store.conversations.chat_summary(user, "c1", read=False) == "They said hello twice."
    )
    assert await store.conversations.chat_summary("someone-else", "c1") is None


async def test_search_defaults_come_from_the_settings(tuned: MemoryStore, user: str) -> None:
    for i in range(4):
        await tuned.add_turn(user, f"apples number {i}", "noted")
    found = await tuned.search(user, "apples")  # keyword mode, 2 results, no threshold
    assert len(found) == 2
    assert all(m.score is not None and m.score != m.similarity for m in found)
    # semantic mode with the settings' threshold 0.99 keeps only a near-identical text
    assert await tuned.search(user, "apples pears plums", mode="semantic") == []
    assert len(await tuned.search(user, "apples", 3, 0.0, mode="semantic")) == 3
    with pytest.raises(InvalidInputError, match="mode must be one of"):
        await tuned.search(user, "apples", mode="fuzzy")  # type: ignore[arg-type]


async def test_consolidation_defaults_come_from_the_settings(tuned: MemoryStore, user: str) -> None:
    # one word more: a cosine near 0.95 under the fake embedder, not 1
    near = {**DOG, "summary": "The user adopted a beagle named Max in early May."}
    model = FakeListChatModel(responses=[json.dumps(DOG), json.dumps(near)])
    await _turns(tuned, user, "c1", 5)
    result = await Consolidator(tuned, RunnableExtractor(model)).run(user, "c1")
    # chunks of 2 (settings.consolidation_chunk_size): two full chunks, one turn left;
    # dedup_threshold 1.0: the near-duplicate is a memory of its own
    assert (result.chunks, result.created, result.updated) == (2, 2, 0)
    assert await tuned.conversations.pending_conversations(user) == [
        PendingConversation(user, "c1", 1)
    ]

    # an explicit argument still wins over the settings
    closer = {**DOG, "summary": "The user adopted a beagle named Max in late May."}
    again = FakeListChatModel(responses=[json.dumps(closer)])
    worker = Consolidator(tuned, RunnableExtractor(again), chunk_size=1, dedup_threshold=0.9)
    assert (await worker.run(user, "c1")).updated == 1
