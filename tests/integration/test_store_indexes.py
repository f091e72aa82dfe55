"""RecallStore's HNSW indexes (migration 0015): a large namespace's own, the one over every
namespace for wide prefixes; built when asked or when a search meets them, and answering as the
exact scan does (the conformance suite, tests/integration/basestore, runs on both plans)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import numpy as np
import pytest
from langgraph.store.base import IndexConfig, PutOp, SearchOp
from psycopg import sql
from structlog.testing import capture_logs

from recall import RecallStore
from recall.basestore import planning
from recall.config import Settings
from recall.db import items as items_module
from recall.db.calibration import calibrate_index, record_breadth
from recall.db.filters import compile_filter
from recall.db.items import SearchPlan
from recall.db.pool import connect_once
from recall.db.rls import as_owner
from recall.db.sql import run as run_sql
from recall.db.storeindex import Breadth, store_index_name
from recall.errors import StoreError
from tests.conftest import ROOT, Databases

DIMS = 32


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    v = np.random.default_rng(seed).normal(size=DIMS)
    return [float(x) for x in v / np.linalg.norm(v)]


async def _embed(texts: Sequence[str]) -> list[list[float]]:
    return [_vector(t) for t in texts]


async def _open(url: str, **thresholds: int) -> AsyncIterator[RecallStore]:
    index: IndexConfig = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    settings = Settings(database_url=url, embedding_cache_ttl=0, **thresholds)  # type: ignore[arg-type]
    async with RecallStore.connect(url, index=index, settings=settings) as store:
        yield store


@pytest.fixture
async def url(databases: Databases) -> str:
    return await databases.create("recall_store_ix")


async def _indexes(url: str) -> list[tuple[str, int]]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(b"SELECT ns, dims FROM recall.store_indexes ORDER BY ns")
        return [(str(ns), int(dims)) for ns, dims in await cur.fetchall()]
    finally:
        await conn.close()


def _page(results: Sequence[object]) -> list[tuple[str, str, float | None]]:
    return [(".".join(r.namespace), r.key, r.score) for r in results]  # type: ignore[attr-defined]


async def _exact(
    store: RecallStore, monkeypatch: pytest.MonkeyPatch, prefix: tuple[str, ...], **search: object
) -> list[tuple[str, str, float | None]]:
    """A page from the exact scan, whatever indexes exist (writes build them at once)."""
    with monkeypatch.context() as patch:
        patch.setattr(store._planner, "through", lambda prefix, dims: None)
        return _page(await store.asearch(prefix, **search))  # type: ignore[arg-type]


async def test_a_large_namespace_gets_its_own_index_and_answers_as_the_exact_scan(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async for store in _open(url, store_index_threshold=50):
        await store.abatch(
            [PutOp(("kb",), f"k{i:03d}", {"text": f"kb {i}", "n": i}) for i in range(80)]
            + [PutOp(("kb", "sub"), f"s{i}", {"text": f"sub {i}", "n": i}) for i in range(5)]
            + [PutOp(("other",), f"o{i}", {"text": f"other {i}", "n": i}) for i in range(30)]
        )
        queries = [f"query {q}" for q in range(6)]
        searches = [
            {"query": q, "limit": 10, "filter": {"n": {"$gte": 3}} if i % 2 else None}
            for i, q in enumerate(queries)
        ]
        exact = [await _exact(store, monkeypatch, ("kb",), **s) for s in searches]
        await store.wait_for_index_builds()  # the searches above may have set it off already
        await store.build_indexes()
        assert await _indexes(url) == [("kb", DIMS)]
        assert store._planner.through("kb", DIMS) == "namespace"
        assert store._planner.through("other", DIMS) is None
        indexed = [_page(await store.asearch(("kb",), **s)) for s in searches]  # type: ignore[arg-type]
        for before, after in zip(exact, indexed, strict=True):
            assert [(ns, key) for ns, key, _ in after] == [(ns, key) for ns, key, _ in before]
            assert [s for *_, s in after] == pytest.approx([s for *_, s in before], abs=1e-9)
        assert any(ns == "kb.sub" for page in indexed for ns, _, _ in page)  # children count
        assert await store.build_indexes() == []  # nothing left to build


async def test_ties_past_the_candidates_are_broken_as_the_exact_scan_breaks_them(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 items with one same vector: the index's 40 candidates are whichever it meets first,
    so the page comes from the exact scan, by date then key, as without an index."""
    async for store in _open(url, store_index_threshold=50):
        for start in range(0, 200, 50):  # four dates
            await store.abatch(
                [PutOp(("tie",), f"t{i:03d}", {"text": "same"}) for i in range(start, start + 50)]
            )
        exact = await _exact(store, monkeypatch, ("tie",), query="same", limit=10, offset=5)
        await store.wait_for_index_builds()
        await store.build_indexes()
        assert store._planner.through("tie", DIMS) == "namespace"
        assert _page(await store.asearch(("tie",), query="same", limit=10, offset=5)) == exact
        # the newest batch (one date) first, then by key
        assert [key for _, key, _ in exact] == [f"t{i:03d}" for i in range(155, 165)]


async def test_searches_set_off_the_builds_they_need(url: str) -> None:
    async for store in _open(url, store_index_threshold=60, store_wide_threshold=100):
        await store.abatch(
            [PutOp(("org", "big"), f"b{i}", {"text": f"big {i}"}) for i in range(70)]
            + [PutOp(("org", f"team{j}"), "k", {"text": f"team {j}"}) for j in range(50)]
        )
        exact = _page(await store.asearch(("org",), query="query", limit=10))
        await store.asearch(("org", "big"), query="query", limit=10)
        await store.asearch(("org", "team1"), query="query", limit=10)  # small: nothing to do
        await store.wait_for_index_builds()
        assert await _indexes(url) == [("", DIMS), ("org.big", DIMS)]
        assert store._planner.through("org", DIMS) == "every"
        assert store._planner.through("org.big", DIMS) == "namespace"
        assert store._planner.through("org.team1", DIMS) is None
        assert _page(await store.asearch(("org",), query="query", limit=10)) == exact


async def _scalar(url: str, statement: bytes) -> object:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(statement)
        row = await cur.fetchone()
        return row[0] if row else None
    finally:
        await conn.close()


async def test_a_prefix_goes_through_one_graph_that_holds_every_vector(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0029: the index over every namespace holds the vectors of namespaces with an
    index of their own too, so a prefix search is one scan at that index's breadth, and its
    pages (vectors written after both indexes, pending or in bulk, filters, deeper pages) are
    the exact scan's."""
    knobs: list[int] = []

    async def watched(conn: Any, name: str, params: Any = None) -> int:
        if name in ("store_session_knobs", "store_search_knobs"):
            knobs.append(params["ef_search"])
        return await run_sql(conn, name, params)

    async for store in _open(url, store_index_threshold=60, store_wide_threshold=100):
        await store.abatch(
            [PutOp(("org", "a"), f"a{i}", {"text": f"alpha {i}", "n": i}) for i in range(70)]
            + [PutOp(("org", f"t{j}"), "k", {"text": f"team {j}", "n": j}) for j in range(50)]
        )
        await store.build_indexes(every_namespace=True)
        assert await _indexes(url) == [("", DIMS), ("org.a", DIMS)]
        definition = await _scalar(
            url, b"SELECT indexdef FROM pg_indexes WHERE indexname = 'store_vectors_hnsw_every_32'"
        )
        assert "NOT pending" in str(definition) and "own_index" not in str(definition)
        # each scan can take one index only: a namespace's, its own (the wide index meets its
        # predicate too, and at scale PostgreSQL chose it: scan_order), a prefix's, the wide one
        own = store_index_name("org.a", DIMS)
        assert await _scanned(store, "org.a", "namespace") == [own]
        assert await _scanned(store, "org.a", "namespace", without=own) == []
        assert await _scanned(store, "org", "every") == ["store_vectors_hnsw_every_32"]
        # after both indexes: in bulk (into both graphs at once), then single puts (pending)
        await store.abatch(
            [PutOp(("org", "a"), f"a{i}", {"text": f"alpha {i}", "n": i}) for i in range(70, 140)]
        )
        for i in range(140, 145):
            await store.aput(("org", "a"), f"a{i}", {"text": f"alpha {i}", "n": i})
        conn = await connect_once(url)
        try:
            await record_breadth(conn, "", DIMS, Breadth(60, 1.0, 10_000))
            await record_breadth(conn, "org.a", DIMS, Breadth(300, 1.0, 10_000))
        finally:
            await conn.close()
        await store._planner.refresh_now()
        await store.asearch(("org",), query="query", limit=10)  # the planner counts the prefix
        await store.wait_for_index_builds()
        assert store._planner.through("org", DIMS) == "every"
        monkeypatch.setattr("recall.db.items.run", watched)
        searches: list[dict[str, Any]] = [
            {"query": q, "limit": 10} for q in ("alpha 85", "alpha 3", "alpha 143", "team 9")
        ] + [
            {"query": "alpha 88", "limit": 5, "offset": 4},
            {"query": "alpha 91", "limit": 10, "filter": {"n": {"$gte": 40}}},
        ]
        for search in searches:
            exact = await _exact(store, monkeypatch, ("org",), **search)
            knobs.clear()
            indexed = _page(await store.asearch(("org",), **search))
            assert knobs in ([], [60])  # one scan, at the wide index's breadth (sent when new)
            assert [(ns, key) for ns, key, _ in indexed] == [(ns, key) for ns, key, _ in exact]
            assert [s for *_, s in indexed] == pytest.approx([s for *_, s in exact], abs=1e-9)
        for text, key in (("alpha 120", "a120"), ("alpha 143", "a143")):
            top = _page(await store.asearch(("org",), query=text, limit=1))
            assert top[0][:2] == ("org.a", key)  # written in bulk, and pending (or joined)


def _index_names(node: dict[str, Any]) -> list[str]:
    own = [str(node["Index Name"])] if "Index Name" in node else []
    return own + [n for child in node.get("Plans", []) for n in _index_names(child)]


async def _scanned(
    store: RecallStore,
    prefix: str,
    through: Literal["namespace", "every"],
    without: str | None = None,
    halved: bool = True,
) -> list[str]:
    """The HNSW indexes the plan of a search of `prefix` through `through` scans (with index
    `without` dropped for the plan, and back after it; `halved`: as `SearchPlan.halved`)."""
    plan = SearchPlan(prefix=prefix, filter=compile_filter(None), limit=10, offset=0,
                      mode="semantic", query=np.array(_vector("q"), np.float32), dims=DIMS,
                      through=through, ef_search=40, halved=halved)  # fmt: skip
    indexed = items_module.indexed_statement(plan, DIMS)
    async with store._pool.connection() as conn, conn.transaction():
        # as at scale: on a table this small a scan and a sort are cheapest anyway
        await conn.execute(b"SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        explain = b"EXPLAIN (FORMAT JSON) " + indexed.statement.as_string(conn).encode()
        async with conn.transaction(force_rollback=True), as_owner(conn):
            if without is not None:
                await conn.execute(sql.SQL("DROP INDEX recall.{}").format(sql.Identifier(without)))
            row = await (await conn.execute(explain, indexed.params)).fetchone()
    assert row is not None
    return [n for n in _index_names(row[0][0]["Plan"]) if "hnsw" in n]


async def test_a_namespace_index_holds_halfvec_and_one_built_before_keeps_answering(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56: a namespace's own index holds its vectors as halfvec (a graph of half the
    bytes), and its scan orders by that index's expression; an index built before, over
    `vector`, is read as such from the catalog and searched through itself."""
    async for store in _open(url, store_index_threshold=60):
        await store.abatch([PutOp(("a",), f"k{i}", {"text": f"a {i}"}) for i in range(90)])
        await store.wait_for_index_builds()
        own = store_index_name("a", DIMS)
        definition = str(await _scalar(
            url, b"SELECT indexdef FROM pg_indexes WHERE indexname LIKE 'store_vectors_hnsw_ns_%'"
        ))  # fmt: skip
        assert "halfvec(32)) halfvec_cosine_ops" in definition
        assert store._planner.halved("a", DIMS, "namespace")
        # as the version before built it
        conn = await connect_once(url)
        try:
            await conn.execute(sql.SQL("DROP INDEX recall.{}").format(sql.Identifier(own)))
            await conn.execute(sql.SQL(
                "CREATE INDEX {} ON recall.store_vectors USING hnsw ((embedding::vector(32)) "
                "vector_cosine_ops) WHERE ns = 'a' AND dims = 32 AND NOT pending"
            ).format(sql.Identifier(own)))  # fmt: skip
        finally:
            await conn.close()
        await store._planner.refresh_now()
        assert not store._planner.halved("a", DIMS, "namespace")
        assert await _scanned(store, "a", "namespace", halved=False) == [own]
        assert await _scanned(store, "a", "namespace", halved=True) == []  # not its expression
        for text in ("a 7", "a 55", "a 89"):
            exact = await _exact(store, monkeypatch, ("a",), query=text, limit=10)
            assert store._planner.through("a", DIMS) == "namespace"
            indexed = _page(await store.asearch(("a",), query=text, limit=10))
            assert [k for _n, k, _s in indexed] == [k for _n, k, _s in exact]


async def test_the_migration_drops_the_index_that_left_own_namespaces_out(url: str) -> None:
    """Migration 0029 drops an index over every namespace built before it (`NOT own_index`,
    named "_all_"), recorded or left unrecorded by a build cut short, and its record; a
    namespace's own index stays."""
    async for store in _open(url, store_index_threshold=60):
        await store.abatch([PutOp(("org", "a"), f"a{i}", {"text": f"a {i}"}) for i in range(70)])
        await store.wait_for_index_builds()
    conn = await connect_once(url)
    try:
        for dims in (DIMS, 64):
            await conn.execute(sql.SQL(
                "CREATE INDEX {} ON recall.store_vectors USING hnsw "
                "((embedding::vector({})) vector_cosine_ops) WHERE dims = {} AND NOT own_index"
            ).format(sql.Identifier(f"store_vectors_hnsw_all_{dims}"), dims, dims))  # fmt: skip
        await conn.execute(
            b"INSERT INTO recall.store_indexes (ns, dims, index_name) "
            b"VALUES ('', 32, 'store_vectors_hnsw_all_32')"
        )
        migration = (ROOT / "migrations" / "0029_store_one_wide_graph.sql").read_bytes()
        await conn.execute(migration)
        cur = await conn.execute(
            b"SELECT indexname FROM pg_indexes WHERE indexname LIKE 'store_vectors_hnsw_%'"
        )
        assert [name for (name,) in await cur.fetchall()] == [store_index_name("org.a", DIMS)]
    finally:
        await conn.close()
    assert await _indexes(url) == [("org.a", DIMS)]


async def test_a_batch_that_takes_a_namespace_past_the_threshold_builds_its_index_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cold window: the batch that takes a small-enough namespace past the threshold returns
    with its index built and recorded, so the next search goes through it; a larger one is
    built in the background."""
    async for store in _open(url, store_index_threshold=60):
        await store.abatch([PutOp(("a",), f"k{i}", {"text": f"a {i}"}) for i in range(40)])
        await store.wait_for_index_builds()  # the background count of a namespace first seen
        assert await _indexes(url) == []
        await store.abatch([PutOp(("a",), f"k{i}", {"text": f"a {i}"}) for i in range(40, 70)])
        assert await _indexes(url) == [("a", DIMS)]  # no wait: built before the batch returned
        assert store._planner.through("a", DIMS) == "namespace"
        with capture_logs() as logs:
            await store.abatch([PutOp(("b",), f"k{i}", {"text": f"b {i}"}) for i in range(70)])
        assert [e["vectors"] for e in logs if e["event"] == "store.index.built_on_write"] == [70]
        assert await _indexes(url) == [("a", DIMS), ("b", DIMS)]
        monkeypatch.setattr("recall.basestore.planning.SYNC_BUILD_MAX", 65)
        with capture_logs() as logs:
            await store.abatch([PutOp(("c",), f"k{i}", {"text": f"c {i}"}) for i in range(70)])
        # too large to wait for: queued for the background
        assert not [e for e in logs if e["event"] == "store.index.built_on_write"]
        await store.wait_for_index_builds()
        assert ("c", DIMS) in await _indexes(url)


async def test_a_calibration_that_saw_its_index_grow_is_repeated(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written into while probed (a bulk load), an index's breadth comes out too wide: the
    calibration runs again once it ends (once: a quiet index is not probed again)."""
    real = calibrate_index
    seen: list[int] = []

    async def during_a_load(conn: Any, ns: str, dims: int, *, halved: bool) -> Breadth:
        breadth = await real(conn, ns, dims, halved=halved)
        seen.append(breadth.vectors)
        if len(seen) > 1:
            return breadth
        return dataclasses.replace(breadth, vectors=breadth.vectors - 5)  # 5 came meanwhile

    async for store in _open(url, store_index_threshold=60):
        await store.abatch([PutOp(("a",), f"k{i}", {"text": f"a {i}"}) for i in range(80)])
        await store.wait_for_index_builds()
        monkeypatch.setattr(planning, "calibrate_index", during_a_load)
        with capture_logs() as logs:
            await store._planner._calibrate("a", DIMS)
            await store.wait_for_index_builds()
        repeats = [e["after"] for e in logs if e["event"] == "store.index.calibration_repeated"]
        assert repeats == [80]
        assert seen == [80, 80]  # measured again, and not a third time


async def test_a_read_batch_scans_at_its_connections_breadth_set_only_when_it_changes(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56: a batch of reads searches through a namespace's index with the connection's
    own knobs, sent beside the search only when the breadth changes, in no transaction; a
    batch with a put keeps its search's knobs to its transaction, and the connection's own
    knobs stay what the reads left."""
    sent: list[tuple[str, int]] = []

    async def watched(conn: Any, name: str, params: Any = None) -> int:
        if name in ("store_session_knobs", "store_search_knobs"):
            sent.append((name, params["ef_search"]))
        return await run_sql(conn, name, params)

    async for store in _open(url, store_index_threshold=60, connection_pool_size=1):
        await store.abatch([PutOp(("kb",), f"k{i}", {"text": f"fact {i}"}) for i in range(80)])
        await store.wait_for_index_builds()
        await store.asearch(("kb",), query="fact 3", limit=5)  # the planner reads its indexes
        await store.wait_for_index_builds()
        await store._planner.refresh_now()
        assert store._planner.through("kb", DIMS) == "namespace"
        breadth = store._planner.breadth("kb", DIMS, "namespace")
        items_module._SESSION_BREADTH.clear()  # as for connections this process never set
        monkeypatch.setattr("recall.db.items.run", watched)
        for q in ("fact 1", "fact 2", "fact 3"):
            assert len(await store.asearch(("kb",), query=q, limit=5)) == 5
        assert sent == [("store_session_knobs", breadth)]
        sent.clear()
        await store.abatch(
            [PutOp(("kb",), "new", {"text": "fact new"}), SearchOp(("kb",), query="fact 4")]
        )
        assert sent == [("store_search_knobs", breadth)]
        async with store._pool.connection() as conn:
            cur = await conn.execute(
                b"SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
            )
            assert await cur.fetchone() == (str(breadth), "relaxed_order")


def _failing(real: Any) -> Any:
    """`indexed_statement` whose statement fails in the server."""

    def broken(plan: Any, dims: int) -> Any:
        return dataclasses.replace(
            real(plan, dims),
            statement=sql.SQL("SELECT no_such_column FROM recall.store_items").format(),
        )

    return broken


async def test_a_read_batch_whose_search_fails_sets_its_knobs_again_next_time(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56: a failed pipeline undoes the session knobs it set, so the connection's
    breadth is forgotten and the next search sends them again (the same connection)."""
    sent: list[str] = []

    async def watched(conn: Any, name: str, params: Any = None) -> int:
        if name in ("store_session_knobs", "store_search_knobs"):
            sent.append(name)
        return await run_sql(conn, name, params)

    async for store in _open(url, store_index_threshold=60, connection_pool_size=1):
        await store.abatch([PutOp(("kb",), f"k{i}", {"text": f"fact {i}"}) for i in range(80)])
        await store.wait_for_index_builds()
        await store.asearch(("kb",), query="fact 3", limit=5)
        await store.wait_for_index_builds()
        await store._planner.refresh_now()
        assert store._planner.through("kb", DIMS) == "namespace"
        items_module._SESSION_BREADTH.clear()
        monkeypatch.setattr("recall.db.items.run", watched)
        real = items_module.indexed_statement
        monkeypatch.setattr(items_module, "indexed_statement", _failing(real))
        with pytest.raises(StoreError):
            await store.asearch(("kb",), query="fact 1", limit=5)
        assert sent == ["store_session_knobs"]
        assert not items_module._SESSION_BREADTH
        monkeypatch.setattr(items_module, "indexed_statement", real)
        assert len(await store.asearch(("kb",), query="fact 2", limit=5)) == 5
        assert sent == ["store_session_knobs", "store_session_knobs"]
