"""RecallStore's hybrid search is ranked by the fusion the memories' hybrid uses
(`recall.search.fusion`, written once: issue 56; `recall.basestore.hybrid`): the store's
answer is what the memories' fusion makes of the store's own two lists, with the same relevance
(to 1e-9) and in the same order.

Each item's evidence is read from the store itself: its cosine from a semantic search (the best
of its vectors) and its BM25 from a keyword search. The memories' fusion gets them as the
memories' searches hand them to it: a vector list best first and a keyword list best first,
through its own gathering (`FusionModel.gather`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Never

import numpy as np
import pytest
from langgraph.store.base import IndexConfig, PutOp, SearchItem

from recall import RecallStore
from recall.db.filters import compile_filter
from recall.db.items import SearchPlan, ranked_items
from recall.rows import MemoryRow
from recall.search.fusion import default_fusion
from recall.search.keywords import keywords_from_text
from recall.search.rankers import Ask, Query
from tests.conftest import Databases
from tests.integration.basestore.conftest import CharacterEmbeddings, open_store

ROOT = ("fusion",)
# (namespace, key, text, indexed): each indexed text of its own length (so no two items have
# the same BM25), sharing words with the queries in different measure; two are stored without
# an index (no vector and no text: neither side scores them)
ITEMS = [
    ("pets", "otter", "river otters hold hands while sleeping", True),
    ("pets", "owl", "barn owls hunt quietly at night over the open fields of the valley", True),
    ("pets", "bee", "honey bees dance to share directions to flowers", True),
    ("pets", "fox", "red foxes hunt mice under deep snow at night", True),
    ("pets", "cat", "a cat sleeps most of the day in the sun", True),
    ("farm", "cow", "dairy cows sleep standing up in the barn and wake early each morning "
     "for milking", True),
    ("farm", "hen", "hens lay eggs in the morning and roost at night in the barn with the ducks "
     "and geese nearby", True),
    ("farm", "goat", "goats climb trees", True),
    ("farm", "pig", "pigs roll in mud to keep cool", False),
    ("farm", "dog", "a sheep dog herds the flock across the hills at dusk", False),
    ("wild", "seal", "harbour seals sleep floating upright in cold water near the rocky shore "
     "line", True),
    ("wild", "bat", "bats hunt insects by echo at night near the river banks under the old stone "
     "bridge in summer", True),
]  # fmt: skip
QUERIES = [
    "which animals hunt at night",
    "sleeping by the river",
    "barn animals in the morning",
    "snow and sun in summer",
    "pigs and sheep",
]


@pytest.fixture(scope="module")
async def url(databases: Databases) -> str:
    return await databases.create("recall_fusion")


@pytest.fixture(scope="module")
async def stores(url: str) -> AsyncIterator[dict[str, RecallStore]]:
    """The same items under three stores on one database, one per mode."""
    embeddings = CharacterEmbeddings()
    index: IndexConfig = {"dims": embeddings.dims, "embed": embeddings, "fields": ["text"]}
    async with AsyncExitStack() as stack:
        opened = {
            mode: await stack.enter_async_context(open_store(url, index=index, mode=mode))
            for mode in ("semantic", "keyword", "hybrid")
        }
        await opened["hybrid"].abatch(
            [
                PutOp((*ROOT, ns), key, {"text": text}, index=None if indexed else False)
                for ns, key, text, indexed in ITEMS
            ]
        )
        yield opened


class _Lists:
    """A candidate source that hands over two lists as they are (`recall.search.rankers.
    CandidateSource`: the store's gives the user's nearest and best by BM25)."""

    def __init__(self, near: list[MemoryRow], words: list[MemoryRow]) -> None:
        self.near, self.words = near, words

    async def for_query(self, *args: object, **kwargs: object) -> Never:
        raise AssertionError("the fusion reads the two lists")

    async def nearest(self, user_id: str, vector: object, k: int) -> list[MemoryRow]:
        return self.near[:k]

    async def best_by_words(
        self, user_id: str, text: str, vector: object, k: int
    ) -> list[MemoryRow]:
        return self.words[:k]


def _row(item: SearchItem, distance: float | None, bm25: float | None) -> MemoryRow:
    """An item as the memories' searches hand a row to the fusion (its id names the item)."""
    return MemoryRow(
        id=uuid.uuid5(uuid.NAMESPACE_URL, "/".join((*item.namespace, item.key))),
        conversation_id=None,
        user_message="",
        ai_response="",
        created_at=datetime.now(UTC),
        metadata={},
        kind="turn",
        distance=distance,
        bm25=bm25,
    )


@pytest.mark.parametrize("question", QUERIES)
async def test_the_stores_hybrid_is_the_memories_fusion(
    stores: dict[str, RecallStore], question: str
) -> None:
    found = {
        mode: [
            r for r in await store.asearch(ROOT, query=question, limit=50) if r.score is not None
        ]
        for mode, store in stores.items()
    }
    cosine = {(r.namespace, r.key): float(r.score or 0) for r in found["semantic"]}
    bm25 = {(r.namespace, r.key): float(r.score or 0) for r in found["keyword"]}
    # the cases the two sides share: no tie to rank, no negative cosine to clamp
    assert len(cosine) == len(set(cosine.values())) == 10 and min(cosine.values()) > 0
    assert len(bm25) == len(set(bm25.values()))

    # the memories' hybrid: a vector list and a keyword list, best first, fused in Python
    rows = {
        where: MemoryRow(
            id=uuid.uuid5(uuid.NAMESPACE_URL, "/".join((*where[0], where[1]))),
            conversation_id=None,
            user_message="",
            ai_response="",
            created_at=datetime.now(UTC),
            metadata={},
            kind="turn",
            distance=1 - cosine[where] if where in cosine else None,
            bm25=bm25.get(where),
        )
        for where in {**cosine, **bm25}
    }
    # the store's own path: the fusion gathers its two lists and ranks what it merged
    query = Query(question, np.zeros(1))
    lists = _Lists([rows[where] for where in cosine], [rows[where] for where in bm25])
    gathered = await default_fusion().gather(
        lists, Ask("u", query, np.zeros(1, dtype=np.float32), 10, 1000)
    )
    assert gathered is not None
    ranking = default_fusion().rank(query, gathered.candidates)
    names = {str(row.id): where for where, row in rows.items()}
    python = [(names[str(gathered.rows[i].id)], ranking.scores[i]) for i in ranking.order]
    store = [((r.namespace, r.key), float(r.score or 0)) for r in found["hybrid"]]
    assert [where for where, _s in store] == [where for where, _s in python]
    assert [s for _w, s in store] == pytest.approx([s for _w, s in python], abs=1e-9, rel=0)
    # a page of it is that ranking's slice: the candidates do not depend on the page
    page = await stores["hybrid"].asearch(ROOT, query=question, limit=3, offset=2)
    assert [(r.namespace, r.key) for r in page] == [where for where, _s in store[2:5]]


LONG = ("fusion-long",)
WORDS = ["otter", "river", "night", "barn", "snow", "owl", "hunt", "sleep", "morning", "field"]
LONG_QUERY = "otter hunts at night by the river"


async def test_past_the_first_forty_the_lists_stay_the_memories_lists(url: str) -> None:
    """With more items than the candidate lists hold (40 each for a first page of 10), a
    keyword hit beyond the nearest 40 enters with no vector place, as in the memories' fusion,
    and a deeper page is the slice of the fusion of longer lists."""
    embeddings = CharacterEmbeddings()
    index: IndexConfig = {"dims": embeddings.dims, "embed": embeddings, "fields": ["text"]}
    rng = np.random.default_rng(56)
    texts = [
        f"item{i} " + " ".join(rng.choice(WORDS, size=int(rng.integers(2, 7)))) for i in range(120)
    ]
    async with AsyncExitStack() as stack:
        opened = {
            mode: await stack.enter_async_context(open_store(url, index=index, mode=mode))
            for mode in ("semantic", "keyword", "hybrid")
        }
        await opened["hybrid"].abatch(
            [PutOp(LONG, f"k{i:03d}", {"text": text}) for i, text in enumerate(texts)]
        )
        # the statement's candidates carry a place only within their list (none outside it)
        plan = SearchPlan(
            prefix="fusion-long", filter=compile_filter(None), limit=10, offset=0, mode="hybrid",
            query=np.asarray(await embeddings.aembed_query(LONG_QUERY), dtype=np.float32),
            dims=embeddings.dims, words=keywords_from_text(LONG_QUERY).words,
        )  # fmt: skip
        async with opened["hybrid"]._pool.connection() as conn:
            read = await ranked_items(conn, plan)
        assert all(r.vector_rank is None or r.vector_rank < 40 for r in read)
        assert all(r.keyword_rank is None or r.keyword_rank < 40 for r in read)
        assert {r.vector_rank for r in read} >= set(range(40))
        assert any(r.vector_rank is None for r in read)  # keyword hits beyond the nearest 40
        every = await opened["semantic"].asearch(LONG, query=LONG_QUERY, limit=200)
        cosine = {(r.namespace, r.key): float(r.score or 0) for r in every}
        for limit, offset in ((10, 0), (10, 30)):
            k = max(2 * (limit + offset), 40)
            near = every[:k]
            words = [
                r
                for r in await opened["keyword"].asearch(LONG, query=LONG_QUERY, limit=k)
                if r.score is not None
            ]
            keyed = {(r.namespace, r.key) for r in near}
            assert [r for r in words if (r.namespace, r.key) not in keyed]  # keyword-only hits
            near_rows = [_row(r, 1 - cosine[(r.namespace, r.key)], None) for r in near]
            word_rows = [_row(r, 1 - cosine[(r.namespace, r.key)], r.score) for r in words]
            names = {row.id: (r.namespace, r.key) for r, row in zip(near, near_rows, strict=True)}
            names |= {row.id: (r.namespace, r.key) for r, row in zip(words, word_rows, strict=True)}
            query = Query(LONG_QUERY, np.zeros(1))
            gathered = await default_fusion().gather(
                _Lists(near_rows, word_rows), Ask("u", query, np.zeros(1, dtype=np.float32), 1, k)
            )
            assert gathered is not None
            ranking = default_fusion().rank(query, gathered.candidates)
            want = [(names[gathered.rows[i].id], ranking.scores[i]) for i in ranking.order]
            want = want[offset : offset + limit]
            page = await opened["hybrid"].asearch(
                LONG, query=LONG_QUERY, limit=limit, offset=offset
            )
            assert [(r.namespace, r.key) for r in page] == [where for where, _s in want]
            assert [r.score for r in page] == pytest.approx([s for _w, s in want], abs=1e-9)
