"""No read path ever returns another user's memory (property-based, adversarial user ids)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from recall.config import RetrievalMode, Settings
from recall.errors import InvalidInputError
from recall.nodes import create_retrieve_memories_node
from recall.nodes.context import create_recent_memories_node
from recall.nodes.keyword import create_keyword_search_node
from recall.nodes.tool import create_memory_search_tool
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

ADVERSARIAL = [
    "john_doe", "john-doe", "john%doe", "%", "_", "\\", "\\\\", "'", "''", '"', "a'; --",
    "jöhn", "j\u043ehn",  # Cyrillic o: a look-alike of "john"
    "JOHN", "john ", " john", "john\t", "u" * 512, "🙂", "NULL", "*", "a:b", "a|b", "()",
]  # fmt: skip
WORDS = ["apple", "river", "secret", "dog", "max", "blue", "door", "piano", "train", "salt"]

OWNER: dict[str, str] = {}  # memory id -> user, over all examples


@pytest.fixture(scope="module")
async def iso_store(databases: Databases) -> AsyncIterator[MemoryStore]:
    """A database of its own: the property test stores bare ids ("u", "john_doe", ...)
    that the session database's other tests are free to use."""
    url = await databases.create("recall_iso")
    async with MemoryStore.connect(
        Settings(database_url=url, embedding_cache_ttl=0), embeddings=FakeEmbeddings(64)
    ) as s:
        yield s


def cfg(user: str, thread: str = "iso-thread") -> Any:
    return {"configurable": {"thread_id": thread, "langgraph_auth_user": {"identity": user}}}


async def every_read(store: MemoryStore, user: str, text: str, tmp: Path) -> list[list[str]]:
    """Memory ids (or texts, for string outputs) each read path returns for `user`."""
    out = []
    modes: tuple[RetrievalMode, ...] = ("semantic", "keyword", "hybrid")
    for mode in modes:
        hits = await store.search(user, text, limit=50, similarity_threshold=0.0, mode=mode)
        out.append([m.id for m in hits])
    out.append([m.id for m in await store.keyword_search(user, text.replace(" ", ";"), limit=50)])
    out.append([m.id for m in await store.recent(user, 50)])
    node = create_retrieve_memories_node(store, limit=50, similarity_threshold=0.0)
    found = await node({"messages": [HumanMessage(text)]}, cfg(user))
    out.append([m["id"] for m in found["retrieved_memories"]])
    return out


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.sampled_from(ADVERSARIAL), st.text(min_size=1, max_size=12)),
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=6,
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
)
async def test_results_always_belong_to_the_caller(
    iso_store: MemoryStore, tmp_path: Path, rows: list[tuple[str, list[str]]], query: list[str]
) -> None:
    store = iso_store
    users = set()
    for user, words in rows:
        text = " ".join(words) + " memory"
        try:
            memory = await store.add_turn(user, text, "stored " + " ".join(words))
        except InvalidInputError:
            continue  # a blank or unencodable id is refused, never stored
        OWNER[memory.id] = user
        users.add(user)
    for user in users:
        for ids in await every_read(store, user, " ".join(query), tmp_path):
            assert all(OWNER.get(i, user) == user for i in ids), (user, ids)
            assert all(i in OWNER for i in ids)


async def test_string_outputs_hold_only_the_callers_text(store: MemoryStore) -> None:
    # Look-alike ids made unique to this test: the property test above may already have
    # stored memories (with the same words) for bare ids such as "john_doe".
    tag = uuid.uuid4().hex[:8]
    base, dash, wild = f"john_doe{tag}", f"john-doe{tag}", f"john%{tag}"
    await store.add_turn(base, "my piano lesson is on friday", "ok", conversation_id="t")
    await store.add_turn(dash, "the other john keeps a piano secret", "ok", conversation_id="t")
    await store.add_turn(wild, "wildcard john piano diary", "ok", conversation_id="t")
    tool = create_memory_search_tool(store)
    keyword_node = create_keyword_search_node(store)
    recent_node = create_recent_memories_node(store, n=10)
    for user, own in [(base, "friday"), (dash, "secret"), (wild, "wildcard")]:
        others = {"friday", "secret", "wildcard"} - {own}
        outputs = [
            await tool.ainvoke({"query": "piano", "max_results": 50}, cfg(user, "t")),
            (await keyword_node({"memory_keywords": "piano"}, cfg(user, "t")))[
                "memory_search_output"
            ],
            " ".join(
                (
                    await recent_node(
                        {"messages": [HumanMessage("x"), AIMessage("y")]}, cfg(user, "t")
                    )
                )["recent_memories"]
            ),
        ]
        for text in outputs:
            assert own in text, (user, text)
            assert not any(word in text for word in others), (user, text)


async def test_a_10kb_id_is_refused_everywhere(store: MemoryStore) -> None:
    huge = "x" * 10_240
    with pytest.raises(InvalidInputError):
        await store.add_turn(huge, "hello there", "hi")
    with pytest.raises(InvalidInputError):
        await store.search(huge, "hello")
    node = create_retrieve_memories_node(store)
    assert await node({"messages": [HumanMessage("hello")]}, cfg(huge)) == {
        "retrieved_memories": []
    }
