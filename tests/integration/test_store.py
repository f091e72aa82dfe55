import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from recall.config import Settings
from recall.db.pool import connect_once
from recall.errors import InvalidInputError, StoreError
from recall.nodes.text import format_memory
from recall.search.judging import RULE
from recall.search.provenance import repeats_of
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings


async def _checksum(store: MemoryStore) -> str:
    """A digest of every stored row: equal before and after means nothing changed."""
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(
            b"SELECT user_id, id::text, user_message, ai_response, metadata::text,"
            b" embedding::text FROM recall.memories ORDER BY user_id, id"
        )
        rows = await cur.fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


async def test_add_and_search_finds_the_turn(store: MemoryStore, user: str) -> None:
    stored = await store.add_turn(
        user,
        "I adopted a dog named Max",
        "Max is a great name for a dog",
        conversation_id="thread-1",
        metadata={"source": "test"},
    )
    hits = await store.search(user, "my dog named Max", limit=3, similarity_threshold=0.3)
    assert [h.id for h in hits] == [stored.id]
    hit = hits[0]
    assert hit.conversation_id == "thread-1"
    assert hit.metadata == {"source": "test", "recall": {"holds": "statement", "rule": RULE}}
    assert hit.similarity is not None and 0.3 <= hit.similarity <= 1.0
    assert hit.created_at.tzinfo is not None


async def test_same_turn_twice_is_stored_once(store: MemoryStore, user: str) -> None:
    first = await store.add_turn(user, "I keep bees", "Noted!", conversation_id="c")
    again = await store.add_turn(user, "I keep bees", "Noted!", conversation_id="c")
    assert first.id == again.id
    [stored] = await store.recent(user, 10)
    assert repeats_of(stored.metadata) == 0  # a retry, not a repeat
    # in another thread it is a repeat: counted on the first (issue 37), not stored again
    other_thread = await store.add_turn(user, "I keep bees", "Noted!", conversation_id="d")
    assert other_thread.id == first.id
    [stored] = await store.recent(user, 10)
    assert repeats_of(stored.metadata) == 1


async def test_small_talk_again_is_stored_again_and_never_answers(
    store: MemoryStore, user: str
) -> None:
    """A turn that holds nothing (decision 0049) is not among the memories a repeat is looked
    for in: said again in another thread, it is stored again. No search answers with either."""
    first = await store.add_turn(user, "hello there", "hi!", conversation_id="c")
    again = await store.add_turn(user, "hello there", "hi!", conversation_id="d")
    assert first.id != again.id
    assert first.metadata["recall"]["holds"] == "small_talk"
    assert await store.search(user, "hello there", similarity_threshold=0.0) == []


async def test_the_same_turn_written_at_once_from_many_tasks_is_one_memory(
    store: MemoryStore, user: str
) -> None:
    """recall.add_memory (migration 0009) under contention: every caller gets the one row, and
    the user's count (kept by the insert trigger) counts it once."""
    turns = [store.add_turn(user, "the same turn", "written eight times at once") for _ in range(8)]
    stored = await asyncio.gather(*turns)
    assert len({m.id for m in stored}) == 1
    assert [m.id for m in await store.recent(user, 10)] == [stored[0].id]
    async with store.connection(user) as conn:
        cur = await conn.execute(
            b"SELECT memory_count FROM recall.users WHERE user_id = %s", (user,)
        )
        assert await cur.fetchone() == (1,)


async def test_search_respects_limit_threshold_and_order(store: MemoryStore, user: str) -> None:
    for i in range(6):
        await store.add_turn(user, f"apples and pears number {i}", "noted")
    await store.add_turn(user, "completely unrelated sentence", "zzz")
    hits = await store.search(
        user, "apples and pears", limit=4, similarity_threshold=0.0, mode="semantic"
    )
    assert len(hits) == 4
    sims = [h.similarity for h in hits]
    assert sims == sorted(sims, reverse=True)  # type: ignore[type-var]
    strict = await store.search(
        user, "apples and pears", limit=10, similarity_threshold=0.99, mode="semantic"
    )
    assert all(h.similarity is not None and h.similarity >= 0.99 for h in strict)


async def test_users_never_see_each_other(store: MemoryStore, user: str) -> None:
    other = user + "-other"
    await store.add_turn(user, "my secret is the blue door", "I'll remember the blue door")
    assert await store.search(other, "blue door secret", similarity_threshold=0.0) == []
    assert await store.recent(other) == []
    # wildcards stand in place of real characters: a bare "%" may be a real user of another
    # test in this session database (test_isolation covers those ids by ownership)
    lookalikes = [user.upper(), user + " ", user.replace("-", "_"), "%" + user[1:],
                  "_" + user[1:], user[:-1] + "%", user[:-1] + "_"]  # fmt: skip
    for lookalike in lookalikes:
        assert await store.search(lookalike, "blue door", similarity_threshold=0.0) == []


async def test_recent_is_newest_first(store: MemoryStore, user: str) -> None:
    for day in (1, 3, 2):
        await store.add_turn(
            user, f"note of day {day}", "ok", created_at=datetime(2024, 5, day, tzinfo=UTC)
        )
    recent = await store.recent(user, n=2)
    assert [m.user_message for m in recent] == ["note of day 3", "note of day 2"]
    assert all(m.similarity is None for m in recent)


async def test_delete_and_forget(store: MemoryStore, user: str) -> None:
    keep = await store.add_turn(user, "keep this memory", "ok")
    drop = await store.add_turn(user, "drop this memory", "ok")
    assert await store.delete(user, drop.id) is True
    assert await store.delete(user, drop.id) is False
    assert await store.delete(user + "-x", keep.id) is False  # not theirs
    assert await store.delete(user, "not-a-uuid") is False
    assert [m.id for m in await store.recent(user)] == [keep.id]
    assert await store.get(user, keep.id) is not None
    assert await store.get(user + "-x", keep.id) is None
    assert await store.forget_user(user) == 1
    assert await store.recent(user) == []
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(b"SELECT count(*) FROM recall.users WHERE user_id = %s", (user,))
        row = await cur.fetchone()
    assert row == (0,)


async def test_bulk_import_is_ordered_and_idempotent(store: MemoryStore, user: str) -> None:
    turns = [
        {
            "user_id": user,
            "user_message": f"bulk message {i}",
            "ai_response": "ok",
            "metadata": {"i": i},
        }
        for i in range(250)
    ]
    turns.append(dict(turns[0]))  # a duplicate inside the same import
    ids = await store.add_turns(turns, batch_size=100)
    assert len(ids) == 251 and ids[0] == ids[-1]
    assert len(set(ids)) == 250
    assert await store.add_turns(turns, batch_size=64) == ids  # re-run stores nothing new
    stats_users = await store.recent(user, 1000)
    assert len(stats_users) == 250
    # without dates, the file's order is kept
    assert stats_users[0].user_message == "bulk message 249"


async def test_bulk_import_reports_the_bad_row_and_keeps_earlier_batches(
    store: MemoryStore, user: str
) -> None:
    turns = [{"user_id": user, "user_message": f"row {i}", "ai_response": "ok"} for i in range(5)]
    turns.insert(3, {"user_id": user, "user_message": "", "ai_response": "ok"})
    with pytest.raises(InvalidInputError, match="turn #3"):
        await store.add_turns(turns, batch_size=2)
    assert len(await store.recent(user, 100)) == 2  # the first batch; nothing of the bad one


async def test_bulk_import_reports_batches_in_order_while_the_next_is_prepared(
    store: MemoryStore, user: str
) -> None:
    # batches of 300 are checked in a worker thread while the one before is written
    turns = [
        {"user_id": user, "user_message": f"turn {i}", "ai_response": "ok"} for i in range(700)
    ]
    stored: list[int] = []
    counts: list[int] = []

    async def on_batch(n: int) -> None:
        counts.append(n)
        stored.append(len(await store.recent(user, 1000)))

    ids = await store.add_turns(turns, batch_size=300, on_batch=on_batch, writers=1)
    assert counts == [300, 600, 700]
    assert stored == [300, 600, 700]  # each report comes after its batch is committed
    assert [m.id for m in await store.recent(user, 1000)] == ids[::-1]


async def test_batches_written_at_once_keep_the_files_order(store: MemoryStore, user: str) -> None:
    turns = [
        {"user_id": user, "user_message": f"parallel turn {i}", "ai_response": "ok"}
        for i in range(430)
    ]
    committed: list[tuple[int, int]] = []

    async def on_batch(n: int) -> None:
        committed.append((n, len(await store.recent(user, 1000))))

    ids = await store.add_turns(turns, batch_size=40, writers=3, on_batch=on_batch)
    assert [n for n, _ in committed] == [*range(40, 430, 40), 430]
    assert all(stored >= n for n, stored in committed)  # a report follows its batch's commit
    assert len(set(ids)) == 430
    newest_first = await store.recent(user, 1000)
    assert [m.id for m in newest_first] == ids[::-1]  # dated in the file's order
    assert [m.user_message for m in newest_first[:2]] == ["parallel turn 429", "parallel turn 428"]


async def test_two_imports_of_the_same_turns_in_opposite_orders_do_not_deadlock(
    store: MemoryStore, user: str
) -> None:
    turns = [
        {"user_id": user, "user_message": f"shared turn {i}", "ai_response": "ok"}
        for i in range(600)
    ]
    # one batch each: in the file's order, each would lock half the keys the other needs next
    forward, backward = await asyncio.gather(
        store.add_turns(turns, batch_size=600),
        store.add_turns(turns[::-1], batch_size=600),
    )
    assert forward == backward[::-1]  # one row per turn, whichever import stored it
    assert len(await store.recent(user, 1000)) == 600


async def test_a_failed_batch_written_beside_another_leaves_whole_batches(
    store: MemoryStore, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = [
        {"user_id": user, "user_message": f"turn {i}", "ai_response": "ok"} for i in range(500)
    ]
    write = store._bulk._write_batch

    async def failing(
        batch: list,  # type: ignore[type-arg]
        vectors: list,  # type: ignore[type-arg]
        ids: list,  # type: ignore[type-arg]
        clock: datetime,
        first: int,
    ) -> tuple[list[str], int]:
        if first == 200:
            raise StoreError("add_turns failed: injected")
        return await write(batch, vectors, ids, clock, first)

    monkeypatch.setattr(store._bulk, "_write_batch", failing)
    reported: list[int] = []
    with pytest.raises(StoreError, match="injected"):
        await store.add_turns(turns, batch_size=100, writers=2, on_batch=reported.append)
    assert reported == [100, 200]
    stored = {m.user_message for m in await store.recent(user, 1000)}
    # batches 0-1 are stored, batch 2 failed, batch 3 was being written beside it (whole or
    # not at all), and batch 4 was never started
    assert {f"turn {i}" for i in range(200)} <= stored
    assert not stored & {f"turn {i}" for i in range(200, 300)}
    assert len(stored & {f"turn {i}" for i in range(300, 400)}) in (0, 100)
    assert not stored & {f"turn {i}" for i in range(400, 500)}
    monkeypatch.undo()
    ids = await store.add_turns(turns, batch_size=100, writers=2)  # re-run: the rest, once
    assert len(set(ids)) == 500 and len(await store.recent(user, 1000)) == 500


@pytest.mark.parametrize(("batch_size", "writers"), [(0, 2), (10, 0)])
async def test_bulk_import_rejects_bad_sizes(
    store: MemoryStore, user: str, batch_size: int, writers: int
) -> None:
    turn = {"user_id": user, "user_message": "hello", "ai_response": "ok"}
    with pytest.raises(InvalidInputError, match="must be >= 1"):
        await store.add_turns([turn], batch_size=batch_size, writers=writers)
    assert await store.recent(user) == []


async def test_precomputed_embeddings_are_used_and_checked(store: MemoryStore, user: str) -> None:
    vector = [0.0] * 64
    vector[5] = 1.0
    [mid] = await store.add_turns(
        [
            {
                "user_id": user,
                "user_message": "vector given",
                "ai_response": "ok",
                "embedding": vector,
            }
        ]
    )
    hits = await store.search(
        user,
        "anything",
        query_vector=vector,  # type: ignore[arg-type]
        similarity_threshold=0.99,
        mode="semantic",
    )
    assert [h.id for h in hits] == [mid]
    with pytest.raises(Exception, match="expected 64"):
        await store.add_turns(
            [{"user_id": user, "user_message": "bad vec", "ai_response": "ok", "embedding": [1.0]}]
        )


BAD_CALLS = [
    ("add", ("", "hello there", "hi"), "user_id must not be empty"),
    ("add", ("   ", "hello there", "hi"), "user_id must not be empty"),
    ("add", (None, "hello there", "hi"), "user_id must be a string"),
    ("add", ("u", "", "hi"), "user_message must not be empty"),
    ("add", ("u", "   \n", "hi"), "user_message must not be empty"),
    ("add", ("u", 123, "hi"), "user_message must be a string"),
    ("add", ("u", "hello", None), "ai_response must be a string"),
    ("add", ("u\x00x", "hello", "hi"), "NUL"),
    ("search", ("u", ""), "query must not be empty"),
    ("search", ("", "dogs"), "user_id must not be empty"),
    ("search", ("u", 5), "query must be a string"),
]


@pytest.mark.parametrize(("method", "args", "message"), BAD_CALLS)
async def test_bad_input_gets_a_clear_error_and_changes_nothing(
    store: MemoryStore, method: str, args: tuple[object, ...], message: str
) -> None:
    await store.add_turn("bad-input-witness", "a memory that must survive", "ok")
    before = await _checksum(store)
    call: Callable[..., Awaitable[object]] = store.add_turn if method == "add" else store.search
    with pytest.raises(InvalidInputError, match=message):
        await call(*args)
    assert await _checksum(store) == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"similarity_threshold": 1.5}, "similarity_threshold"),
        ({"similarity_threshold": "high"}, "similarity_threshold"),
    ],
)
async def test_bad_search_arguments(
    store: MemoryStore, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await store.search("u", "dogs", **kwargs)  # type: ignore[arg-type]


async def test_documented_cleanups(store: MemoryStore, user: str) -> None:
    huge = "x" * (10 * 1024 * 1024)
    stored = await store.add_turn(user, "nul\x00 and lone \ud800 surrogate", huge)
    assert stored.user_message == "nul and lone \ufffd surrogate"
    assert stored.ai_response == "x" * store.settings.max_message_length
    [back] = await store.recent(user, 1)
    assert back.user_message == stored.user_message
    assert len(back.ai_response) == store.settings.max_message_length
    long_query = "dogs " * 10_000  # cut to max_query_length before embedding
    assert isinstance(await store.search(user, long_query, similarity_threshold=0.0), list)


async def test_stats_count_users_and_memories(store: MemoryStore, user: str) -> None:
    await store.add_turn(user, "counted memory", "ok")
    stats = await store.stats()
    assert stats["memories"] >= 1 and stats["users"] >= 1 and stats["bytes"] > 0


async def test_a_write_keeps_the_users_plan_until_the_index_threshold(
    store: MemoryStore, user: str
) -> None:
    await store.add_turn(user, "first fact about pears", "ok")
    await store.search(user, "pears", similarity_threshold=0.0)
    assert store.core.plans[user] == (1, None)
    await store.add_turn(user, "second fact about pears", "ok")
    await store.add_turn(user, "second fact about pears", "ok")  # a duplicate adds nothing
    assert store.core.plans[user] == (2, None)  # the next search is still one call
    assert len(await store.search(user, "pears", similarity_threshold=0.0)) == 2
    async with MemoryStore.connect(
        store.settings.replace(user_index_threshold=3), embeddings=store.embedder.embeddings
    ) as small:
        await small.search(user, "pears", similarity_threshold=0.0)
        assert small.core.plans[user] == (2, None)
        await small.add_turns(
            [{"user_id": user, "user_message": "third fact about pears", "ai_response": "ok"}]
        )
        assert user not in small.core.plans  # over the threshold: re-read, and the build scheduled


async def test_dates_come_back_in_utc_whatever_the_servers_time_zone(databases: Any) -> None:
    """A server made on a machine in another time zone (initdb takes the machine's) gave dates
    in its zone, so a memory said at noon UTC read as the next day at UTC+14 in a prompt."""
    url = await databases.create("recall_tz")
    owner = await connect_once(url)
    try:
        await owner.execute(
            sql.SQL("ALTER DATABASE {} SET timezone = 'Pacific/Kiritimati'").format(
                sql.Identifier(str(conninfo_to_dict(url)["dbname"]))
            )
        )
    finally:
        await owner.close()
    noon = datetime(2026, 2, 15, 12, tzinfo=UTC)
    async with MemoryStore.connect(Settings(database_url=url), embeddings=FakeEmbeddings(8)) as s:
        await s.add_turn("tz", "I planted tulips", "Lovely!", created_at=noon)
        (memory,) = await s.recent("tz")
    assert memory.created_at == noon and memory.created_at.utcoffset() == timedelta(0)
    assert format_memory(1, memory).startswith("[1] 2026-02-15 ")
