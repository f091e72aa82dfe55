"""A hostile-input corpus through every public entry point: each case gets a clear error or a
documented fallback (docs/decisions/0003-input-cleanup.md), and stored data stays intact."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from recall.config import RetrievalMode, Settings
from recall.errors import InvalidInputError
from recall.nodes import create_retrieve_memories_node, create_store_memories_node
from recall.nodes.keyword import create_keyword_search_node
from recall.nodes.tool import create_memory_search_tool
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

TEXTS: dict[str, str] = {
    "empty": "",
    "space": " ",
    "whitespace": "\t\n\r ",
    "nul": "\x00",
    "nul-inside": "a\x00b",
    "lone-high-surrogate": "\ud800",
    "lone-low-surrogate": "x\udfffy",
    "10mb": "y" * 10_000_000,
    "fts-operators": "&|!:*()'\"\\",
    "fts-phrase": "<->",
    "fts-phrase-words": "cats <-> dogs",
    "fts-prefix": "cat:*",
    "fts-negation": "!cat & !dog",
    "fts-weights": "cat:AB",
    "sql-drop": "'; DROP TABLE recall.memories; --",
    "sql-or": "1' OR '1'='1",
    "sql-comment": "/* */ -- x",
    "sql-dollar": "$$ SELECT 1 $$",
    "sql-param": "$1",
    "psycopg-named": "%(user_id)s",
    "psycopg-positional": "%s %b %t",
    "like-percent": "%",
    "like-underscore": "_",
    "backslashes": "\\\\\\",
    "format-braces": "{user} {0} {}",
    "pg-sleep": "SELECT pg_sleep(10);",
    "null-word": "NULL",
    "json": '{"user_id": "victim"}',
    "html": "<script>alert(1)</script>",
    "rtl-override": "\u202eevil",
    "zero-width": "\u200b\u200b",
    "combining": "e\u0301\u0301\u0301",
    "emoji": "🙂🐕‍🦺" * 50,
    "cjk": "我的狗叫麦克斯",
    "100-keywords": ";".join(f"kw{i}" for i in range(100)),
    "semicolons": ";" * 1000,
    "long-word": "w" * 10_000,
    "many-newlines": "\n" * 5000 + "end",
    "control-chars": "\x07\x08\x1b[31m",
    "crlf": "line1\r\nline2",
    "tab": "a\tb",
    "only-punctuation": "....,,,;;;",
}
STATES: dict[str, Any] = {
    "no-messages": {"messages": []},
    "messages-not-a-list": {"messages": "hello"},
    "state-none": None,
    "state-int": 5,
    "non-text-blocks": {"messages": [HumanMessage([{"type": "image_url", "image_url": {}}])]},
    "tool-and-system-only": {"messages": [SystemMessage("s"), ToolMessage("t", tool_call_id="1")]},
    "dict-blocks": {"messages": [HumanMessage([{"type": "text", "text": 42}])]},
}
CONFIGS: dict[str, Any] = {
    "config-none": None,
    "configurable-list": {"configurable": ["x"]},
    "user-int": {"configurable": {"langgraph_auth_user": 12}},
    "user-nested": {"configurable": {"langgraph_auth_user": {"identity": {"id": "x"}}}},
    "user-10kb": {"configurable": {"langgraph_auth_user": {"identity": "u" * 10_240}}},
}
WITNESS = "hostile-witness"


async def _checksum(store: MemoryStore) -> str:
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(
            b"SELECT id::text, user_message, ai_response, metadata::text, embedding::text "
            b"FROM recall.memories WHERE user_id = %s ORDER BY id",
            (WITNESS,),
        )
        rows = await cur.fetchall()
    assert rows, "the witness must have data"
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.fixture
async def witness(store: MemoryStore) -> str:
    await store.add_turn(WITNESS, "the witness memory must never change", "agreed")
    return await _checksum(store)


async def _outcome(call: Any) -> Any:
    """The call's result, or the InvalidInputError it raised (any other error propagates)."""
    try:
        return await call
    except InvalidInputError as exc:
        return exc


def cfg(user: str = "hostile-user") -> Any:
    return {"configurable": {"thread_id": "h", "langgraph_auth_user": {"identity": user}}}


@pytest.mark.parametrize("name", sorted(TEXTS))
async def test_text_through_every_entry_point(
    store: MemoryStore, witness: str, tmp_path: Path, name: str
) -> None:
    text = TEXTS[name]
    # store: stored with the documented clean-ups, or refused with InvalidInputError
    stored = await _outcome(store.add_turn("hostile-user", text, text))
    if isinstance(stored, InvalidInputError):
        assert "must not be empty" in str(stored)
    else:
        assert "\x00" not in stored.user_message
        assert len(stored.user_message) <= store.settings.max_message_length
        stored.user_message.encode("utf-8")  # no lone surrogate survives
    modes: tuple[RetrievalMode, ...] = ("semantic", "keyword", "hybrid")
    for mode in modes:
        found = await _outcome(
            store.search("hostile-user", text, mode=mode, similarity_threshold=0.0)
        )
        assert isinstance(found, list) or "query must not be empty" in str(found)
    assert isinstance(await store.keyword_search("hostile-user", text), list)
    # nodes and tool: never raise, always their documented output shape
    retrieve = create_retrieve_memories_node(store)
    out = await retrieve({"messages": [HumanMessage(text)]}, cfg())
    assert isinstance(out["retrieved_memories"], list)
    writer = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3")
    assert await writer({"messages": [HumanMessage(text), AIMessage(text or "x")]}, cfg()) == {}
    keyword_node = create_keyword_search_node(store)
    result = await keyword_node({"memory_keywords": text}, cfg())
    assert isinstance(result["memory_search_output"], str)
    tool_out = await create_memory_search_tool(store).ainvoke({"query": text}, cfg())
    assert isinstance(tool_out, str)
    assert await _checksum(store) == witness


@pytest.mark.parametrize("name", sorted(STATES))
async def test_bad_states(store: MemoryStore, witness: str, tmp_path: Path, name: str) -> None:
    state = STATES[name]
    assert await create_retrieve_memories_node(store)(state, cfg()) == {"retrieved_memories": []}
    writer = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3")
    assert await writer(state, cfg()) == {}
    assert await _checksum(store) == witness


@pytest.mark.parametrize("name", sorted(CONFIGS))
async def test_bad_configs(store: MemoryStore, witness: str, tmp_path: Path, name: str) -> None:
    config = CONFIGS[name]
    state = {"messages": [HumanMessage("a perfectly normal message"), AIMessage("ok")]}
    assert await create_retrieve_memories_node(store)(state, config) == {"retrieved_memories": []}
    writer = create_store_memories_node(store, queue_path=tmp_path / "q.sqlite3")
    assert await writer(state, config) == {}
    if isinstance(config, dict) and isinstance(config.get("configurable"), dict):
        # (LangChain itself refuses a config that is not a RunnableConfig before the tool runs)
        tool_out = await create_memory_search_tool(store).ainvoke(
            {"query": "normal"}, cast(RunnableConfig, config)
        )
        assert isinstance(tool_out, str) and "witness" not in tool_out
    assert await _checksum(store) == witness


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"blob": "z" * 100_000}, "bytes as JSON"),
        ({"k": "\x00"}, "NUL"),
        ({"k": float("inf")}, "JSON-serializable"),
        ({"k": {1, 2}}, "JSON-serializable"),
        ("not a mapping", "mapping"),
    ],
)
async def test_bad_metadata(store: MemoryStore, witness: str, metadata: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await store.add_turn("hostile-user", "hello there", "hi", metadata=metadata)
    assert await _checksum(store) == witness


async def test_deeply_nested_metadata(store: MemoryStore, witness: str) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50_000):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        await store.add_turn("hostile-user", "hello there", "hi", metadata=deep)
    assert await _checksum(store) == witness


def test_corpus_size() -> None:
    assert len(TEXTS) + len(STATES) + len(CONFIGS) + 6 >= 50


HOSTILE_IDS = ["sql-drop", "sql-or", "sql-dollar", "sql-param", "psycopg-named",
               "psycopg-positional", "backslashes", "like-percent", "fts-operators"]  # fmt: skip


async def test_hostile_user_ids_with_their_own_hnsw_index(databases: Databases) -> None:
    """The indexed search builds its statement for one user (migration 0010): a user id that
    looks like SQL stays a literal, and finds that user's memories and nobody else's."""
    url = await databases.create()
    settings = Settings(database_url=url, embedding_cache_ttl=0, user_index_threshold=30)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(16)) as s:
        await s.add_turns(
            {"user_id": uid, "user_message": f"note {j} of {uid}", "ai_response": "ok"}
            for uid in [TEXTS[n] for n in HOSTILE_IDS] + [WITNESS]
            for j in range(40)
        )
        indexed = await s.optimize()
        assert sorted(indexed) == sorted([TEXTS[n] for n in HOSTILE_IDS] + [WITNESS])
        for name in HOSTILE_IDS:
            uid = TEXTS[name]
            hits = await s.search(uid, f"note 7 of {uid}", similarity_threshold=0.0)
            assert len(hits) == 3, name
            assert all(h.user_message.endswith(f" of {uid}") for h in hits), name
            assert s.core.plans[uid][1] is not None, name  # it went through its own index
        async with s.connection(all_users=True) as conn:
            cur = await conn.execute(b"SELECT count(*) FROM recall.memories")
            assert await cur.fetchone() == ((len(HOSTILE_IDS) + 1) * 40,)
