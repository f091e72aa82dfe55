"""The memories a search holds between searches (recall.store.held, migration 0034): the
details they give are those of `recall.search_details` (the call they replace), and they follow
every insert, update and delete, in this process or another."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from recall.config import Settings
from recall.db.search_rows import held_rows, held_state, term_rows
from recall.errors import StoreError
from recall.rows import CandidateRow
from recall.search.assembly import KeywordSide, assemble
from recall.search.keywords import keywords_from_text
from recall.store import MemoryStore, held_search
from recall.store.candidates import _pick
from recall.store.held import HeldRows, HeldUser
from recall.testing import FakeEmbeddings
from tests.integration.test_second_stage import flat_stage

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
SAME = T0 + timedelta(hours=1)  # three turns of one instant: their order is by content hash

TURNS: list[dict[str, Any]] = [
    {"user_message": "hey there!", "ai_response": "Hi!", "conversation_id": "a",
     "created_at": T0},
    {"user_message": "I keep bees on the roof of my flat", "ai_response": "How many hives?",
     "conversation_id": "a", "created_at": T0 + timedelta(minutes=1)},
    {"user_message": "Two hives, and the honey is dark", "ai_response": "Lovely.",
     "conversation_id": "a", "created_at": SAME},
    {"user_message": "My sister lives in Lyon", "ai_response": "Nice city.",
     "conversation_id": "a", "created_at": SAME},
    {"user_message": "She teaches chemistry there", "ai_response": "Interesting.",
     "conversation_id": "a", "created_at": SAME},
    {"user_message": "What should I cook tonight?", "ai_response": "Maybe a risotto.",
     "conversation_id": "b", "created_at": T0 + timedelta(days=1)},
    {"user_message": "I ran a marathon in April", "ai_response": "Well done!",
     "conversation_id": None, "created_at": T0 + timedelta(days=2)},
    {"user_message": "I am allergic to walnuts", "ai_response": "Noted.",
     "conversation_id": "b", "created_at": T0 + timedelta(days=1, minutes=5)},
]  # fmt: skip


@asynccontextmanager
async def staged(settings: Settings) -> AsyncIterator[MemoryStore]:
    """A store whose default path is a second stage (the held memories' one user), with the
    fake embedder and weights that rank by cosine."""
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        store.ranker = flat_stage(64)
        yield store


async def _sql_details(
    store: MemoryStore, user: str, vector: Any, limit: int, ids: list[UUID]
) -> list[tuple[Any, ...]]:
    async with store.pool.connection() as conn:
        cur = await conn.execute(
            b"SELECT * FROM recall.search_details(%s, %s, %s, %s, false)",
            (user, vector, limit, ids),
        )
        return await cur.fetchall()


async def _held(store: MemoryStore, user: str) -> HeldUser:
    async with store.pool.connection() as conn:
        return HeldUser.of(await held_rows(conn, user_id=user, ids=None))


def _same_rows(got: list[CandidateRow], want: list[CandidateRow]) -> None:
    """The same candidates in the same order, with the same texts, metadata, hits and
    statistics, and the distances and vectors to float32's precision."""
    assert [g.id for g in got] == [w.id for w in want]
    floats = {"distance", "prev_distance", "next_distance"}
    for g, w in zip(got, want, strict=True):
        for name in CandidateRow.__dataclass_fields__:
            a, b = getattr(g, name), getattr(w, name)
            if name in floats:
                assert (a is None) == (b is None), name
                assert a is None or a == pytest.approx(b, abs=1e-6), name
            else:
                assert a == b, name


async def _same_candidates(
    store: MemoryStore, user: str, held: HeldUser, text: str, k: int
) -> list[CandidateRow]:
    """The held candidates (`held_search.candidates`) are those the calls give: the keyword
    side of `recall.search_terms`, the details of `recall.search_details`, picked and
    assembled; with the held keyword side or the call's. Returns them."""
    vector = await store.embedder.embed_query(text)
    keywords = keywords_from_text(text)
    async with store.pool.connection() as conn:
        side = KeywordSide(await term_rows(conn, user_id=user, keywords=keywords))
        state = await held_state(conn, user_id=user, stamp=held.stamp, words=keywords.words)
    details = await _sql_details(store, user, vector, k, side.best(k))
    near = [d[0] for d in details[:k]]
    rows = assemble(side, _pick(side, details, near, k))
    place = {r.id: n for n, r in enumerate(rows)}
    held_side = held_search.keyword_side(held, state)
    assert held_side is not None
    for used in (held_side, side):
        got, order = held_search.candidates(held, vector, k, used)
        _same_rows(got, rows)
        assert order == [place[i] for i in near if i in place], text
    return got


@pytest.mark.citus
async def test_the_held_candidates_are_the_calls(store: MemoryStore, user: str) -> None:
    await store.add_turns({"user_id": user, **t} for t in TURNS + WEIGHED)
    held = await _held(store, user)
    assert held.dimensions == 64 and len(held.rows) == len(TURNS + WEIGHED)
    for query, k in [
        ("bees and honey", 3),
        ("my sister in Lyon", 2),
        ("allergies, walnuts and a marathon", 8),
        ("anything about the plans", 0),
        ("all of them", 20),
        ("hey there", 3),
    ]:
        assert await _same_candidates(store, user, held, query, k) or k == 0


# turns whose title (weight A) and entities (weight B) weigh more, and two of one instant
WEIGHED: list[dict[str, Any]] = [
    {"user_message": "Planning the bee hives", "ai_response": "Plans are good.",
     "conversation_id": "c", "created_at": SAME, "metadata": {"title": "Bees and honey"}},
    {"user_message": "We plan a trip", "ai_response": "Where to?", "conversation_id": "c",
     "created_at": SAME, "metadata": {"entities_text": "Lyon Porto"}},
]  # fmt: skip


@pytest.mark.citus
async def test_the_held_keyword_side_is_the_calls(store: MemoryStore, user: str) -> None:
    """Scored over the held rows (decision 0060), the keyword side is `recall.search_terms`':
    the same memories in the same order, with the same BM25, terms and statistics; small talk
    left out, stop words and repeated lexemes as there."""
    await store.add_turns({"user_id": user, **t} for t in TURNS + WEIGHED)
    async with store.pool.connection() as conn:
        for text in [
            "bees and honey hives",
            "my sister in Lyon",
            "plan plans planning Porto",
            "what is the",
            "hey there",
            "walnuts, chemistry, a marathon?",
            "nothing matches zebra",
        ]:
            keywords = keywords_from_text(text)
            held, state = await HeldRows(64).sync(conn, user, keywords.words)
            got = held_search.keyword_side(held, state)
            want = KeywordSide(await term_rows(conn, user_id=user, keywords=keywords))
            assert got is not None, text
            assert list(got.hits.items()) == list(want.hits.items()), text
            assert (got.term_idf, got.unheld_idf, got.memories) == (
                want.term_idf, want.unheld_idf, want.memories), text  # fmt: skip
        # a word the database does not read as one lexeme is left to it
        odd = dataclasses.replace(state, lexemes=["bee", None])
        assert held_search.keyword_side(held, odd) is None
    async with store.pool.connection() as conn:  # a user without memories: no statistics
        held, state = await HeldRows(64).sync(conn, user + "-none", ["bees"])
        got = held_search.keyword_side(held, state)
        want = KeywordSide(await term_rows(conn, user_id=user + "-none",
                                           keywords=keywords_from_text("bees")))  # fmt: skip
        assert got is not None and (got.hits, got.term_idf, got.memories) == (
            want.hits, want.term_idf, want.memories) == ({}, [], 0.0)  # fmt: skip


@pytest.mark.citus
async def test_a_sync_follows_every_write(store: MemoryStore, user: str) -> None:
    """Inserts, an update and a delete are each seen at the next sync; with nothing changed
    the same held rows are kept."""
    ids = await store.add_turns({"user_id": user, **t} for t in TURNS[:4])
    held = HeldRows(64)
    async with store.pool.connection() as conn:
        first, _ = await held.sync(conn, user)
        assert (await held.sync(conn, user))[0] is first
        # the stamp the rows were read under: no versions sent; none known: every memory's
        unchanged = await held_state(conn, user_id=user, stamp=first.stamp, words=[])
        assert unchanged.stamp == first.stamp and unchanged.ids is None
        listed = await held_state(conn, user_id=user, stamp=None, words=[])
        assert sorted(listed.ids or []) == sorted(UUID(i) for i in ids)
        await store.add_turn(user, "I moved to Porto last year", "How is it?")
        grown, _ = await held.sync(conn, user)
        assert len(grown.rows) == 5 and grown is not first
        async with store.connection(user) as scoped:
            await scoped.execute(
                b"UPDATE recall.memories SET metadata = metadata || '{\"tag\": 7}' WHERE id = %s",
                (ids[1],),
            )
        changed, _ = await held.sync(conn, user)
        row = changed.rows[changed.position[UUID(ids[1])]]
        assert len(changed.rows) == 5 and '"tag": 7' in row[6]
        assert await store.delete(user, ids[2])
        shrunk, _ = await held.sync(conn, user)
        assert UUID(ids[2]) not in shrunk.position and len(shrunk.rows) == 4
        assert held.get(user) is shrunk
    assert await _same_candidates(store, user, shrunk, "where do I live, there", 3)


@pytest.mark.citus
async def test_another_process_writes_are_seen(settings: Settings, user: str) -> None:
    """Two stores stand for two processes: what one writes, the other's next search finds,
    and what one deletes, the other's next search no longer returns."""
    async with staged(settings) as store, staged(settings) as other:
        await store.add_turns({"user_id": user, **t} for t in TURNS)
        assert await other.search(user, "hives of bees", similarity_threshold=0.0)
        assert other.core.held.get(user) is not None
        await store.add_turn(user, "My cat is called Miso", "Cute name!")
        found = await other.search(user, "My cat is called Miso", similarity_threshold=0.0)
        assert found[0].user_message == "My cat is called Miso"
        await store.delete(user, found[0].id)
        again = await other.search(user, "My cat is called Miso", similarity_threshold=0.0)
        assert again and all(m.id != found[0].id for m in again)
        # erased and written anew by one: the other holds none of what was erased
        await store.forget_user(user)
        await store.add_turn(user, "My dog is called Rex", "Good dog!")
        after = await other.search(user, "My cat is called Miso", similarity_threshold=0.0)
        assert [m.user_message for m in after] == ["My dog is called Rex"]


async def test_erasure_drops_what_is_held(settings: Settings, user: str) -> None:
    async with staged(settings) as store:
        await store.add_turns({"user_id": user, **t} for t in TURNS)
        assert await store.search(user, "bees", similarity_threshold=0.0)
        assert store.core.held.get(user) is not None
        await store.forget_user(user)
        assert store.core.held.get(user) is None
        assert await store.search(user, "bees", similarity_threshold=0.0) == []


async def test_nothing_held_when_the_budget_is_zero(
    settings: Settings, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`held_memories_mb` 0: each search reads its user's rows once, and finds the same."""
    reads: list[str] = []

    async def counted(conn: Any, *, user_id: str, ids: list[UUID] | None) -> Any:
        reads.append(user_id)
        return await held_rows(conn, user_id=user_id, ids=ids)

    monkeypatch.setattr("recall.store.held.held_rows", counted)
    async with staged(settings.replace(held_memories_mb=0)) as store:
        await store.add_turns({"user_id": user, **t} for t in TURNS)
        for _ in range(2):
            found = await store.search(user, TURNS[1]["user_message"], similarity_threshold=0.0)
            assert found[0].user_message == TURNS[1]["user_message"]
            assert store.core.held.get(user) is None
        assert reads == [user, user]


async def test_vectors_of_another_length_are_read_again(settings: Settings, user: str) -> None:
    """Held vectors of another length than the query's (a re-embedding swapped the column)
    are read again; a query the database's vectors do not match fails as the call would."""
    async with staged(settings) as store:
        await store.add_turns({"user_id": user, **t} for t in TURNS[:3])
        assert await store.search(user, "bees", similarity_threshold=0.0)
        held = store.core.held.get(user)
        assert held is not None
        stale = HeldUser.of((*r[:8], np.zeros(8, np.float32), *r[9:]) for r in held.rows)
        store.core.held._users[user] = stale
        found = await store.search(user, TURNS[1]["user_message"], similarity_threshold=0.0)
        assert found[0].user_message == TURNS[1]["user_message"]
        assert store.core.held.get(user) is not stale
        with pytest.raises(StoreError, match="different vector dimensions"):
            await store._candidates._held_candidates(
                user, np.full(8, 0.5, np.float32), 3, KeywordSide(())
            )


async def test_a_write_here_brings_what_is_held_up_to_date(
    settings: Settings, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write in this process the held rows are brought up to date in the background
    (decision 0060): the next search finds them current and reads no row."""
    reads: list[str] = []

    async def counted(conn: Any, *, user_id: str, ids: list[UUID] | None) -> Any:
        reads.append(user_id)
        return await held_rows(conn, user_id=user_id, ids=ids)

    monkeypatch.setattr("recall.store.held.held_rows", counted)
    async with staged(settings) as store:
        await store.add_turns({"user_id": user, **t} for t in TURNS)
        assert await store.search(user, "bees", similarity_threshold=0.0)
        before = store.core.held.get(user)
        assert before is not None and reads == [user]
        await store.add_turn(user, "My cat is called Miso", "Cute name!")
        await asyncio.gather(*store.core._refreshing.values())
        after = store.core.held.get(user)
        assert after is not None and len(after.rows) == len(before.rows) + 1
        assert reads == [user, user]  # the refresh read the new row
        found = await store.search(user, "My cat is called Miso", similarity_threshold=0.0)
        assert found[0].user_message == "My cat is called Miso"
        assert reads == [user, user] and store.core.held.get(user) is after
