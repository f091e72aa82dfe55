"""A question asked before and left unanswered does not come back in place of the memory that
answers it, in any mode."""

from __future__ import annotations

import pytest

from recall.config import RetrievalMode
from recall.store import MemoryStore


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
async def test_the_answer_comes_back_not_the_earlier_question(
    store: MemoryStore, user: str, mode: RetrievalMode
) -> None:
    await store.add_turn(user, "my sister Ana lives in Lisbon", "Lisbon is lovely.")
    await store.add_turn(user, "where does my sister Ana live?", "I'm not sure.")
    await store.add_turn(user, "my dog is called Max", "Good dog.")
    await store.add_turn(user, "where is my sister Ana going this June?", "Not sure, sorry.")
    found = await store.search(
        user, "where does my sister Ana live?", limit=3, similarity_threshold=0.0, mode=mode
    )
    texts = [m.user_message for m in found]
    assert texts[0] == "my sister Ana lives in Lisbon"
    assert "where does my sister Ana live?" not in texts
    assert "where is my sister Ana going this June?" not in texts  # nor any unanswered question
    assert len(await store.recent(user, 10)) == 4  # still stored
