"""Turns judged once, when written (issue 54, decision 0049): the columns the searches read,
filled from the metadata by the trigger (migration 0027), and a store made before the change
judged in the background when it opens, answering throughout."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from recall.config import Settings
from recall.search.judging import RULE
from recall.search.provenance import KEY, Provenance
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

FACT = "I keep bees on the roof of our building."
QUOTING = f"You told me:\n{FACT}"


async def columns(conn: AsyncConnection[Any], user: str) -> dict[str, tuple[Any, ...]]:
    """Each memory's (holds, judged, supersedes), by its user text."""
    cur = await conn.execute(
        b"SELECT user_message, holds, judged, supersedes::text FROM recall.memories"
        b" WHERE user_id = %s",
        (user,),
    )
    return {r[0]: tuple(r[1:]) for r in await cur.fetchall()}


async def test_each_turn_is_judged_when_written_and_the_columns_follow(
    store: MemoryStore, user: str
) -> None:
    fact = await store.add_turn(user, FACT, "Noted.")
    await store.add_turn(user, "thanks a lot!", "You're welcome!")
    await store.add_turn(user, "Where is the hive?", "I'm not sure.")
    quoted = Provenance((fact.id,), (fact.id,), True, own="", own_judged=True)
    await store.add_turn(user, "Tell me about my bees", QUOTING, provenance=quoted)
    moved = Provenance((fact.id,), supersedes=fact.id)
    await store.add_turn(user, "I moved the bees to an allotment now.", "Noted.", provenance=moved)
    async with store.connection(user) as conn:
        assert await columns(conn, user) == {
            FACT: ("statement", RULE, None),
            "thanks a lot!": ("small_talk", RULE, None),
            "Where is the hive?": ("question", RULE, None),
            "Tell me about my bees": ("restatement", RULE, None),  # its reply only quotes
            "I moved the bees to an allotment now.": ("statement", RULE, fact.id),
        }
        # what the caller writes under the library's key cannot fail a write: anything
        # malformed leaves the column NULL
        await conn.execute(
            b"UPDATE recall.memories SET metadata = jsonb_set(metadata, '{recall}',"
            b' \'{"holds": "bogus", "rule": 123456, "supersedes": "nope"}\')'
            b" WHERE user_id = %s AND id = %s",
            (user, fact.id),
        )
        assert (await columns(conn, user))[FACT] == (None, None, None)
    found = await store.search(user, "bees", similarity_threshold=0.0)
    assert FACT in {m.user_message for m in found}  # unjudged again: a candidate, judged here


async def test_a_store_made_before_is_judged_in_the_background_and_answers_throughout(
    databases: Databases,
) -> None:
    url = await databases.create()
    settings = Settings(database_url=url, embedding_cache_ttl=0)
    user = "before"
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        await store.wait_for_judging()
        fact = await store.add_turn(user, FACT, "Noted.")
        await store.add_turn(user, "thanks a lot!", "You're welcome!")
        # a turn written before decision 0049: its lead-in was its own words then
        old = Provenance((fact.id,), (fact.id,), True, own="You told me:", own_judged=True)
        await store.add_turn(user, "Tell me about my bees", QUOTING, provenance=old)
        async with store.connection(all_users=True) as conn:
            await conn.execute(
                b"UPDATE recall.memories SET metadata = CASE"
                b" WHEN user_message = 'Tell me about my bees' THEN jsonb_set(metadata,"
                b" '{recall,own}', '\"You told me:\"') ELSE metadata END"
                b" #- '{recall,holds}' #- '{recall,rule}' WHERE user_id = %s",
                (user,),
            )
            assert {v[0] for v in (await columns(conn, user)).values()} == {None}
        # not judged yet: the read path judges what it meets, and small talk never answers
        found = await store.search(user, "thanks a lot!", similarity_threshold=0.0)
        assert "thanks a lot!" not in {m.user_message for m in found}
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        assert await store.wait_for_judging() == 3
        async with store.connection(all_users=True) as conn:
            assert await columns(conn, user) == {
                FACT: ("statement", RULE, None),
                "thanks a lot!": ("small_talk", RULE, None),
                "Tell me about my bees": ("restatement", RULE, None),
            }
        [quoting] = [m for m in await store.recent(user, 5) if m.ai_response == QUOTING]
        assert quoting.metadata[KEY]["own"] == ""  # the lead-in is not its own any more
        found = await store.search(user, "thanks a lot!", similarity_threshold=0.0)
        assert "thanks a lot!" not in {m.user_message for m in found}
        found = await store.search(user, "bees", similarity_threshold=0.0)
        assert [m.user_message for m in found] == [FACT]
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        assert await store.wait_for_judging() == 0  # every row judged: nothing to do
