"""Issue 37 on a real database: the writer records what was retrieved for a turn, a repeated
turn is counted instead of stored, and a search shows a source before its restatements."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from recall.config import Settings
from recall.memory import Memory
from recall.nodes import create_store_memories_node
from recall.search.judging import RULE
from recall.search.provenance import KEY, Provenance, provenance_of, repeats_of
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings

FACT = "I drive a Toyota Prius to work every day."
QUESTION = "What car do I drive?"
RESTATED = "You drive a Toyota Prius to work every day."


def cfg(user: str, thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "langgraph_auth_user": user}}


def retrieved(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "user_message": m.user_message, "ai_response": m.ai_response}


@pytest.fixture
async def plain_store(settings: Settings) -> AsyncIterator[MemoryStore]:
    """A store with issue 37 off: today's ranking and writes."""
    off = dataclasses.replace(settings, sources_first=False, link_repeated_turns=False)
    async with MemoryStore.connect(off, embeddings=FakeEmbeddings(64)) as s:
        yield s


async def test_the_writer_records_what_was_retrieved_and_quoted(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    fact = await store.add_turn(user, FACT, "Noted.")
    other = await store.add_turn(user, "I live in Portland.", "Noted.")
    node = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3", wait_s=10.0)
    state = {
        "messages": [HumanMessage(QUESTION), AIMessage(RESTATED)],
        "retrieved_memories": [retrieved(fact), retrieved(other)],
    }
    await node(state, cfg(user, "t2"))
    [newest, *_] = await store.recent(user, 1)
    assert newest.user_message == QUESTION
    provenance = Provenance.of(newest.metadata)
    # the reply's one sentence restates the fact: nothing of it is its own (decision 0038)
    own = Provenance((fact.id, other.id), (fact.id,), True, own="", own_judged=True)
    assert provenance == own


async def test_a_turn_without_retrieved_memories_has_no_provenance(
    store: MemoryStore, user: str, tmp_path: Path
) -> None:
    node = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3", wait_s=10.0)
    await node({"messages": [HumanMessage(FACT), AIMessage("Noted.")]}, cfg(user, "t1"))
    [stored] = await store.recent(user, 5)
    assert Provenance.of(stored.metadata) is None
    assert stored.metadata == {KEY: {"holds": "statement", "rule": RULE}}  # judged (0049)


async def test_a_queued_turn_keeps_its_provenance(store: MemoryStore, user: str) -> None:
    fact = await store.add_turn(user, FACT, "Noted.")
    # the drainer writes a queued turn as its queue entry says, provenance as a dict
    p = Provenance((fact.id,), (fact.id,), True)
    await store.add_turn(user, QUESTION, RESTATED, conversation_id="t2", provenance=p.as_dict())
    [newest, *_] = await store.recent(user, 1)
    assert Provenance.of(newest.metadata) == p


async def test_a_repeated_turn_is_counted_on_the_memory_it_repeats(
    store: MemoryStore, user: str
) -> None:
    first = await store.add_turn(user, FACT, "Noted.", conversation_id="a")
    again = await store.add_turn(user, FACT, "Noted.", conversation_id="b")
    third = await store.add_turn(user, FACT, "Noted.", conversation_id="c")
    assert again.id == first.id == third.id
    [stored] = await store.recent(user, 5)
    assert repeats_of(stored.metadata) == 2
    assert stored.metadata[KEY]["last_seen"]
    # the same turn again (a retry: same conversation, same texts) is not a repeat
    await store.add_turn(user, FACT, "Noted.", conversation_id="a")
    [stored] = await store.recent(user, 5)
    assert repeats_of(stored.metadata) == 2


async def test_a_turn_that_adds_a_word_is_stored(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, FACT, "Noted.", conversation_id="a")
    await store.add_turn(user, FACT, "Noted, a hybrid.", conversation_id="b")
    await store.add_turn(user, "I do not drive a Toyota Prius to work every day.", "Noted.")
    assert len(await store.recent(user, 5)) == 3


async def test_a_repeat_replaces_what_is_not_provenance_under_its_key(
    store: MemoryStore, user: str
) -> None:
    await store.add_turn(user, FACT, "Noted.", conversation_id="a", metadata={KEY: "mine"})
    await store.add_turn(user, FACT, "Noted.", conversation_id="b")
    [stored] = await store.recent(user, 5)
    assert repeats_of(stored.metadata) == 1


async def test_linking_repeats_can_be_turned_off(plain_store: MemoryStore, user: str) -> None:
    await plain_store.add_turn(user, FACT, "Noted.", conversation_id="a")
    await plain_store.add_turn(user, FACT, "Noted.", conversation_id="b")
    assert len(await plain_store.recent(user, 5)) == 2


async def test_a_repeat_of_a_deleted_memory_is_stored(store: MemoryStore, user: str) -> None:
    first = await store.add_turn(user, FACT, "Noted.", conversation_id="a")
    assert await store.delete(user, first.id)
    again = await store.add_turn(user, FACT, "Noted.", conversation_id="b")
    assert again.id != first.id
    assert [m.id for m in await store.recent(user, 5)] == [again.id]


async def _restated(store: MemoryStore, user: str) -> tuple[Memory, list[Memory]]:
    fact = await store.add_turn(user, FACT, "Noted.", conversation_id="t1")
    restatements = []
    for n in range(3):
        p = Provenance((fact.id,), (fact.id,), True)
        restatements.append(
            await store.add_turn(
                user, QUESTION, f"{RESTATED} ({n})", conversation_id=f"t{n + 2}", provenance=p
            )
        )
    return fact, restatements


async def test_a_search_shows_the_source_once_before_its_restatements(
    store: MemoryStore, plain_store: MemoryStore, user: str
) -> None:
    fact, restatements = await _restated(store, user)
    found = await store.search(user, QUESTION, mode="semantic", similarity_threshold=0.0)
    ids = [m.id for m in found]
    assert ids[0] == fact.id
    assert not set(ids) & {r.id for r in restatements}
    # judged restatements when written (decision 0049): no search answers with them, with the
    # post-step or without, and they stay stored
    before = await plain_store.search(user, QUESTION, mode="semantic", similarity_threshold=0.0)
    assert not {m.id for m in before} & {r.id for r in restatements}
    assert {r.metadata[KEY]["holds"] for r in restatements} == {"restatement"}
    assert len(await store.recent(user, 10)) == 4


async def test_the_newest_statement_on_a_slot_comes_first(store: MemoryStore, user: str) -> None:
    fact, _restatements = await _restated(store, user)
    new = await store.add_turn(user, "I sold the Prius, I drive a Tesla now.", "Noted.")
    found = await store.search(user, QUESTION, mode="semantic", similarity_threshold=0.0)
    ids = [m.id for m in found]
    assert ids[:2] == [new.id, fact.id]


async def test_a_statement_judged_to_update_a_memory_comes_before_it(
    store: MemoryStore, user: str
) -> None:
    """Issue 54: the writer judges which memory a statement states anew (its `supersedes`,
    from the memories retrieved for it); the newer comes first when both are found, however
    near the message the older one is."""
    fact = await store.add_turn(user, "My sister Priya just moved to Lisbon.", "Noted.")
    retrieved = [{"id": fact.id, "user_message": fact.user_message, "ai_response": "Noted."}]
    text = "Update: Priya moved again, she's in Porto now."
    provenance = provenance_of(text, "Noted.", retrieved)
    assert provenance is not None and provenance.supersedes == fact.id
    new = await store.add_turn(user, text, "Noted.", provenance=provenance)
    found = await store.search(user, fact.user_message, mode="semantic", similarity_threshold=0)
    assert [m.id for m in found] == [new.id, fact.id]  # the older is the message itself


async def test_links_show_a_memorys_sources_and_restatements(store: MemoryStore, user: str) -> None:
    fact, restatements = await _restated(store, user)
    links = await store.links(user, fact.id)
    assert links is not None
    assert [m.id for m in links.restatements] == [r.id for r in restatements]
    assert links.sources == []
    back = await store.links(user, restatements[0].id)
    assert back is not None and [m.id for m in back.sources] == [fact.id]
    assert await store.links("someone-else", fact.id) is None


async def test_erasing_a_source_does_not_bring_back_its_restatements_and_the_links_say_so(
    store: MemoryStore, user: str
) -> None:
    """Deleting a memory does not delete the turns that restate it: their provenance keeps its
    id, and the inspector's links name the id as erased. They hold nothing of their own
    (judged when written, decision 0049), so no search answers with them: the erased fact does
    not come back through its restatements."""
    fact, restatements = await _restated(store, user)
    assert await store.delete(user, fact.id)
    for mode in ("semantic", "hybrid", "keyword"):
        found = await store.search(user, QUESTION, mode=mode, similarity_threshold=0.0)
        assert not {m.id for m in found} & {r.id for r in restatements}
    links = await store.links(user, restatements[0].id)
    assert links is not None
    assert (links.sources, links.erased) == ([], [fact.id])
    # a memory whose sources are stored has none erased
    kept = await store.add_turn(user, "I live in Portland.", "Noted.")
    p = Provenance((kept.id, fact.id), (kept.id,), True)
    again = await store.add_turn(user, "Where do I live?", "In Portland.", provenance=p)
    links = await store.links(user, again.id)
    assert links is not None
    assert ([m.id for m in links.sources], links.erased) == ([kept.id], [fact.id])


async def test_a_repeat_is_found_for_a_user_with_an_index_of_their_own(
    store: MemoryStore, user: str
) -> None:
    """recall.add_turn (migration 0019) looks for the repeat through the user's own HNSW index
    once they have one, as a search does."""
    async with MemoryStore.connect(
        store.settings.replace(user_index_threshold=3), embeddings=store.embedder.embeddings
    ) as small:
        for n in range(4):
            await small.add_turn(user, f"unrelated fact number {n} about pears", "ok")
        await small.search(user, "pears", similarity_threshold=0.0)  # schedules the build
        await small.wait_for_index_builds()
        small.core.plans.pop(user, None)
        await small.search(user, "pears", similarity_threshold=0.0)  # reads the plan again
        assert small.core.plans[user].hnsw_index is not None
        first = await small.add_turn(user, FACT, "Noted.", conversation_id="a")
        again = await small.add_turn(user, FACT, "Noted.", conversation_id="b")
        assert again.id == first.id
        assert repeats_of(again.metadata) == 1
        other = await small.add_turn(user, "I drive a Tesla to work every day.", "Noted.")
        assert other.id != first.id


async def test_a_turn_with_no_near_memory_is_stored_in_one_call(
    store: MemoryStore, user: str
) -> None:
    """Issue 37: the repeat lookup rides on the insert's call (recall.add_turn)."""
    await store.add_turn(user, "I live in Portland.", "Noted.")
    calls: list[str] = []
    original = store.core.conn

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return original(*args, **kwargs)

    store.core.conn = counting  # type: ignore[method-assign]
    try:
        fact = await store.add_turn(user, FACT, "Noted.")
        assert calls == ["add_turn"]
        calls.clear()
        assert (await store.add_turn(user, FACT, "Noted.")).id == fact.id  # a retry: one call
        assert calls == ["add_turn"]
    finally:
        del store.core.conn
    assert len(await store.recent(user, 5)) == 2
