"""Every search touches one user's rows only (EXPLAIN), and searches can go to a replica.

This is what lets the memories table be distributed by user_id (docs/scaling.md): each query
routes to the shard that holds the user.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from recall.config import Settings
from recall.db.sql import query
from recall.db.userindex import index_name
from recall.search.keywords import keywords_from_text, parse_keywords
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases, explain_indexed_search

USER = "plan-user"


def _scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan] if "Relation Name" in plan else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _assert_one_user(plan_rows: list[Any]) -> list[str]:
    plan = plan_rows[0][0][0]["Plan"] if isinstance(plan_rows[0][0], list) else plan_rows[0][0]
    touched = []
    for scan in _scans(plan):
        if scan["Relation Name"] not in ("memories", "users", "progress", "summaries"):
            continue
        conditions = " ".join(
            str(scan.get(k, "")) for k in ("Index Cond", "Filter", "Recheck Cond")
        )
        by_partial_index = scan.get("Index Name", "").startswith("memories_hnsw_u_")
        assert by_partial_index or f"user_id = '{USER}'" in conditions, scan
        touched.append(f"{scan['Node Type']} on {scan['Relation Name']}")
    assert touched
    return touched


@pytest.fixture(scope="module")
async def plan_store(databases: Databases) -> Any:
    url = await databases.create()
    settings = Settings(database_url=url, user_index_threshold=200, read_database_url=url)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(32)) as store:
        rng = np.random.default_rng(3)
        for user, n in ((USER, 300), ("someone-else", 300)):
            await store.add_turns(
                {"user_id": user, "user_message": f"note {i} about apples", "ai_response": "ok",
                 "conversation_id": "c", "embedding": rng.normal(size=32)}
                for i in range(n)
            )  # fmt: skip
        async with store.connection(all_users=True) as conn:
            await conn.execute(b"ANALYZE recall.memories")
        yield store


async def _explain(store: MemoryStore, name: str, params: dict[str, Any]) -> list[Any]:
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(b"EXPLAIN (FORMAT JSON) " + query(name), params, prepare=False)
        rows = await cur.fetchall()
    return [[json.loads(r[0]) if isinstance(r[0], str) else r[0]] for r in rows]


async def _function_query(store: MemoryStore, function: str) -> bytes:
    """The statement inside a plpgsql search function, with its arguments as parameters."""
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(
            b"SELECT p.prosrc FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            b" WHERE n.nspname = 'recall' AND p.proname = %s",
            [function],
        )
        row = await cur.fetchone()
    assert row is not None
    body = str(row[0]).split("RETURN QUERY", 1)[1].split(";", 1)[0]
    return re.sub(r"\bp_(\w+)\b", r"%(\1)s", body).encode()


async def test_every_search_plan_reads_one_user(plan_store: MemoryStore) -> None:
    vector = np.ones(32, dtype=np.float32)
    kw = keywords_from_text("apples and pears")
    common = {"user_id": USER, "query": vector, "limit": 3, "max_distance": 1.0,
              "candidates": 100}  # fmt: skip
    keyword = {"user_id": USER, "tsquery": kw.tsquery, "words": kw.words, "query": vector,
               "limit": 3, "conversation_id": None}  # fmt: skip
    cases: dict[str, dict[str, Any]] = {
        "recent": {"user_id": USER, "limit": 5},
        "user_plan": {"user_id": USER},
    }  # fmt: skip
    for name, params in cases.items():
        _assert_one_user(await _explain(plan_store, name, params))
    # the two searches are functions (one round trip); their statements are checked the same way
    for function, params in (("search_exact", common), ("search_keyword", keyword)):
        body = await _function_query(plan_store, function)
        async with plan_store.connection(all_users=True) as conn:
            cur = await conn.execute(b"EXPLAIN (FORMAT JSON) " + body, params, prepare=False)
            plan_rows = await cur.fetchall()
        _assert_one_user([[json.loads(r[0]) if isinstance(r[0], str) else r[0]] for r in plan_rows])
    # the large user's indexed plan (the statement recall.search_indexed runs) uses its own
    # partial index
    assert sorted(await plan_store.optimize()) == sorted([USER, "someone-else"])
    async with plan_store.connection(all_users=True) as conn:
        plan = await explain_indexed_search(conn, common)
    touched = _assert_one_user([json.loads(plan)])
    assert any("Index Scan on memories" in t for t in touched)
    assert index_name(USER) in plan


async def test_searches_use_the_read_pool_when_set(plan_store: MemoryStore) -> None:
    assert plan_store.read_pool is not plan_store.pool
    before = plan_store.read_pool.get_stats().get("requests_num", 0)
    writes_before = plan_store.pool.get_stats().get("requests_num", 0)
    await plan_store.search(USER, "apples", mode="hybrid", similarity_threshold=0.0)
    await plan_store.keyword_search(USER, "apples")
    await plan_store.recent(USER)
    assert plan_store.read_pool.get_stats().get("requests_num", 0) >= before + 4
    assert plan_store.pool.get_stats().get("requests_num", 0) == writes_before
    assert parse_keywords("apples").keywords == (("apples",),)


async def test_the_one_call_search_matches_the_scoped_one_and_keeps_the_callers_key(
    plan_store: MemoryStore,
) -> None:
    other = "someone-else"
    vector = np.linspace(-1.0, 1.0, 32, dtype=np.float32)
    plan_store.core.plans.clear()
    first = await plan_store.search(other, "q", similarity_threshold=0.0, query_vector=vector)
    assert other in plan_store.core.plans  # the next search takes the one-call path
    again = await plan_store.search(other, "q", similarity_threshold=0.0, query_vector=vector)
    assert [m.id for m in again] == [m.id for m in first] and len(first) == 3
    kw = keywords_from_text("apples")
    async with plan_store.connection(USER) as conn:
        cur = await conn.execute(
            query("search_exact"),
            {"user_id": other, "query": vector, "max_distance": 2.0, "limit": 3},
        )
        assert [str(r[0]) for r in await cur.fetchall()] == [m.id for m in first]
        cur = await conn.execute(
            query("search_keyword"),
            {"user_id": other, "tsquery": kw.tsquery, "words": kw.words, "query": None,
             "limit": 3, "conversation_id": None},
        )  # fmt: skip
        assert len(await cur.fetchall()) == 3  # the other user's rows, by its own key
        cur = await conn.execute(b"SELECT current_setting('recall.user_id', true)")
        assert await cur.fetchone() == (USER,)  # the caller's scope is back
        cur = await conn.execute(b"SELECT count(DISTINCT user_id) FROM recall.memories")
        assert await cur.fetchone() == (1,)  # and it still sees one user only
