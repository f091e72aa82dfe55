"""The memories a search holds between searches (recall.store.held, migration 0034): the
details they give are those of `recall.search_details` (the call they replace), and they follow
every insert, update and delete, in this process or another."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from recall.config import Settings
from recall.db.search_rows import held_rows, held_versions
from recall.errors import StoreError
from recall.rows import DETAIL_COLUMNS
from recall.store import MemoryStore
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
            b"SELECT * FROM recall.search_details(%s, %s, %s, %s, true)",
            (user, vector, limit, ids),
        )
        return await cur.fetchall()


async def _held(store: MemoryStore, user: str) -> HeldUser:
    async with store.pool.connection() as conn:
        return HeldUser.of(await held_rows(conn, user_id=user, ids=None))


def _same_details(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    """The held details are the call's: the same rows in the same order, the same texts,
    metadata and neighbours, and the distances and vectors to float32's precision."""
    assert [g[0] for g in got] == [w[0] for w in want]
    floats = {"distance", "prev_distance", "next_distance"}
    for g, w in zip(got, want, strict=True):
        for name, a, b in zip(DETAIL_COLUMNS, g, w, strict=True):
            if name in floats:
                assert (a is None) == (b is None), name
                assert a is None or a == pytest.approx(b, abs=1e-6), name
            elif name == "embedding":
                assert np.allclose(np.asarray(a), b.to_numpy(), atol=0), name
            else:
                assert a == b, name


@pytest.mark.citus
async def test_the_held_details_are_the_calls(store: MemoryStore, user: str) -> None:
    ids = await store.add_turns({"user_id": user, **t} for t in TURNS)
    held = await _held(store, user)
    assert held.dimensions == 64 and len(held.rows) == len(TURNS)
    for query, limit, wanted in [
        ("bees and honey", 3, []),
        ("my sister", 2, [UUID(ids[6]), UUID(ids[0])]),
        ("allergies", 8, [UUID(ids[5])]),
        ("anything", 0, [UUID(ids[3]), UUID(ids[7])]),
        ("all of them", 20, []),
    ]:
        vector = await store.embedder.embed_query(query)
        want = await _sql_details(store, user, vector, limit, wanted)
        _same_details(held.details(vector, limit, wanted, vectors=True), want)
    # without vectors, the same rows with none
    vector = await store.embedder.embed_query("bees")
    assert all(r[8] is None for r in held.details(vector, 3, [], vectors=False))


@pytest.mark.citus
async def test_a_sync_follows_every_write(store: MemoryStore, user: str) -> None:
    """Inserts, an update and a delete are each seen at the next sync; with nothing changed
    the same held rows are kept."""
    ids = await store.add_turns({"user_id": user, **t} for t in TURNS[:4])
    held = HeldRows(64)
    async with store.pool.connection() as conn:
        first = await held.sync(conn, user)
        assert await held.sync(conn, user) is first
        # the stamp the rows were read under: no versions sent; none known: every memory's
        unchanged = await held_versions(conn, user_id=user, stamp=first.stamp)
        assert unchanged.stamp == first.stamp and unchanged.ids is None
        listed = await held_versions(conn, user_id=user, stamp=None)
        assert sorted(listed.ids or []) == sorted(UUID(i) for i in ids)
        await store.add_turn(user, "I moved to Porto last year", "How is it?")
        grown = await held.sync(conn, user)
        assert len(grown.rows) == 5 and grown is not first
        async with store.connection(user) as scoped:
            await scoped.execute(
                b"UPDATE recall.memories SET metadata = metadata || '{\"tag\": 7}' WHERE id = %s",
                (ids[1],),
            )
        changed = await held.sync(conn, user)
        row = changed.rows[changed.position[UUID(ids[1])]]
        assert len(changed.rows) == 5 and '"tag": 7' in row[6]
        assert await store.delete(user, ids[2])
        shrunk = await held.sync(conn, user)
        assert UUID(ids[2]) not in shrunk.position and len(shrunk.rows) == 4
        assert held.get(user) is shrunk
    vector = await store.embedder.embed_query("where do I live")
    _same_details(
        shrunk.details(vector, 3, [UUID(ids[0])], vectors=True),
        await _sql_details(store, user, vector, 3, [UUID(ids[0])]),
    )


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
            await store._candidates._held_details(user, np.full(8, 0.5, np.float32), 3, [], False)
