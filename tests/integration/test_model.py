"""The real models, loaded offline: the default bge-small-en-v1.5 (packaged with recall) and
all-MiniLM-L6-v2 (the `minilm` extra, which `make test` installs)."""

from collections.abc import AsyncIterator

import pytest

from recall.config import Settings
from recall.store import MemoryStore
from tests.conftest import Databases

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
async def minilm_store(databases: Databases) -> AsyncIterator[MemoryStore]:
    """A store with all-MiniLM-L6-v2, named in the settings, in its own database."""
    url = await databases.create("recall_minilm")
    async with MemoryStore.connect(
        Settings(database_url=url, embedding_model="all-MiniLM-L6-v2")
    ) as s:
        yield s


@pytest.fixture(params=["default", "minilm"])
def real_store(
    request: pytest.FixtureRequest, model_store: MemoryStore, minilm_store: MemoryStore
) -> MemoryStore:
    return model_store if request.param == "default" else minilm_store


async def test_dog_name_is_found_for_its_owner_only(real_store: MemoryStore) -> None:
    alice, bob = f"alice-{real_store.embedder.name}", f"bob-{real_store.embedder.name}"
    max_turn = await real_store.add_turn(
        alice, "I adopted a dog named Max", "Congratulations! Max is a great name."
    )
    await real_store.add_turn(alice, "I work as a nurse in Lyon", "That sounds demanding.")
    await real_store.add_turn(bob, "My favourite food is ramen", "Ramen is delicious.")

    hits = await real_store.search(alice, "What is my dog's name?")
    assert hits, "the default threshold (0.5) must let this memory through"
    assert hits[0].id == max_turn.id
    assert hits[0].similarity is not None and hits[0].similarity >= 0.5

    for hit in await real_store.search(bob, "What is my dog's name?", similarity_threshold=0.0):
        assert hit.id != max_turn.id
        assert "Max" not in hit.user_message


@pytest.mark.parametrize(
    ("fixture", "model"),
    [("model_store", "bge-small-en-v1.5"), ("minilm_store", "all-MiniLM-L6-v2")],
)
async def test_model_is_recorded_with_the_data(
    request: pytest.FixtureRequest, fixture: str, model: str
) -> None:
    store: MemoryStore = request.getfixturevalue(fixture)
    assert store.embedder.name == model
    async with store.connection(all_users=True) as conn:
        cur = await conn.execute(b"SELECT model_name, dimensions FROM recall.embedding_space")
        assert await cur.fetchone() == (model, 384)
