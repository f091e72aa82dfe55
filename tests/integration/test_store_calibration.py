"""RecallStore's indexes built when writes take a namespace past the threshold, calibrated once
built and again once grown (migration 0020, decision 0030), prepared per index, and children
of an indexed namespace found as soon as they are written."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph.store.base import IndexConfig, PutOp

from recall import RecallStore
from recall.basestore.questions import FIRST_QUESTIONS, MIN_QUESTIONS
from recall.config import Settings
from recall.db.calibration import FLOOR, LADDER
from recall.db.pool import connect_once
from tests.conftest import Databases
from tests.integration.test_store_indexes import DIMS, _embed


async def _open(url: str, **settings: float) -> AsyncIterator[RecallStore]:
    index: IndexConfig = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    configured = Settings(database_url=url, embedding_cache_ttl=0, **settings)  # type: ignore[arg-type]
    async with RecallStore.connect(url, index=index, settings=configured) as store:
        yield store


@pytest.fixture
async def url(databases: Databases) -> str:
    return await databases.create("recall_store_cal")


async def _recorded(url: str) -> dict[str, tuple[int | None, float | None, int | None]]:
    conn = await connect_once(url)
    try:
        cur = await conn.execute(
            b"SELECT ns, ef_search, calibrated_recall, calibrated_vectors FROM recall.store_indexes"
        )
        return {str(ns): (ef, recall, vectors) for ns, ef, recall, vectors in await cur.fetchall()}
    finally:
        await conn.close()


def _puts(ns: tuple[str, ...], start: int, stop: int) -> list[PutOp]:
    return [PutOp(ns, f"k{i:04d}", {"text": f"{ns[-1]} {i}"}) for i in range(start, stop)]


async def test_a_write_past_the_threshold_builds_and_calibrates_the_index(url: str) -> None:
    async for store in _open(url, store_index_threshold=60):
        await store.abatch(_puts(("kb",), 0, 40) + _puts(("small",), 0, 20))
        await store.wait_for_index_builds()
        assert await _recorded(url) == {}  # 40 < 60: nothing yet, and no search asked
        await store.abatch(_puts(("kb",), 40, 70))  # this batch takes it past the threshold
        await store.wait_for_index_builds()
        recorded = await _recorded(url)
        assert set(recorded) == {"kb"}
        ef_search, recall, vectors = recorded["kb"]
        assert ef_search in LADDER
        assert recall is not None
        assert recall >= FLOOR
        assert vectors == 70
        assert store._planner.through("kb", DIMS) == "namespace"
        assert store._planner.breadth("kb", DIMS, "namespace") == ef_search


async def test_an_index_is_calibrated_again_once_it_has_grown_by_a_quarter(url: str) -> None:
    async for store in _open(url, store_index_threshold=60):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        assert (await _recorded(url))["kb"][2] == 80
        await store.abatch(_puts(("kb",), 80, 100))  # 100 = 80 * 1.25: not yet
        await store.asearch(("kb",), query="kb 1")  # reads the indexes (every few seconds)
        await store._planner.refresh_now()
        await store.wait_for_index_builds()
        assert (await _recorded(url))["kb"][2] == 80
        await store.abatch(_puts(("kb",), 100, 105))  # 105 > 100
        await store._planner.refresh_now()
        await store.wait_for_index_builds()
        assert (await _recorded(url))["kb"][2] == 105


async def test_an_index_under_the_floor_is_not_used(url: str) -> None:
    async for store in _open(url, store_index_threshold=60):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        assert store._planner.through("kb", DIMS) == "namespace"
        conn = await connect_once(url)
        try:
            # what a calibration records when even the widest breadth falls short
            await conn.execute(
                b"UPDATE recall.store_indexes SET calibrated_recall = 0.5, ef_search = %s",
                (LADDER[-1],),
            )
        finally:
            await conn.close()
        await store._planner.refresh_now()
        assert store._planner.through("kb", DIMS) is None  # the exact scan answers
        assert len(await store.asearch(("kb",), query="kb 3", limit=10)) == 10


async def test_a_breadth_its_questions_widened_to_is_used(url: str) -> None:
    """Issue 47: questions widen an index one step at a time, each step recorded with the
    recall measured there, which may still be under the floor: the index is still used."""
    async for store in _open(url, store_index_threshold=60):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        conn = await connect_once(url)
        try:
            await conn.execute(
                b"UPDATE recall.store_indexes SET calibrated_recall = 0.98, ef_search = 60"
            )
        finally:
            await conn.close()
        await store._planner.refresh_now()
        assert store._planner.through("kb", DIMS) == "namespace"
        assert store._planner.breadth("kb", DIMS, "namespace") == 60


async def test_children_written_after_the_index_are_found_at_once(url: str) -> None:
    """The indexed plan of a namespace compares its children exactly, whether or not this
    process knew of them: a child written a moment ago is found by the next search."""
    async for store in _open(url, store_index_threshold=60):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        before = await store.asearch(("kb",), query="a question", limit=5)
        assert store._planner.through("kb", DIMS) == "namespace"
        assert all(tuple(r.namespace) == ("kb",) for r in before)
        await store.aput(("kb", "sub"), "child", {"text": "a question"})  # the query's own text
        after = await store.asearch(("kb",), query="a question", limit=5)
        assert (tuple(after[0].namespace), after[0].key) == (("kb", "sub"), "child")
        assert after[0].score == pytest.approx(1.0)


async def test_an_indexed_search_is_prepared_once_per_index(url: str) -> None:
    async for store in _open(url, store_index_threshold=60, connection_pool_size=1):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        exact = [(r.key, r.score) for r in await store.asearch(("kb",), query="kb 7", limit=10)]
        for _ in range(8):  # PostgreSQL tries a generic plan after five executions
            found = await store.asearch(("kb",), query="kb 7", limit=10)
            assert [(r.key, r.score) for r in found] == exact
        async with store._pool.connection() as conn:
            cur = await conn.execute(
                b"SELECT generic_plans + custom_plans FROM pg_prepared_statements"
                b" WHERE statement LIKE '%v.ns = ''kb''%'"
            )
            runs = [int(n) for (n,) in await cur.fetchall()]
        assert runs and max(runs) >= 8


async def _set_breadth(url: str, ns: str, ef_search: int) -> None:
    conn = await connect_once(url)
    try:
        await conn.execute(
            b"UPDATE recall.store_indexes SET ef_search = %s WHERE ns = %s", (ef_search, ns)
        )
    finally:
        await conn.close()


async def test_the_questions_asked_move_an_index_to_the_breadth_they_need(url: str) -> None:
    """Issue 47: with every search sampled, once MIN_QUESTIONS questions have been checked
    against the exact scan, an index searched wider than its questions need narrows to the
    smallest breadth that holds the target on them."""
    async for store in _open(url, store_index_threshold=60, store_breadth_sample=1):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        await _set_breadth(url, "kb", 200)  # as a probe calibration may leave it
        await store._planner.refresh_now()
        assert store._planner.breadth("kb", DIMS, "namespace") == 200
        for i in range(MIN_QUESTIONS):
            await store.asearch(("kb",), query=f"kb {i * 7 % 80}")
            await store.wait_for_index_builds()  # each question checked before the next
        tally = store._planner.tally("kb", DIMS)
        assert tally.questions == MIN_QUESTIONS
        assert tally.recall(LADDER[0]) == 1.0  # 80 vectors: the narrowest finds them all
        ef_search, recall, vectors = (await _recorded(url))["kb"]
        assert (ef_search, recall, vectors) == (LADDER[0], 1.0, 80)
        assert store._planner.breadth("kb", DIMS, "namespace") == LADDER[0]


async def test_the_first_questions_are_all_checked_then_a_share(url: str) -> None:
    """Issue 56: at the default share (1%), the first FIRST_QUESTIONS searches through an index
    are all checked, so its breadth follows its questions after a few hundred searches rather
    than after 5,000; then only every 100th search is."""
    async for store in _open(url, store_index_threshold=60):
        assert store._planner.sample == 0.01
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        await _set_breadth(url, "kb", 200)  # as a probe calibration may leave it
        await store._planner.refresh_now()
        for i in range(FIRST_QUESTIONS + 20):
            await store.asearch(("kb",), query=f"kb {i * 7 % 80}")
            await store.wait_for_index_builds()  # each question checked before the next
        assert store._planner.tally("kb", DIMS).questions == FIRST_QUESTIONS  # none after
        assert store._planner.breadth("kb", DIMS, "namespace") == LADDER[0]


async def test_no_question_is_checked_when_the_share_is_zero(url: str) -> None:
    async for store in _open(url, store_index_threshold=60, store_breadth_sample=0):
        await store.abatch(_puts(("kb",), 0, 80))
        await store.wait_for_index_builds()
        await _set_breadth(url, "kb", 200)
        await store._planner.refresh_now()
        for i in range(MIN_QUESTIONS):
            await store.asearch(("kb",), query=f"kb {i}")
        await store.wait_for_index_builds()
        assert store._planner.tally("kb", DIMS).questions == 0
        assert (await _recorded(url))["kb"][0] == 200
