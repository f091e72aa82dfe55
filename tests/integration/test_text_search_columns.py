"""`fts` and `doc_len` are kept by a trigger since migration 0007 (one parse of the body per
write): they must hold exactly what the generated columns of 0002/0003 computed."""

from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from recall.db.pool import connect_once
from recall.memory import make_turn
from recall.store import MemoryStore

# the generated expressions of migrations 0002 and 0003, verbatim
GENERATED_FTS = """
    setweight(to_tsvector('english'::regconfig, coalesce(metadata ->> 'title', '')), 'A')
    || setweight(
        to_tsvector(
            'english'::regconfig,
            coalesce(metadata ->> 'entities_text', '') || ' '
            || coalesce(metadata ->> 'key_phrases_text', '')
        ),
        'B'
    )
    || to_tsvector('english'::regconfig, user_message || ' ' || ai_response)
"""
GENERATED_DOC_LEN = (
    "recall.tsvector_tokens(to_tsvector('english'::regconfig, user_message || ' ' || ai_response))"
)


async def mismatches(conn: AsyncConnection[Any], user: str) -> tuple[int, int]:
    """(rows of `user`, rows whose fts or doc_len differ from the generated expressions)."""
    cur = await conn.execute(
        f"SELECT count(*), count(*) FILTER (WHERE fts IS DISTINCT FROM ({GENERATED_FTS})"  # noqa: S608
        f" OR doc_len IS DISTINCT FROM {GENERATED_DOC_LEN})"
        " FROM recall.memories WHERE user_id = %s",
        (user,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def test_the_trigger_computes_what_the_generated_columns_did(
    store: MemoryStore, database_url: str, user: str
) -> None:
    await store.add_turn(user, "I adopted a greyhound called Pixel", "Lovely! How old is Pixel?")
    await store.add_turns(
        {
            "user_id": user,
            "user_message": f"Running {i} km along the river before work, {i} times a week",
            "ai_response": "That is a good habit; the river path is flat and quiet.",
            "metadata": {"title": f"run {i}", "entities_text": "river", "key_phrases_text": "km"},
        }
        for i in range(300)
    )
    conn = await connect_once(database_url)
    try:
        assert await mismatches(conn, user) == (301, 0)
        cur = await conn.execute(
            "SELECT count(*) FROM recall.memories"
            " WHERE user_id = %s AND fts @@ to_tsquery('english', 'greyhound') AND doc_len > 0",
            (user,),
        )
        assert await cur.fetchone() == (1,)
    finally:
        await conn.close()


async def test_updates_recompute_them_and_they_cannot_be_set_by_hand(
    store: MemoryStore, database_url: str, user: str
) -> None:
    memory = await store.add_turn(user, "We talked about sourdough", "Starter needs feeding")
    conn = await connect_once(database_url)
    try:
        await conn.execute(
            "UPDATE recall.memories SET metadata = %s, user_message = 'We baked rye bread'"
            " WHERE user_id = %s AND id = %s",
            (Jsonb({"title": "baking"}), user, memory.id),
        )
        await conn.execute(
            "UPDATE recall.memories SET fts = to_tsvector('english', 'tampered'), doc_len = 999"
            " WHERE user_id = %s",
            (user,),
        )
        await conn.commit()
        assert await mismatches(conn, user) == (1, 0)
        cur = await conn.execute(
            "SELECT fts @@ to_tsquery('english', 'rye & baking'),"
            " fts @@ to_tsquery('english', 'sourdough | tampered') FROM recall.memories"
            " WHERE user_id = %s",
            (user,),
        )
        assert await cur.fetchone() == (True, False)
    finally:
        await conn.close()


OLDER, NEWER = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)


async def stored_twice(store: MemoryStore, user: str, turns: list[dict[str, Any]]) -> list[str]:
    """Store `turns` for `user`, and in the reverse order for a second user; return both users
    with the turns each should get on a tie, best first: the newer memory first, then by
    content hash (migration 0023), as `make_turn` computes it for that user."""
    other = user + "-again"
    await store.add_turns({**t, "user_id": user} for t in turns)
    await store.add_turns({**t, "user_id": other} for t in reversed(turns))
    return [user, other]


def tie_order(who: str, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`turns` in the order a tie puts them for user `who`."""

    def key(t: dict[str, Any]) -> tuple[bool, bytes]:
        made = make_turn(who, t["user_message"], t["ai_response"],
                         conversation_id=t.get("conversation_id"))  # fmt: skip
        return t["created_at"] == OLDER, made.content_hash

    return sorted(turns, key=key)


async def test_equal_bm25_is_an_exact_tie_broken_by_what_a_rebuild_keeps(
    store: MemoryStore, user: str
) -> None:
    # the same terms and length (the "!"s are no lexemes): the same BM25 to the last digit,
    # whatever order the terms were summed in (migration 0016); the tie goes to the newer
    # memory, then by content hash (migration 0023), never by the random id, so two users
    # (or two databases) holding the same memories, stored in any order, get the same order
    turns = [
        {"user_message": "alpha beta gamma delta" + "!" * i, "ai_response": "ok",
         "created_at": NEWER if i % 2 else OLDER}
        for i in range(6)
    ]  # fmt: skip
    for who in await stored_twice(store, user, turns):
        found = await store.search(who, "alpha beta gamma delta", limit=6, mode="keyword")
        assert len(found) == 6 and len({m.score for m in found}) == 1
        assert [m.user_message for m in found] == [t["user_message"] for t in tie_order(who, turns)]


async def test_an_equal_distance_is_a_tie_broken_by_what_a_rebuild_keeps(
    store: MemoryStore, user: str
) -> None:
    # one text in four conversations: four memories at the same distance from any query
    turns = [
        {"user_message": "my bike is green", "ai_response": "ok", "conversation_id": f"c{i}",
         "created_at": NEWER if i % 2 else OLDER}
        for i in range(4)
    ]  # fmt: skip
    for who in await stored_twice(store, user, turns):
        found = await store.search(who, "what colour is my bike", 4, 0.0, mode="semantic")
        assert len({m.similarity for m in found}) == 1
        want = [t["conversation_id"] for t in tie_order(who, turns)]
        assert [m.conversation_id for m in found] == want
