"""Issue 45, item 2, on a real database: a stored turn is embedded and indexed by its user text
and its reply's own words (decision 0038), a question answered with nothing of its own is not
evidence, and `recall reembed` brings turns stored before over while searches go on."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np
import pytest
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection

from recall.config import RetrievalMode, Settings
from recall.db.memories import add_memory
from recall.db.migrate import apply_migrations, bind_embedding_space, load_migrations
from recall.db.pool import connect_once
from recall.db.reembed import reembed
from recall.db.sql import fetch_value
from recall.embeddings import Embedder
from recall.memory import Memory, embedding_text, make_turn
from recall.search.provenance import KEY, Provenance, provenance_of, with_provenance
from recall.store import MemoryStore
from recall.testing import FakeEmbeddings
from tests.conftest import Databases

ALLERGY = "My daughter Mia is allergic to peanuts."
VEGETARIAN = "We're going vegetarian this month."
QUOTING = "Remember that Mia is allergic to peanuts! Try a lentil curry or a chickpea stew."
OWN = "Try a lentil curry or a chickpea stew."
# vectors are stored as float32 (pgvector's vector): equal to the embedding within that
FLOAT32 = 1e-6


def retrieved(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "user_message": m.user_message, "ai_response": m.ai_response}


async def stored_vector(conn: AsyncConnection[Any], user: str, memory_id: str | UUID) -> Any:
    cur = await conn.execute(
        b"SELECT embedding FROM recall.memories WHERE user_id = %s AND id = %s", (user, memory_id)
    )
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def keyword_match(conn: AsyncConnection[Any], user: str, memory_id: str, word: str) -> bool:
    cur = await conn.execute(
        b"SELECT fts @@ plainto_tsquery('english', %s) FROM recall.memories"
        b" WHERE user_id = %s AND id = %s",
        (word, user, memory_id),
    )
    row = await cur.fetchone()
    assert row is not None
    return bool(row[0])


async def test_a_turn_is_found_by_its_own_words_not_by_what_it_quotes(
    store: MemoryStore, database_url: str, user: str
) -> None:
    fact = await store.add_turn(user, ALLERGY, "Noted.")
    provenance = provenance_of(VEGETARIAN, QUOTING, [retrieved(fact)])
    turn = await store.add_turn(user, VEGETARIAN, QUOTING, provenance=provenance)
    assert turn.ai_response == QUOTING  # callers are shown the reply as it was
    assert turn.metadata[KEY]["own"] == OWN

    found = await store.search(user, "peanuts", mode="keyword", similarity_threshold=0.0)
    assert [m.id for m in found] == [fact.id]
    assert [m.id for m in await store.search(user, "chickpea", mode="keyword")] == [turn.id]

    conn = await connect_once(database_url)
    await register_vector_async(conn)
    try:
        assert not await keyword_match(conn, user, turn.id, "allergic")
        assert await keyword_match(conn, user, turn.id, "vegetarian")
        [own] = await store.embedder.embed_documents([embedding_text(VEGETARIAN, QUOTING, OWN)])
        vector = await stored_vector(conn, user, turn.id)
        assert np.allclose(vector.to_numpy(), own, atol=FLOAT32)
    finally:
        await conn.close()


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
async def test_a_question_answered_noted_never_comes_before_a_fact(
    store: MemoryStore, user: str, mode: RetrievalMode
) -> None:
    # the example graph's offline responder answers "Noted." to what it cannot answer
    skoda = await store.add_turn(user, "I sold the Panda, I drive a grey Skoda now", "Noted.")
    await store.add_turn(user, "What car do I have?", "Noted.")
    # asked again, and answered from memory only: nothing of the reply is its own
    answer = "You drive a grey Skoda now."
    quoted = provenance_of("What car do I have now?", answer, [retrieved(skoda)])
    assert quoted is not None and quoted.own == ""
    await store.add_turn(user, "What car do I have now?", answer, provenance=quoted)
    await store.add_turn(user, "My bike is a red Bianchi", "Nice bike!")

    found = await store.search(user, "Which car do I drive?", similarity_threshold=0.0, mode=mode)
    texts = [m.user_message for m in found]
    assert texts[0] == skoda.user_message
    assert "What car do I have?" not in texts and "What car do I have now?" not in texts
    assert len(await store.recent(user, 10)) == 4  # still stored


async def test_an_exported_turn_keeps_its_own_words_through_import(
    store: MemoryStore, database_url: str, user: str
) -> None:
    fact = await store.add_turn(user, ALLERGY, "Noted.")
    provenance = provenance_of(VEGETARIAN, QUOTING, [retrieved(fact)])
    await store.add_turn(user, VEGETARIAN, QUOTING, provenance=provenance)
    exported = [m async for m in store.export(user, page_size=10)]
    other = f"{user}-copy"
    # what `recall import` hands the store (recall.cli.importing.export_line's fields)
    await store.add_turns(
        {"user_id": other, "user_message": m.user_message, "ai_response": m.ai_response,
         "metadata": m.metadata, "kind": m.kind, "created_at": m.created_at}
        for m in exported
    )  # fmt: skip
    [copy] = [m for m in await store.recent(other, 5) if m.user_message == VEGETARIAN]
    assert copy.metadata[KEY]["own"] == OWN
    found = await store.search(other, "peanuts", mode="keyword", similarity_threshold=0.0)
    assert [m.user_message for m in found] == [ALLERGY]


async def old_turns(conn: AsyncConnection[Any], embedder: Embedder, users: list[str]) -> None:
    """Turns stored as before decision 0038: the provenance has `quoted` and no `own`, the
    vector is the whole texts'."""
    for user in users:
        fact = make_turn(user, ALLERGY, "Noted.")
        [vector] = await embedder.embed_documents([fact.text])
        added = await add_memory(conn, fact, vector, embedder.name)
        assert added is not None
        source = str(added.memory_id)
        for i in range(9):
            plain = make_turn(user, f"{VEGETARIAN} Week {i}.", QUOTING)
            # the writer of before: no own part judged (Provenance.own_judged False)
            turn = with_provenance(plain, Provenance((source,), (source,), False))
            assert "own" not in turn.metadata[KEY]
            [vector] = await embedder.embed_documents([turn.text])
            assert turn.text == embedding_text(turn.user_message, QUOTING)
            assert await add_memory(conn, turn, vector, embedder.name) is not None


async def test_reembed_brings_old_turns_over_while_searches_run(databases: Databases) -> None:
    url = await databases.create()
    embedder = Embedder(FakeEmbeddings(64))
    users = ["u-a", "u-b", "u-c"]
    conn = await connect_once(url)
    try:
        # a database of the version before: migrations to 0023, turns written the old way
        await apply_migrations(conn, [m for m in load_migrations() if m.version < 24])
        await register_vector_async(conn)
        await bind_embedding_space(conn, embedder.name, 64)
        await old_turns(conn, embedder, users)
        later = [m.version for m in load_migrations() if m.version >= 24]
        assert await apply_migrations(conn) == later  # on the existing database
        cur = await conn.execute(
            b"SELECT count(*) FROM recall.memories"
            b" WHERE fts @@ plainto_tsquery('english', 'allergic')"
        )
        assert await cur.fetchone() == (30,)  # 0024 changes no row: still indexed the old way
    finally:
        await conn.close()

    settings = Settings(database_url=url, embedding_cache_ttl=0)
    conn = await connect_once(url)
    await register_vector_async(conn)
    # this session holds the judging's lock: the store's own background judging leaves the
    # rows to `recall reembed` here, whose batches the searches run between
    assert await fetch_value(conn, "judging_try_lock")
    async with MemoryStore.connect(settings, embeddings=FakeEmbeddings(64)) as store:
        assert await store.wait_for_judging() is None  # another session was at it
        answered = 0

        async def search(_done: int) -> None:
            nonlocal answered
            for user in users:
                for mode in ("keyword", "hybrid"):
                    found = await store.search(user, "allergic to peanuts", mode=mode)
                    assert found  # the fact answers throughout
                    answered += 1

        try:
            progress: list[int] = []

            async def step(done: int) -> None:
                progress.append(done)
                await search(done)

            await search(0)
            # 30 memories judged (27 quoting turns brought over to their own words), 4 a batch
            assert await reembed(conn, embedder, batch=4, on_progress=step) == 30
            assert progress[-1] == 30 and len(progress) == 8
            assert answered == 6 * 9
            assert await reembed(conn, embedder, batch=4) == 0  # every row done: a no-op

            cur = await conn.execute(
                b"SELECT user_id, id, user_message, ai_response, metadata, embedding,"
                b" fts @@ plainto_tsquery('english', 'allergic')"
                b" FROM recall.memories WHERE user_message <> %s",
                (ALLERGY,),
            )
            rows = await cur.fetchall()
            assert len(rows) == 27
            for _user, _id, user_message, reply, metadata, vector, allergic in rows:
                assert reply == QUOTING and metadata[KEY]["own"] == OWN
                [own] = await embedder.embed_documents([embedding_text(user_message, reply, OWN)])
                assert np.allclose(vector.to_numpy(), own, atol=FLOAT32)
                assert not allergic  # a word only the quoted sentence has
            # BM25's per-user token counts followed the shorter documents
            cur = await conn.execute(
                b"SELECT count(*) FROM recall.users AS u WHERE total_tokens <>"
                b" (SELECT sum(doc_len) FROM recall.memories AS m WHERE m.user_id = u.user_id)"
            )
            assert await cur.fetchone() == (0,)
        finally:
            await conn.close()
        found = await store.search("u-b", "allergic to peanuts", mode="keyword")
        assert [m.user_message for m in found] == [ALLERGY]
