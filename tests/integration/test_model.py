"""The real all-MiniLM-L6-v2 model, loaded offline from the installed wheel."""

import pytest

from recall.store import MemoryStore

pytestmark = pytest.mark.model


async def test_dog_name_is_found_for_its_owner_only(model_store: MemoryStore) -> None:
    max_turn = await model_store.add_turn(
        "alice", "I adopted a dog named Max", "Congratulations! Max is a great name."
    )
    await model_store.add_turn("alice", "I work as a nurse in Lyon", "That sounds demanding.")
    await model_store.add_turn("bob", "My favourite food is ramen", "Ramen is delicious.")

    hits = await model_store.search("alice", "What is my dog's name?")
    assert hits, "the default threshold (0.5) must let this memory through"
    assert hits[0].id == max_turn.id
    assert hits[0].similarity is not None and hits[0].similarity >= 0.5

    for hit in await model_store.search("bob", "What is my dog's name?", similarity_threshold=0.0):
        assert hit.id != max_turn.id
        assert "Max" not in hit.user_message


async def test_model_is_recorded_with_the_data(model_store: MemoryStore) -> None:
    async with model_store.connection(all_users=True) as conn:
        cur = await conn.execute(b"SELECT model_name, dimensions FROM recall.embedding_space")
        assert await cur.fetchone() == ("all-MiniLM-L6-v2", 384)
