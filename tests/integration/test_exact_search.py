"""Per-user search returns what an exact search over that user's memories returns.

The table is made large and the planner pushed toward the HNSW index (a global index exists,
sorting is disabled), the worst case: a naive `WHERE user_id = ... ORDER BY distance` query then
goes through the global index and loses results. `MemoryStore.search` must not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, sql

from recall.config import Settings
from recall.db.pool import connect_once
from recall.db.sql import query
from recall.db.userindex import index_name
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import CITUS, Databases, explain_indexed_search

DIMS = 64
BIG_USER = "big-user"
BIG_ROWS = 4000
SMALL_USERS = 150
INDEX_THRESHOLD = 3000


@dataclass
class Corpus:
    store: MemoryStore
    url: str
    vectors: dict[str, np.ndarray]
    ids: dict[str, list[str]]
    centers: np.ndarray


def _unit(rows: np.ndarray) -> np.ndarray:
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


@pytest.fixture(scope="module")
async def corpus(databases: Databases) -> AsyncIterator[Corpus]:
    rng = np.random.default_rng(7)
    centers = _unit(rng.normal(size=(40, DIMS)))
    sizes = {BIG_USER: BIG_ROWS}
    sizes.update({f"small-{i}": int(rng.integers(20, 300)) for i in range(SMALL_USERS)})
    vectors = {
        u: _unit(centers[rng.integers(0, 40, n)] + 0.35 * rng.normal(size=(n, DIMS))).astype(
            np.float32
        )
        for u, n in sizes.items()
    }
    url = await databases.create()
    settings = Settings(database_url=url, user_index_threshold=INDEX_THRESHOLD)
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(DIMS)) as loader:
        ids = {}
        for u, vecs in vectors.items():
            ids[u] = await loader.add_turns(
                {
                    "user_id": u,
                    "user_message": f"memory {j} of {u}",
                    "ai_response": "ok",
                    "embedding": vecs[j],
                }
                for j in range(len(vecs))
            )
    conn = await connect_once(url)
    try:
        # the trap: a global HNSW index, as LangGraph's store has, and a planner that avoids sorts
        await conn.execute(
            b"CREATE INDEX memories_global_hnsw ON recall.memories "
            b"USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        dbname = conn.info.dbname
        await conn.execute(
            sql.SQL("ALTER DATABASE {} SET enable_sort = off").format(sql.Identifier(dbname))
        )
    finally:
        await conn.close()
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(DIMS)) as store:
        yield Corpus(store, url, vectors, ids, centers)


def _exact(corpus: Corpus, user: str, q: np.ndarray, k: int, threshold: float) -> list[str]:
    sims = corpus.vectors[user] @ q
    order = np.argsort(-sims, kind="stable")
    return [corpus.ids[user][j] for j in order[:k] if sims[j] >= threshold]


async def _index_scans(conn: AsyncConnection[Any], name: str) -> int:
    await conn.execute(b"SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(
        b"SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", [name]
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


def _queries(corpus: Corpus, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = corpus.centers[rng.integers(0, len(corpus.centers), n)]
    return _unit(picks + 0.3 * rng.normal(size=(n, DIMS))).astype(np.float32)


async def test_naive_filtered_query_uses_the_global_index_and_loses_results(
    corpus: Corpus,
) -> None:
    """Guards the test itself: the trap is real on this table."""
    short = 0
    async with corpus.store.connection(all_users=True) as conn:
        for i, q in enumerate(_queries(corpus, 30, seed=1)):
            user = f"small-{i}"
            params = {"user_id": user, "q": q}
            plan = await conn.execute(
                b"EXPLAIN SELECT id FROM recall.memories WHERE user_id = %(user_id)s "
                b"ORDER BY embedding <=> %(q)s LIMIT 3",
                params,
            )
            assert "memories_global_hnsw" in str(await plan.fetchall())
            cur = await conn.execute(
                b"SELECT id FROM recall.memories WHERE user_id = %(user_id)s "
                b"ORDER BY embedding <=> %(q)s LIMIT 3",
                params,
            )
            if len(await cur.fetchall()) < 3:
                short += 1
    assert short > 0


@pytest.mark.parametrize("threshold", [0.0, 0.5])
async def test_small_users_get_exactly_the_brute_force_results(
    corpus: Corpus, threshold: float
) -> None:
    for i, q in enumerate(_queries(corpus, SMALL_USERS, seed=2)):
        user = f"small-{i}"
        hits = await corpus.store.search(
            user, "q", limit=3, similarity_threshold=threshold, mode="semantic", query_vector=q
        )
        assert [h.id for h in hits] == _exact(corpus, user, q, 3, threshold), user


async def test_a_large_user_is_exact_before_and_uses_its_own_hnsw_index_after(
    corpus: Corpus,
) -> None:
    queries = _queries(corpus, 100, seed=3)
    store = corpus.store
    # before its index exists: the exact plan. The first search schedules the index's build
    # in the background, and once it is built the user's plan is the index: exactness is
    # checked for every search made while the cached plan has no index (no await lies between
    # this check and the search's own reading of the cached plan), and the first always is.
    # A finished build drops the cached plan, so after the first search no cached plan means
    # the next search reads the plan anew and may go through the index: the checks end there.
    exact_checked = 0
    for n, q in enumerate(queries[:20]):
        in_use = store.core.plans.get(BIG_USER)
        if n > 0 and (in_use is None or in_use.hnsw_index is not None):
            break
        hits = await store.search(
            BIG_USER, "q", limit=3, similarity_threshold=0.0, mode="semantic", query_vector=q
        )
        assert [h.id for h in hits] == _exact(corpus, BIG_USER, q, 3, 0.0)
        exact_checked += 1
    assert exact_checked >= 1

    await store.wait_for_index_builds()  # the search above scheduled the build; wait for it
    assert await store.optimize() == []  # already built by the background task
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(query("user_plan"), {"user_id": BIG_USER})
        assert await cur.fetchone() == (BIG_ROWS, index_name(BIG_USER))
        params = {"user_id": BIG_USER, "query": queries[0], "limit": 3, "max_distance": 1.0,
                  "candidates": 100}  # fmt: skip
        if not CITUS:  # on Citus the plan and the index's counters are the worker's shard's
            # the partial index, not the global one the planner would otherwise take
            plan = await explain_indexed_search(conn, params)
            assert index_name(BIG_USER) in plan and "memories_global_hnsw" not in plan

    if not CITUS:
        await _reads_its_own_index(corpus, params)
    found = total = 0
    for q in queries:
        hits = await store.search(
            BIG_USER, "q", limit=3, similarity_threshold=0.0, mode="semantic", query_vector=q
        )
        expected = _exact(corpus, BIG_USER, q, 3, 0.0)
        assert len(hits) == 3
        found += len({h.id for h in hits} & set(expected))
        total += 3
    assert found / total >= 0.99


async def _reads_its_own_index(corpus: Corpus, params: dict[str, Any]) -> None:
    """The indexed search function's own run reads the user's index: one scan per search."""
    owner = await connect_once(corpus.url)
    try:
        await register_vector_async(owner)
        before = await _index_scans(owner, index_name(BIG_USER))
        async with owner.transaction():
            await owner.execute(b"SELECT pg_stat_force_next_flush()")  # at this COMMIT
            cur = await owner.execute(query("search_indexed"), params)
            rows = await cur.fetchall()
        assert await _index_scans(owner, index_name(BIG_USER)) == before + 1
    finally:
        await owner.close()
    assert len(rows) == 3 and {str(r[0]) for r in rows} <= set(corpus.ids[BIG_USER])
    assert [r[7] for r in rows] == sorted(r[7] for r in rows)


async def test_erasing_a_large_user_drops_their_index(corpus: Corpus) -> None:
    store = corpus.store
    await store.add_turns(
        {"user_id": "erased-big", "user_message": f"m {j}", "ai_response": "ok", "embedding": v}
        for j, v in enumerate(_queries(corpus, INDEX_THRESHOLD, seed=4))
    )
    assert await store.optimize() == ["erased-big"]
    assert await store.forget_user("erased-big") == INDEX_THRESHOLD
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(query("index_is_valid"), {"index_name": index_name("erased-big")})
        assert await cur.fetchone() is None


async def test_search_functions_plan_once_for_every_user(corpus: Corpus) -> None:
    """Migration 0008: one generic plan, not a plan per call for each user's size. The
    searches above (users of 20 to 4,000 rows on the same connections) stay exact with it."""
    async with corpus.store.connection(all_users=True) as conn:
        cur = await conn.execute(
            b"SELECT proname, proconfig FROM pg_proc WHERE pronamespace = 'recall'::regnamespace"
            b" AND proname IN ('search_exact', 'search_keyword') ORDER BY proname"
        )
        rows = await cur.fetchall()
    # (their other setting is migration 0017's search_path)
    assert [
        (name, [c for c in config if c.startswith("plan_cache_mode=")]) for name, config in rows
    ] == [
        ("search_exact", ["plan_cache_mode=force_generic_plan"]),
        ("search_keyword", ["plan_cache_mode=force_generic_plan"]),
    ]


async def test_a_large_users_scope_is_the_ids_their_searches_return(corpus: Corpus) -> None:
    """Migration 0037: the scoped call's nearest (`recall.search_scope`, ids only) are the ids
    `recall.search_indexed` and `recall.search_exact` return, in their order, through the
    user's own index or exactly (here too, with a global index and sorts disabled), and an
    indexed scope reads the user's own index once. Read through the store's own statement
    (`search_scoped`: the details of the first 60 nearest, numbered), as the store calls it:
    on Citus, the call runs on the user's worker."""
    await corpus.store.wait_for_index_builds()
    await corpus.store.optimize()  # the big user's index is built, here if not before
    owner = await connect_once(corpus.url)
    try:
        await register_vector_async(owner)
        asked = [(BIG_USER, True, q) for q in _queries(corpus, 20, seed=5)]
        asked += [(BIG_USER, False, q) for q in _queries(corpus, 5, seed=6)]
        asked += [("small-3", False, _queries(corpus, 1, seed=7)[0])]
        for user, indexed, q in asked:
            args = {"user_id": user, "query": q, "limit": 60, "candidates": 60}
            statement = (
                b"SELECT id FROM recall.search_indexed(%(user_id)s, %(query)s, 2.0, %(limit)s,"
                b" %(candidates)s)"
                if indexed
                else b"SELECT id FROM recall.search_exact(%(user_id)s, %(query)s, 2.0, %(limit)s)"
            )
            cur = await owner.execute(statement, args)
            expected = [r[0] for r in await cur.fetchall()]
            cur = await owner.execute(query("search_scoped"), {
                "user_id": user, "query": q, "scope": 60, "candidates": 60, "indexed": indexed,
                "tsquery": None, "words": [], "near": 60, "best": 0, "vectors": False})  # fmt: skip
            near = sorted((r[1], r[2]) for r in await cur.fetchall() if r[0] == 2)
            assert [i for _n, i in near] == expected, (user, indexed)
            assert len(expected) == min(60, len(corpus.ids[user]))
        if not CITUS:  # on Citus the index's counters are the worker's shard's
            await owner.execute(b"SELECT pg_stat_force_next_flush()")  # the scans above
            before = await _index_scans(owner, index_name(BIG_USER))
            async with owner.transaction():
                await owner.execute(b"SELECT pg_stat_force_next_flush()")  # at this COMMIT
                await owner.execute(
                    b"SELECT recall.search_scope(%s, %s, 60, 60, true)", [BIG_USER, q]
                )
            assert await _index_scans(owner, index_name(BIG_USER)) == before + 1
    finally:
        await owner.close()
